"""What a claim's stored runs are evidence of, as one structure per claim for the book and `nbdemo list` (`assess`):
its headline over seeds with its 95% interval, judged against its negative control (`rules`, whose `RULE` states
how), the thresholds of ours at which the headline would change (`sensitivity`), each statistic's spread over
seeds, and the verdict's history (`history`): every state its store has held, what changed from one to the next,
the revisions after results, and the seeds first run after the last of them. Read from the store and the history;
nothing is rerun.

- A claim's *control* is its profile `control` (nbdemo/profiles/<CLAIM>.yml, with `control about: ...`), run over
  seeds 0-4; a claim with no trained network, or one whose paper names no setting without the effect, declares
  `no control: <reason>` instead.
- A change of a check, a threshold, a requirement, the reading of a statistic, the setting or the control, made
  after an earlier state of the claim's store was stored, is a *revision after results*, declared or not.
"""
from collections import Counter

from nbdemo.runs import history, params, rules, sensitivity, store


def summary(claim, profile="default", overrides=None):
    """A claim's stored runs as they are: {seed: record} ("runs"), the stale seeds, per row how many seeds pass
    ("rows": {(kind, name): [k, n]}), the median wall time, and the headline over the runs' own outcomes
    (`rules.tally`, without a control); None when nothing is stored."""
    runs = store.status(claim, profile, overrides)
    if not runs:
        return None
    checks = {}
    for r, _ in runs.values():
        for row in r["rows"]:
            if row["kind"] != "note":
                n = checks.setdefault((row["kind"], row["name"]), [0, 0])
                n[0] += bool(row["ok"])
                n[1] += 1
    return {**rules.tally([r["outcome"] for r, _ in runs.values()]),
            "stale": sorted(s for s, (_, fresh) in runs.items() if not fresh),
            "runs": {s: r for s, (r, _) in runs.items()}, "rows": checks,
            "wall_s": sorted(r["wall_s"] for r, _ in runs.values())[len(runs) // 2]}


def control(claim):
    """{"profile": "control" or None, "about": what the control is, or why the claim has none, "untested": the
    checks it does not test by construction, {check: reason}}; None when the claim declares neither."""
    texts = params.profile_file(claim)
    if rules.CONTROL in params.profiles(claim):
        return {"profile": rules.CONTROL, "about": texts.get("control about", ""),
                "untested": {str(k): str(v) for k, v in (texts.get("control untested") or {}).items()}}
    if "no control" in texts:
        return {"profile": None, "about": texts["no control"], "untested": {}}
    return None


def assess(claim, profile="default"):
    """Everything the book and `nbdemo list` show of a claim's evidence, or None when nothing is stored: its stored
    runs (`summary`); for the default profile its history (`past`) and the fresh seeds that decide; the judgement
    against its control (`rules.judge`: the deciding tally "headline", "k", "n", "inconclusive", "low", "high", the
    tally over every seed "all_seeds", untested and uninformative checks); the headline under each declared
    alternative ("alternatives", "robust", "depends", `sensitivity.readings`), the thresholds of ours inside metrics
    ("inner"), the rows whose choice of ours declares no alternative ("undeclared"), flips and effect sizes; and the
    control's own summary."""
    s = summary(claim, profile)
    if not s:
        return None
    decl = control(claim) if profile == "default" else None
    ctrl = summary(claim, rules.CONTROL) if decl and decl["profile"] else None
    control_runs = (ctrl["runs"] if ctrl else {}) if decl and decl["profile"] else None
    h = past(claim, s["runs"], control_runs or {}) if profile == "default" else None
    if h and control_runs and h["control_fresh"]["seeds"] is not None:  # a revised control: its fresh seeds
        control_runs = {seed: control_runs[seed] for seed in h["control_fresh"]["seeds"]}

    def judge(runs, control_runs):
        return rules.judge(runs, control_runs, decl["untested"] if decl else None,
                           h["fresh"]["seeds"] if h else None)
    j = judge(s["runs"], control_runs)
    found = sensitivity.readings(judge, s["runs"], control_runs, j["headline"])
    flips = sensitivity.flips(judge, s["runs"], control_runs, j["headline"])
    inner = sensitivity.inner(found, s["runs"], j["headline"])
    if h:
        h["fresh"] |= {k: j[k] for k in ("headline", "k", "n", "inconclusive", "total", "low", "high")}
    return {**s, **j, **sensitivity.robustness(found), "alternatives": found,
            "undeclared": sensitivity.undeclared(s["runs"]), "declared": decl, "control": ctrl,
            "flips": flips, "inner": inner, "stale_control": ctrl["stale"] if ctrl else [],
            "sensitive": any(f and f["sensitive"] for f in [*flips.values(), *inner.values()]),
            "effects": sensitivity.effects(s["runs"], control_runs), "history": h,
            "fresh": h["fresh"] if h else {"seeds": sorted(s["runs"]), "since": None}}


# ---------------------------------------------------------------- what the history says

# a row's kind -> the kind of change that adds or removes such a row, and that moves its comparison or threshold
ROW_KINDS = {"check": ("check", "threshold"), "requirement": ("requirement", "requirement"), "note": ("note", "note")}


def seeds_text(seeds):
    """[0, 1, 2, 3, 4, 7] -> "0-4, 7"."""
    seeds, out = sorted(seeds), []
    for s in seeds:
        if out and s == out[-1][1] + 1:
            out[-1][1] = s
        else:
            out.append([s, s])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in out)


def _rows(prev, cur):
    """Changes of rows: added or removed, moved between kinds, given another comparison, threshold or source."""
    out = []
    for name in sorted(prev.keys() | cur.keys()):
        a, b = prev.get(name), cur.get(name)
        if a is None or b is None:
            kind, verb = (a or b)[0], "added" if a is None else "removed"
            out.append((ROW_KINDS[kind][0], f"{kind} {verb}: {name}", f"{kind} {verb}"))
        elif a[0] != b[0]:
            kind = "check" if "check" in (a[0], b[0]) else "requirement" if "requirement" in (a[0], b[0]) else "note"
            out.append((kind, f"{name}: {a[0]} → {b[0]}", f"{a[0]} → {b[0]}"))
        elif a[1:3] != b[1:3]:
            was = f"{a[1]} {a[2]}" if a[1] else "no threshold"
            out.append((ROW_KINDS[b[0]][1], f"{name}: {was} → {b[1]} {b[2]}", f"threshold of a {b[0]}"))
        elif a[3] != b[3]:
            out.append(("source", f"{name}: source {a[3]} → {b[3]}", "source of a row"))
    return out


def _mapping(kind, what, prev, cur):
    return [(kind, f"{what}{k} {prev.get(k, '(none)')} → {cur.get(k, '(none)')}", None)
            for k in sorted(prev.keys() | cur.keys()) if prev.get(k) != cur.get(k)]


def _seeds(seeds):
    return f"seed{'s' * (len(seeds) > 1)} {seeds_text(seeds)}"


def changes(prev, cur):
    """[(kind, text, label)]: what changed from one state of a claim's store to the next; `label` groups the
    changes of rows for `brief` (None: a change told as it is). Kinds in `history.KINDS` (check, threshold,
    requirement, setting, control, reading: the same seeds' outcomes changed with the code alone) mark a revision;
    the others (note, source, seeds, rerun) do not."""
    out = _rows(prev["rows"], cur["rows"])
    if prev["parameters"] is not None and cur["parameters"] is not None:
        out += _mapping("setting", "", prev["parameters"], cur["parameters"])
    pc, cc = prev["control"], cur["control"]
    if (pc is None) != (cc is None):
        out.append(("control", f"control {'declared' if pc is None else 'removed'}", None))
    elif pc and pc["profile"] != cc["profile"]:
        out += _mapping("control", "control: ", pc["profile"], cc["profile"])
    elif pc and pc["seeds"] != cc["seeds"]:
        out.append(("rerun", "control rerun", None))
    a, b = prev["seeds"], cur["seeds"]
    if added := [int(s) for s in b.keys() - a.keys()]:
        out.append(("seeds", f"{_seeds(added)} added", None))
    if removed := [int(s) for s in a.keys() - b.keys()]:
        out.append(("seeds", f"{_seeds(removed)} removed", None))
    common = a.keys() & b.keys()
    moved = [int(s) for s in common if a[s]["outcome"] != b[s]["outcome"]]
    valued = [int(s) for s in common if a[s]["digest"] != b[s]["digest"]]
    if moved and not any(kind in history.KINDS for kind, *_ in out):
        out.append(("reading", f"{_seeds(moved)}: outcome changed with the code alone (a statistic's definition, "
                               "or its numerics)", None))
    elif valued:
        out.append(("rerun", f"{_seeds(valued)} rerun: values changed", None))
    elif common and not out:
        out.append(("rerun", "rerun: every row of every seed equal", None))
    return out


def brief(changes):
    """The changes in a few words: the changes of rows counted by label ("check added (6)"), the others as they are."""
    counts = Counter(label for _, _, label in changes if label)
    return [f"{label} ({n})" for label, n in counts.items()] + [text for _, text, label in changes if not label]


def past(claim, runs, control_runs=()):
    """The claim's history as the book shows it, with `runs` and `control_runs` ({seed: record} of the store now):
    {"items": states and revisions in time order, each a state with "changes" or a revision, and "revised" (after
    results); "revised": how many revisions after results, "declared": how many of them were declared; "fresh":
    {"seeds" of the store first run after the last revision after results, "since" (its time, or None)};
    "control_fresh": the same for the control's seeds and the last revision of the control ("seeds" None: the
    control was never revised after results, and all its seeds count)}.

    The last revision is the latest declared revision after results, or the latest state whose changes were a
    revision and were not declared before it (a state's declared changes count from their declaration). A seed's
    first run is the start of its run in the first state that holds it (the state's time where not recorded)."""
    h = history.load(claim)
    h["revisions"] += history.pending(claim, history.now())
    items, first, first_control = [], {}, {}
    for i, s in enumerate(h["states"]):
        ch = changes(h["states"][i - 1], s) if i else []
        items.append({**s, "changes": ch, "revised": any(kind in history.KINDS for kind, *_ in ch)})
        for seed in s["seeds"]:
            first.setdefault(int(seed), s.get("started", {}).get(seed) or s["at"])
        for seed in (s["control"] or {}).get("seeds", {}):
            first_control.setdefault(int(seed), s["at"])
    start = h["states"][0]["at"] if h["states"] else None
    controlled = min(first_control.values(), default=None)  # when the control was first stored
    items += [{**r, "revision": True, "revised": start is not None and r["at"] > start} for r in h["revisions"]]
    items.sort(key=lambda e: e["at"])
    declared_since, n_declared, undeclared, last, last_control = False, 0, 0, None, None
    for e in items:
        if e.get("revision"):
            declared_since = declared_since or e["revised"]
            n_declared += e["revised"]
        else:  # a state's changes were declared when a revision after results came since the state before
            e["declared"], declared_since = declared_since, False
            undeclared += e["revised"] and not e["declared"]
        if e["revised"] and (e.get("revision") or not e["declared"]):
            last = e["at"]
            if controlled is not None and controlled < e["at"] and "control" in (
                    [e["kind"]] if e.get("revision") else [kind for kind, *_ in e["changes"]]):
                last_control = e["at"]  # a change of a control already run (its first declaration is none)

    def after(seeds, first, since):
        return sorted(s for s in seeds if since is None or s not in first or first[s] > since)
    return {"items": items, "revised": n_declared + undeclared, "declared": n_declared,
            "fresh": {"seeds": after(runs, first, last), "since": last},
            "control_fresh": {"seeds": None if last_control is None else after(control_runs, first_control,
                                                                                 last_control),
                              "since": last_control}}
