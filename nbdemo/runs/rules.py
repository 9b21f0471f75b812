"""The rules that turn a claim's stored runs into its headline, stated in `RULE` (the README and the book quote it):
how its negative control tests each check, a run's outcome against the control, and the headline over seeds with
a 95% Wilson interval. Pure functions of stored records ({seed: record}); nothing is read or rerun here.
"""
import math
from collections import Counter

from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, fmt_value, numbers, outcome

CONTROL = "control"
MIN_SEEDS = 5
Z = 1.959964  # the normal quantile of a two-sided 95% interval
FINITE_IN = 0.8  # a control tests a check when the check's statistic is finite in this share of its seeds (4 of 5)
SENSITIVE = 0.10
MIXED, TOO_FEW = "MIXED", "TOO FEW SEEDS"
RULE_ID = "wilson95-controls-tested"  # names this rule in the history's entries, which keep the rule they were judged by

HEADLINE_RULE = (
    "A claim's headline over its seeds counts the k of n seeds that reproduce and gives a 95% Wilson score interval "
    "for the share that reproduces: INCONCLUSIVE when more than half of the runs are inconclusive (a requirement "
    "failed), else REPRODUCED when the interval's lower bound is at least 0.5 (5 of 5, 9 of 10), NOT REPRODUCED "
    "when its upper bound is at most 0.5 (0 of 5, 1 of 10), and MIXED otherwise; with fewer than "
    f"{MIN_SEEDS} seeds there is no headline ({TOO_FEW}).")
CONTROL_RULE = (
    "A claim's negative control computes each check's statistic as the claim does, where the paper says or implies "
    "that the effect is absent. A check whose statistic in the control is not finite in at least 4 of 5 control "
    "seeds, or is the same in every control seed while the claim's varies over its seeds (fixed by construction), "
    "is *untested by its control*: not a failure, and no evidence. A tested check that holds in at least half of the "
    "control's seeds is *uninformative*. A run whose checks all hold is REPRODUCED only when at least one of them is "
    "tested by the control and informative, and INCONCLUSIVE otherwise; a check that fails still counts against the "
    "claim. A claim that declares no control (a formula, a solver, a toy model, or trained networks where the paper "
    "names no setting without the effect: its page says why) is judged by its checks alone.")
SENSITIVITY_RULE = (
    "A threshold of this book's (source *ours*) is *sensitive* when the headline changes within "
    f"±{SENSITIVE:.0%} of it (a threshold at 0: within one standard deviation of the statistic over the seeds, or "
    "its median absolute value where that is 0), or when a threshold of ours inside the metric, moved by "
    f"±{SENSITIVE:.0%}, changes the headline.")
RULE = " ".join([HEADLINE_RULE, CONTROL_RULE, SENSITIVITY_RULE])


def wilson(k, n):
    """The 95% Wilson score interval (low, high) of a share k/n."""
    if n == 0:
        return 0.0, 1.0
    p, z2 = k / n, Z * Z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = Z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def tally(outcomes):
    """{"headline", "k" (reproduced), "n", "low", "high", "counts"} of a list of run outcomes, by `HEADLINE_RULE`."""
    n, count = len(outcomes), Counter(outcomes)
    low, high = wilson(count[REPRODUCED], n)
    if n < MIN_SEEDS:
        label = TOO_FEW
    elif count[INCONCLUSIVE] > n / 2:
        label = INCONCLUSIVE
    elif low >= 0.5:
        label = REPRODUCED
    elif high <= 0.5:
        label = NOT_REPRODUCED
    else:
        label = MIXED
    return {"headline": label, "k": count[REPRODUCED], "n": n, "low": low, "high": high, "counts": dict(count)}


def headline(outcomes):
    return tally(outcomes)["headline"]


def scored(row):
    """Whether a stored row carries its statistic, comparison and threshold (rows stored before them do not)."""
    return row.get("op") is not None and row.get("value") is not None


def statistic(runs, name):
    """{seed: the row's numbers as a tuple} over the runs that hold a scored row of that name."""
    return {s: tuple(numbers(r["value"])) for s, rec in runs.items() for r in rec["rows"]
            if r["name"] == name and scored(r)}


def untested(name, runs, control_runs):
    """Why the control does not test a check (a text), or None when it does: not run, not finite in 4 of 5 control
    seeds (a seed that lacks the row counts as not finite), or the same value in every control seed while the
    claim's varies over its seeds."""
    n = len(control_runs)
    if not n:
        return "the control has not been run"
    finite = [x for x in statistic(control_runs, name).values() if all(map(math.isfinite, x))]
    if len(finite) < FINITE_IN * n:
        return f"not finite in {n - len(finite)} of {n} control seeds"
    claim = {x for x in statistic(runs, name).values() if all(map(math.isfinite, x))}
    if len(set(finite)) == 1 and len(claim) > 1:
        return f"the same value ({fmt_value(list(finite[0]) if len(finite[0]) > 1 else finite[0][0])}) in every " \
               "control seed, while it varies over the seeds"
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


def judge(runs, control_runs=None):
    """The claim's judgement from its runs and its control's ({seed: record} each; control_runs None when the claim
    declares no control): {"headline", "k", "n", "low", "high", "counts" (`tally`, with the control's rule),
    "over_seeds" (the headline before it), "outcomes" {seed: outcome with it}, "untested" {check: why},
    "uninformative" [checks]}."""
    names = sorted({r["name"] for rec in runs.values() for r in rec["rows"] if r["kind"] == "check"})
    if control_runs is None:
        why, useless, informative = {}, [], None
    else:
        why = {n: w for n in names if (w := untested(n, runs, control_runs))}
        useless = [n for n in names if n not in why and (k := held(control_runs, n))[0] >= k[1] / 2]
        informative = set(names) - set(why) - set(useless)
    outcomes = {s: run_outcome(rec["rows"], informative) for s, rec in runs.items()}
    return {**tally(list(outcomes.values())), "over_seeds": headline([outcome(r["rows"]) for r in runs.values()]),
            "outcomes": outcomes, "untested": why, "uninformative": useless}

