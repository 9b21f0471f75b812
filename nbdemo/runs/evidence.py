"""What a claim's stored runs are evidence of: its negative control and the checks the control passes too, the
thresholds of ours at which its headline over seeds would change, and each statistic's spread over seeds.

Everything here is computed from the stored rows (`nbdemo.claims.verdict` stores each row's numbers, comparison, threshold
and source); nothing is rerun. The rules, stated in the README and on the book's pages:
- A claim's *control* is its profile `control` (nbdemo/profiles/<CLAIM>.yml, with `control about: ...`), run over the
  same seeds; a claim with no trained network declares `no control: <reason>` instead.
- A check that holds in at least half of its control's seeds is *uninformative*: an untrained net (or shuffled
  labels, or the paper's null) passes it too, so passing it is no evidence. It cannot make a run REPRODUCED: a run
  whose checks all hold is REPRODUCED only when at least one of them is informative, else INCONCLUSIVE. A check
  that fails still counts against the claim, whatever its control does.
- A threshold of ours is *sensitive* when moving it by at most 10% changes the claim's headline.
"""
import math
import statistics
from collections import Counter

from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, holds, numbers, outcome
from nbdemo.runs import params, store

CONTROL = "control"
MIN_SEEDS, MAJORITY = 5, 0.8
MIXED, TOO_FEW = "MIXED", "TOO FEW SEEDS"
RULE = (f"A claim's headline over its seeds is REPRODUCED when at least {MAJORITY:.0%} of the seeds reproduce "
        f"(4 of 5), NOT REPRODUCED when at least {MAJORITY:.0%} do not reproduce, INCONCLUSIVE when more than half "
        f"are inconclusive (a requirement failed), and MIXED otherwise; with fewer than {MIN_SEEDS} seeds there "
        f"is no headline ({TOO_FEW}).")
SENSITIVE = 0.10
RULE = ("A check that also holds in the claim's negative control (the same pipeline where the claimed effect must be "
        "absent: the untrained network, shuffled labels or the paper's own null) in at least half of the control's "
        "seeds is *uninformative*: passing it is no evidence, so it cannot make a run REPRODUCED. A run whose checks "
        "all hold is REPRODUCED only if one of them is informative, and INCONCLUSIVE otherwise; a check that fails "
        "still counts against the claim. A threshold of this book's (source *ours*) is *sensitive* when the "
        f"headline over seeds changes within ±{SENSITIVE:.0%} of it.")


def headline(outcomes):
    """The claim's outcome over seeds, from the list of its runs' outcomes, by `RULE`."""
    n, count = len(outcomes), Counter(outcomes)
    if n < MIN_SEEDS:
        return TOO_FEW
    if count[INCONCLUSIVE] > n / 2:
        return INCONCLUSIVE
    for label in (REPRODUCED, NOT_REPRODUCED):
        if count[label] >= MAJORITY * n:
            return label
    return MIXED


