"""The rules that turn a claim's stored runs into its headline, stated in `RULE` (the README and the book quote it):
how its negative control tests each check, a run's outcome against the control, the tally over the runs that can
tell with a 95% Wilson interval, the fresh seeds that decide it, and the headline under each declared alternative
reading of a row. Pure functions of stored records ({seed: record}); nothing is read or rerun here.
"""
import math
from collections import Counter

from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, fmt_value, holds, numbers, outcome

CONTROL = "control"
MIN_SEEDS = 5
FRESH_SEEDS = 10  # fresh seeds a headline needs; with fewer it is UNCONFIRMED
FINITE_IN = 0.8  # a control tests a check when the check's statistic is finite in this share of its seeds (4 of 5)
SENSITIVE = 0.10
MIXED, TOO_FEW, UNCONFIRMED = "MIXED", "TOO FEW SEEDS", "UNCONFIRMED"
RULE_ID = "wilson95-conclusive-fresh"  # names this rule in the history's entries, which keep the rule they were judged by

HEADLINE_RULE = (
    "A claim's headline is decided by its fresh seeds: those first run after its last revision after results (every "
    "seed, for a claim never revised). It needs at least "
    f"{FRESH_SEEDS} of them; with fewer it is {UNCONFIRMED}, shown with the tally so far. The tally counts the k of n "
    "conclusive runs (REPRODUCED or NOT REPRODUCED) that reproduce, with the inconclusive runs (a requirement "
    "failed, a network diverged) counted beside them, and gives a 95% Wilson score interval for the share that "
    "reproduces: INCONCLUSIVE when more than half of all runs are inconclusive, else REPRODUCED when the interval's "
    "lower bound is at least 0.5 (5 of 5, 9 of 10), NOT REPRODUCED when its upper bound is at most 0.5 (0 of 5, "
    "1 of 10), and MIXED otherwise. The same tally over every stored seed of the current design is shown beside it.")
CONTROL_RULE = (
    "A claim's negative control computes each check's statistic as the claim does, where the paper says or implies "
    "that the effect is absent. A check is *untested by its control* when the claim's profile declares it so, with "
    "the reason it is fixed there by construction, or when its statistic in the control is not finite in at least "
    "4 of 5 control seeds: not a failure, and no evidence. A statistic that is constant in the control because of "
    "what the networks did is tested. A tested check that holds in at least half of the control's seeds is "
    "*uninformative*. A run whose checks all hold is REPRODUCED only when at least one of them is tested by the "
    "control and informative, and INCONCLUSIVE otherwise; a check that fails still counts against the claim. A claim "
    "that declares no control (a formula, a solver, a toy model, or trained networks where the paper names no "
    "setting without the effect: its page says why) is judged by its checks alone.")
CHOICES_RULE = (
    "Every threshold, reading, window or estimator of this book's (source *ours*) that a scored row depends on, "
    "requirements included, is declared on its row with the alternatives a careful reader of the paper could have "
    "chosen, each computed on the same networks in the same run. The headline is judged again under each "
    "alternative: the claim is *robust* when every one gives the same headline, and otherwise *depends on* the "
    "alternatives that change it, each shown with its headline. A threshold of ours is also *sensitive* when the "
    "headline changes within "
    f"±{SENSITIVE:.0%} of it (a threshold at 0: within one standard deviation of the statistic over the seeds, or "
    "its median absolute value where that is 0). A pass or fail is always recomputed from the stored statistic, "
    "comparison and threshold.")
RULE = " ".join([HEADLINE_RULE, CONTROL_RULE, CHOICES_RULE])


def wilson(k, n):
    """The 95% Wilson score interval (low, high) of a share k/n (scipy's); (0, 1) for no runs."""
    if n == 0:
        return 0.0, 1.0
    from scipy.stats import binomtest  # here: the command line refuses bad input without numpy's import
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    return max(0.0, float(ci.low)), min(1.0, float(ci.high))


def tally(outcomes, fresh_needed=None):
    """{"headline", "k" (reproduced), "n" (conclusive runs), "inconclusive", "total" (all runs), "low", "high", "counts"}
    of a list of run outcomes, by `HEADLINE_RULE`: k of the n conclusive runs, INCONCLUSIVE when more than half of
    all runs are. fresh_needed: the number of runs below which the headline is UNCONFIRMED (else TOO FEW SEEDS
    below `MIN_SEEDS`)."""
    count = Counter(outcomes)
    runs, k, inconclusive = len(outcomes), count[REPRODUCED], count[INCONCLUSIVE]
    n = runs - inconclusive
    low, high = wilson(k, n)
    if fresh_needed is not None and runs < fresh_needed:
        label = UNCONFIRMED
    elif runs < MIN_SEEDS:
        label = TOO_FEW
    elif inconclusive > runs / 2:
        label = INCONCLUSIVE
    elif low >= 0.5:
        label = REPRODUCED
    elif high <= 0.5:
        label = NOT_REPRODUCED
    else:
        label = MIXED
    return {"headline": label, "k": k, "n": n, "inconclusive": inconclusive, "total": runs, "low": low, "high": high,
            "counts": dict(count)}


