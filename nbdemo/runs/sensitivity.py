"""How a claim's headline depends on the choices of ours that decide it, and each statistic's spread over the seeds.
Computed from the stored rows, by judging altered copies of them (`judge`: `rules.judge` with the claim's control
and fresh seeds, giving a headline); nothing is rerun:
- the headline under each declared alternative of a row (`alternatives`: another reading, window, estimator or
  threshold, computed on the same networks in the same run), and each threshold of ours inside a metric (a row's
  `inner`: the statistic recomputed with that threshold 10% lower and 10% higher), which is one case of them;
- the flip point of each threshold of ours on a row: the nearest threshold at which the headline changes;
- per row, its decisive number over the seeds and in the control (mean, min, max).
"""
import math
import statistics

from nbdemo.claims.verdict import holds, numbers
from nbdemo.runs.rules import SENSITIVE, scored

ORDERS = ("<", "<=", ">", ">=")  # comparisons with a nearby threshold to move to (not `== -1`: never diverged)
INNER = ("10% lower", "10% higher")


def decisive(row):
    """The one number that decides a row: its worst number against the comparison (the least for > and >=, the
    greatest for < and <=), the mean of several numbers for notes."""
    xs = numbers(row["value"])
    if row.get("op") in (">", ">="):
        return min(xs)
    if row.get("op") in ("<", "<="):
        return max(xs)
    return xs[0] if len(xs) == 1 else statistics.fmean(xs)


def _decisive(runs, name):
    """The finite decisive numbers of a row over the runs."""
    return [x for rec in runs.values() for r in rec["rows"]
            if r["name"] == name and r.get("value") is not None and math.isfinite(x := decisive(r))]


def _altered(runs, change):
    """A copy of the runs in which each row that `change(row)` gives anew (else None) is replaced, its pass/fail
    recomputed from its statistic."""
    def row(r):
        new = change(r)
        return r if new is None else {**new, "ok": holds(new["value"], new["op"], new["threshold"])}
    return None if runs is None else {s: {**rec, "rows": [row(r) for r in rec["rows"]]} for s, rec in runs.items()}


def _headline(judge, runs, control_runs, change):
    return judge(_altered(runs, change), _altered(control_runs, change))["headline"]


# ---------------------------------------------------------------- alternatives

def alternatives(row):
    """{name: {"value", "op", "threshold", "why"}}: a stored row's declared alternatives, and each threshold of ours
    inside its metric (`inner`) moved 10% either way ("<threshold>, 10% lower"), which keep the row's comparison."""
    out = {name: {"op": row["op"], "threshold": row["threshold"], **alt}
           for name, alt in (row.get("alternatives") or {}).items()}
    for key, values in (row.get("inner") or {}).items():
        for side, value in zip(INNER, values or ()):
            out[f"{key}, {side}"] = {"value": value, "op": row["op"], "threshold": row["threshold"],
                                     "why": f"a threshold of ours inside the metric, {side}"}
    return out


def undeclared(runs):
    """The scored rows whose threshold is ours and that declare no alternative, nor why none is plausible (the
    source's `no_alternative`): choices of ours the headline was never judged against."""
    return sorted({r["name"] for rec in runs.values() for r in rec["rows"]
                   if r["kind"] != "note" and (r.get("source") or {}).get("from") == "ours"
                   and not alternatives(r) and not r["source"].get("no_alternative")})


def inner(found, runs, now):
    """{threshold of ours inside a metric: {"lower", "higher": the headline with it 10% lower and higher (from
    `readings`' `found`), "sensitive": either differs from `now`}, or None where rows declare it without varying it}."""
    declared = [(key, v) for rec in runs.values() for r in rec["rows"] for key, v in (r.get("inner") or {}).items()]
    out = dict.fromkeys(key for key, _ in declared)
    for key in out.keys() - {key for key, v in declared if v is None}:
        if all(f"{key}, {side}" in found for side in INNER):
            lower, higher = (found[f"{key}, {side}"]["headline"] for side in INNER)
            out[key] = {"lower": lower, "higher": higher, "sensitive": now != lower or now != higher}
    return dict(sorted(out.items()))