def summary(claim, profile="default", overrides=None):
    """The dashboard's view of a claim: headline, counts and staleness over its stored seeds, or None."""
    runs = store.status(claim, profile, overrides)
    if not runs:
        return None
    outcomes = [r["outcome"] for r, _ in runs.values()]
    checks = {}
    for r, _ in runs.values():
        for row in r["rows"]:
            if row["kind"] != "note":
                n = checks.setdefault((row["kind"], row["name"]), [0, 0])
                n[0] += bool(row["ok"])
                n[1] += 1
    return {"headline": headline(outcomes), "n": len(outcomes), "reproduced": outcomes.count(REPRODUCED),
            "counts": Counter(outcomes), "stale": sorted(s for s, (_, fresh) in runs.items() if not fresh),
            "runs": {s: r for s, (r, _) in runs.items()}, "rows": checks,
            "wall_s": sorted(r["wall_s"] for r, _ in runs.values())[len(runs) // 2]}


def control(claim):
    """{"profile": "control" or None, "about": what the control is, or why the claim has none}; None when the claim
    declares neither."""
    texts = params.profile_file(claim)
    if CONTROL in params.profiles(claim):
        return {"profile": CONTROL, "about": texts.get("control about", "")}
    if "no control" in texts:
        return {"profile": None, "about": texts["no control"]}
    return None


def scored(row):
    """Whether a stored row carries its statistic, comparison and threshold (rows stored before them do not)."""
    return row.get("op") is not None and row.get("value") is not None


def row_ok(row, thresholds=None):
    """The row's pass/fail, recomputed with `thresholds[name]` in place of its own threshold where given."""
    t = (thresholds or {}).get(row["name"])
    if t is None or not scored(row):
        return row["ok"]
    return holds(row["value"], row["op"], t)


def run_outcome(rows, thresholds=None, uninformative=()):
    """A run's outcome from its rows (`claims.outcome`), where a REPRODUCED resting only on uninformative checks is
    INCONCLUSIVE."""
    rows = [{**r, "ok": row_ok(r, thresholds)} if r["kind"] != "note" else r for r in rows]
    informative = [r for r in rows if r["kind"] == "check" and r["name"] not in uninformative]
    o = outcome(rows)
    return INCONCLUSIVE if o == REPRODUCED and not informative else o


def uninformative(control_runs, thresholds=None):
    """Names of the checks that hold in at least half of the control's seeds."""
    counts = {}
    for rec in control_runs.values():
        for r in rec["rows"]:
            if r["kind"] == "check":
                n = counts.setdefault(r["name"], [0, 0])
                n[0] += bool(row_ok(r, thresholds))
                n[1] += 1
    return sorted(name for name, (k, n) in counts.items() if k >= n / 2)


def judge(runs, control_runs=None, thresholds=None):
    """The claim's headline over seeds from its runs and its control's: {"headline", "over_seeds" (before the
    control's rule), "uninformative"}. `thresholds` replaces rows' thresholds by name (for the sensitivity)."""
    names = {r["name"] for rec in runs.values() for r in rec["rows"] if r["kind"] == "check"}
    useless = [n for n in uninformative(control_runs or {}, thresholds) if n in names]
    return {"over_seeds": headline([run_outcome(r["rows"], thresholds) for r in runs.values()]),
            "uninformative": useless,
            "headline": headline([run_outcome(r["rows"], thresholds, useless) for r in runs.values()])}


def _threshold(runs, name):
    """The one scalar threshold a row has in every run, its source, or None (a row without one, or varying)."""
    found = {(float(r["threshold"]), r["source"]["from"]) for rec in runs.values() for r in rec["rows"]
             if r["name"] == name and scored(r) and not isinstance(r["threshold"], list)}
    return next(iter(found)) if len(found) == 1 else None


def flip(runs, control_runs, name):
    """The threshold nearest to the row's own at which the headline changes, and the headline there: (t, headline),
    or None when no threshold changes it. Candidates are the measured numbers of the row (in the runs and the
    control), where the row's pass/fail can change."""
    t0 = _threshold(runs, name)[0]
    now = judge(runs, control_runs)["headline"]
    values = {x for recs in (runs, control_runs or {}) for rec in recs.values() for r in rec["rows"]
              if r["name"] == name and scored(r) for x in numbers(r["value"]) if math.isfinite(x)}
    best = None
    for c in values:
        for t in (c, c - 1e-9 * max(1, abs(c)), c + 1e-9 * max(1, abs(c))):
            h = judge(runs, control_runs, {name: t})["headline"]
            if h != now and (best is None or abs(t - t0) < abs(best[0] - t0)):
                best = (t, h, c)
    return None if best is None else {"at": best[2], "headline": best[1], "threshold": t0,
                                      "sensitive": abs(best[2] - t0) <= SENSITIVE * abs(t0)}


def flips(runs, control_runs=None):
    """{row name: flip(...) or None} for every scored row whose threshold is ours and orders (<, <=, >, >=): an
    equality (`== -1`: never diverged) has no nearby threshold to move to."""
    names = {r["name"] for rec in runs.values() for r in rec["rows"]
             if r["kind"] != "note" and scored(r) and r["op"] in ("<", "<=", ">", ">=")}
    out = {}
    for name in sorted(names):
        t = _threshold(runs, name)
        if t and t[1] == "ours":
            out[name] = flip(runs, control_runs, name)
    return out


def decisive(row):
    """The one number that decides a row: its worst number against the comparison (the least for > and >=, the
    greatest for < and <=), the mean of several numbers for notes."""
    xs = numbers(row["value"])
    if row.get("op") in (">", ">="):
        return min(xs)
    if row.get("op") in ("<", "<="):
        return max(xs)
    return xs[0] if len(xs) == 1 else statistics.fmean(xs)


def spread(runs, name):
    """{"n", "mean", "min", "max", "k" (numbers per run)} of a row's decisive number over runs, or None."""
    xs, k = [], 1
    for rec in runs.values():
        for r in rec["rows"]:
            if r["name"] == name and r.get("value") is not None:
                k = len(numbers(r["value"]))
                x = decisive(r)
                if math.isfinite(x):
                    xs.append(x)
    if not xs:
        return None
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


def assess(claim, profile="default"):
    """Everything the book and `nbdemo list` show of a claim's evidence, or None when nothing is stored: the stored
    summary (`evidence.summary`), its control's, and the judgement, flips and effect sizes."""
    s = summary(claim, profile)
    if not s:
        return None
    decl = control(claim) if profile == "default" else None
    ctrl = summary(claim, CONTROL) if decl and decl["profile"] else None
    control_runs = ctrl["runs"] if ctrl else {}
    return {**s, **judge(s["runs"], control_runs), "declared": decl, "control": ctrl,
            "flips": flips(s["runs"], control_runs), "effects": effects(s["runs"], control_runs)}