def headline(outcomes):
    return tally(outcomes)["headline"]


def scored(row):
    """Whether a stored row carries its statistic, comparison and threshold (rows stored before them do not)."""
    return row.get("op") is not None and row.get("value") is not None


def passes(row):
    """A scored row's pass, recomputed from its statistic, comparison and threshold (never the stored `ok`); a row
    stored before its numbers passes as stored; a note has none."""
    if row["kind"] == "note":
        return None
    return holds(row["value"], row["op"], row["threshold"]) if scored(row) else bool(row["ok"])


def recomputed(runs):
    """A copy of {seed: record} with every row's `ok` recomputed (`passes`)."""
    if runs is None:
        return None
    return {s: {**rec, "rows": [{**r, "ok": passes(r)} for r in rec["rows"]]} for s, rec in runs.items()}


def statistic(runs, name):
    """{seed: the row's numbers as a tuple} over the runs that hold a scored row of that name."""
    return {s: tuple(numbers(r["value"])) for s, rec in runs.items() for r in rec["rows"]
            if r["name"] == name and scored(r)}


def untested(name, runs, control_runs, declared=None):
    """Why the control does not test a check (a text), or None when it does: not run, declared untested by
    construction in the claim's profile (`declared`: {check: reason}), or not finite in 4 of 5 control seeds (a
    seed that lacks the row counts as not finite). A statistic the same in every control seed is tested."""
    n = len(control_runs)
    if not n:
        return "the control has not been run"
    if name in (declared or {}):
        return f"by construction: {declared[name]}"
    finite = [x for x in statistic(control_runs, name).values() if all(map(math.isfinite, x))]
    if len(finite) < FINITE_IN * n:
        return f"not finite in {n - len(finite)} of {n} control seeds"
    return None


def held(control_runs, name):
    """(k, n): the control's seeds in which the check holds, of all its seeds."""
    return (sum(bool(r["ok"]) for rec in control_runs.values() for r in rec["rows"] if r["name"] == name),
            len(control_runs))


def run_outcome(rows, informative=None):
    """A run's outcome from its rows (`verdict.outcome`); with `informative` (the checks its control tests and fails),
    a REPRODUCED with none of them among its checks is INCONCLUSIVE."""
    o = outcome(rows)
    if informative is not None and o == REPRODUCED and \
            not any(r["kind"] == "check" and r["name"] in informative for r in rows):
        return INCONCLUSIVE
    return o


def judge(runs, control_runs=None, untested_by=None, fresh=None):
    """The claim's judgement from its runs and its control's ({seed: record} each; control_runs None when the claim
    declares no control; untested_by: the checks its profile declares untested by construction, {check: reason};
    fresh: the seeds that decide, or None for every seed with no minimum): {"headline", "k", "n", "inconclusive",
    "low", "high", "counts" (`tally` of the deciding seeds, with the control's rule), "all_seeds" (the same over
    every seed), "over_seeds" (the headline of every seed without the control), "outcomes" {seed: outcome with it},
    "untested" {check: why}, "uninformative" [checks]}. Every pass is recomputed from the stored numbers."""
    runs, control_runs = recomputed(runs), recomputed(control_runs)
    names = sorted({r["name"] for rec in runs.values() for r in rec["rows"] if r["kind"] == "check"})
    if control_runs is None:
        why, useless, informative = {}, [], None
    else:
        why = {n: w for n in names if (w := untested(n, runs, control_runs, untested_by))}
        useless = [n for n in names if n not in why and (k := held(control_runs, n))[0] >= k[1] / 2]
        informative = set(names) - set(why) - set(useless)
    outcomes = {s: run_outcome(rec["rows"], informative) for s, rec in runs.items()}
    every = tally(list(outcomes.values()))
    deciding = every if fresh is None else tally([outcomes[s] for s in fresh if s in outcomes], FRESH_SEEDS)
    return {**deciding, "all_seeds": every, "over_seeds": headline([outcome(r["rows"]) for r in runs.values()]),
            "outcomes": outcomes, "untested": why, "uninformative": useless}