def readings(judge, runs, control_runs, now):
    """{alternative: {"headline": the claim's headline with every row that declares it read so, in the claim and
    its control, "why", "rows": [those rows], "changes": whether it differs from `now`}}."""
    found = {}
    for rec in [*runs.values(), *(control_runs or {}).values()]:
        for r in rec["rows"]:
            for name, alt in alternatives(r).items():
                entry = found.setdefault(name, {"why": alt.get("why", ""), "rows": []})
                if r["name"] not in entry["rows"]:
                    entry["rows"].append(r["name"])
    for name, entry in found.items():
        entry["headline"] = _headline(judge, runs, control_runs,
                                      lambda r: {**r, **alternatives(r)[name]} if name in alternatives(r) else None)
        entry["changes"] = entry["headline"] != now
    return dict(sorted(found.items()))


def robustness(found):
    """{"robust": True when no alternative changes the headline, False when one does, None when none is declared;
    "depends": {row: {alternative: headline}} for the rows whose alternatives change it}."""
    depends = {}
    for name, entry in found.items():
        if entry["changes"]:
            for row in entry["rows"]:
                depends.setdefault(row, {})[name] = entry["headline"]
    return {"robust": None if not found else not depends, "depends": depends}


# ---------------------------------------------------------------- thresholds of ours

def _threshold(runs, name):
    """(threshold, "paper" or "ours"): the one scalar threshold a row has in every run, or None."""
    found = {(float(r["threshold"]), r["source"]["from"]) for rec in runs.values() for r in rec["rows"]
             if r["name"] == name and scored(r) and not isinstance(r["threshold"], list)}
    return next(iter(found)) if len(found) == 1 else None


def scale(runs, name):
    """The step on a statistic's own scale by which a threshold at 0 is moved: the standard deviation of the row's
    decisive number over the seeds, or its median absolute value where that is 0."""
    xs = _decisive(runs, name)
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return sd or (statistics.median(map(abs, xs)) if xs else 0.0)


def flip(judge, runs, control_runs, name, now):
    """The threshold nearest to the row's own at which the headline changes from `now`: {"at", "headline" (there),
    "threshold", "step" (10% of the threshold, or `scale` for a threshold at 0), "sensitive" (within a step)}, or
    None when no threshold changes it. A row's pass/fail can change only at a run's decisive number."""
    t0, best = _threshold(runs, name)[0], None
    for c in sorted(set(_decisive(runs, name) + _decisive(control_runs or {}, name)), key=lambda c: abs(c - t0)):
        if best and abs(c - t0) > abs(best[0] - t0):
            break
        for t in (c, c - 1e-9 * max(1, abs(c)), c + 1e-9 * max(1, abs(c))):
            h = _headline(judge, runs, control_runs, lambda r: {**r, "threshold": t}
                          if r["name"] == name and scored(r) else None)
            if h != now and (best is None or abs(t - t0) < abs(best[2] - t0)):
                best = (c, h, t)
    if best is None:
        return None
    step = SENSITIVE * abs(t0) if t0 else scale(runs, name)
    return {"at": best[0], "headline": best[1], "threshold": t0, "step": step, "sensitive": abs(best[0] - t0) <= step}


def flips(judge, runs, control_runs, now):
    """{row name: flip(...) or None} for every scored row whose threshold is ours and orders (`ORDERS`)."""
    names = {r["name"] for rec in runs.values() for r in rec["rows"]
             if r["kind"] != "note" and scored(r) and r["op"] in ORDERS}
    return {name: flip(judge, runs, control_runs, name, now) for name in sorted(names)
            if (t := _threshold(runs, name)) and t[1] == "ours"}


# ---------------------------------------------------------------- spread

def spread(runs, name):
    """{"n", "mean", "min", "max", "k" (numbers per run)} of a row's decisive number over runs, or None."""
    xs = _decisive(runs, name)
    if not xs:
        return None
    k = next(len(numbers(r["value"])) for rec in runs.values() for r in rec["rows"]
             if r["name"] == name and r.get("value") is not None)
    return {"n": len(xs), "mean": statistics.fmean(xs), "min": min(xs), "max": max(xs), "k": k}


def effects(runs, control_runs=None):
    """[(row, its spread over the runs, over the control's runs)] for every row, in the verdict's order (spreads are
    None for rows without numbers)."""
    seen, out = set(), []
    for rec in runs.values():
        for r in rec["rows"]:
            if r["name"] not in seen:
                seen.add(r["name"])
                out.append((r, spread(runs, r["name"]), spread(control_runs or {}, r["name"])))
    return out
