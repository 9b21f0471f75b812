"""Structured verdict rows, and what the stored runs are evidence of: the headline rule with its interval, controls
that test a check or not, threshold flips (at 0 too) and thresholds inside metrics, effect sizes."""
import math
import statistics

import pytest

from nbdemo.claims.registry import CLAIMS
from nbdemo.claims.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Verdict,
    holds,
    ours,
    paper,
)
from nbdemo.runs import evidence, params, rules
from nbdemo.runs import store as results

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
MLI7 = CLAIMS["MLI-7"]


def rows(ratio, gap=0.5):
    """A verdict of MLI-7 with a requirement, a check with the paper's threshold and a check with ours."""
    v = Verdict("MLI-7")
    v.require("trained: training error", 0.0, "<=", 0.25, source=ours("a quarter of the samples"))
    v.check("ratio s1/s2", ratio, ">=", 5, source=ours("half the paper's 'about ten times'"), reported="~10")
    v.check("plateau gap", gap, ">", 0, source=paper("Fig. 3", 42))
    return v.rows


def meta(seed, rows_):
    return {"claim": "MLI-7", "overrides": {"seed": seed}, "parameters": {"seed": seed},
            "verdict": {"outcome": None, "rows": rows_}, "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc",
            "started": "now", "provenance": {}}


def runs_of(ratios, gaps=None):
    """{seed: record} of `rows`, one per ratio."""
    return {s: {"rows": rows(r, (gaps or [0.5] * len(ratios))[s])} for s, r in enumerate(ratios)}


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A results store and a profile file for MLI-7 with a control, both in tmp_path."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "MLI-7.yml").write_text(
        "control:\n  steps: 0\ncontrol about: the untrained network\n")
    monkeypatch.setattr(params, "PROFILES", tmp_path / "profiles")
    monkeypatch.setattr(rules, "FRESH_SEEDS", 5)  # five synthetic seeds, never revised: all fresh, enough here

    def put(profile, ratios, gaps=None):
        for seed, ratio in enumerate(ratios):
            results.store(MLI7, meta(seed, rows(ratio, (gaps or [0.5] * len(ratios))[seed])), profile)
    return put


@pytest.mark.parametrize("outcomes, headline", [
    ([R] * 5, R), ([R] * 4 + [N], rules.MIXED), ([N] * 5, N), ([N] * 4 + [R], rules.MIXED),
    ([R] * 9 + [N], R), ([R] * 8 + [N] * 2, rules.MIXED), ([R] + [N] * 9, N), ([R] * 2 + [N] * 8, rules.MIXED),
    # k of the conclusive runs: 4 of 4 is REPRODUCED (0.51), 3 of 3 and 0 of 3 are MIXED, 5 of 5 beside 5
    # inconclusive is REPRODUCED; more than half inconclusive is INCONCLUSIVE
    ([R] * 4 + [I], R), ([I] * 2 + [R] * 3, rules.MIXED), ([N] * 3 + [I] * 2, rules.MIXED), ([I] * 5 + [R] * 5, R),
    ([I] * 3 + [R] * 2, I), ([I] * 6 + [R] * 4, I), ([R] * 4, rules.TOO_FEW), ([], rules.TOO_FEW),
])
def test_headline_over_seeds_by_its_wilson_interval(outcomes, headline):
    assert rules.headline(outcomes) == headline


def test_the_tally_counts_the_conclusive_runs_and_the_inconclusive_beside_them():
    """MLI-3's 9 conclusive runs, all REPRODUCED, beside 6 inconclusive: 9 of 9, not 9 of 15."""
    t = rules.tally([R] * 9 + [I] * 6)
    assert (t["headline"], t["k"], t["n"], t["inconclusive"], t["total"]) == (R, 9, 9, 6, 15)
    assert t["low"] == pytest.approx(rules.wilson(9, 9)[0]) and rules.wilson(0, 0) == (0.0, 1.0)
    assert rules.tally([R] * 9, fresh_needed=10)["headline"] == rules.UNCONFIRMED
    assert rules.tally([R] * 10, fresh_needed=10)["headline"] == R


def test_the_interval_at_the_boundaries():
    """REPRODUCED needs a lower bound >= 0.5: 5 of 5 and 9 of 10 have it, 4 of 5 and 8 of 10 do not; NOT
    REPRODUCED needs an upper bound <= 0.5: 0 of 5 and 1 of 10, not 1 of 5 or 2 of 10."""
    low = {(k, n): rules.wilson(k, n)[0] for k, n in [(5, 5), (9, 10), (4, 5), (8, 10)]}
    high = {(k, n): rules.wilson(k, n)[1] for k, n in [(0, 5), (1, 10), (1, 5), (2, 10)]}
    assert low[5, 5] >= 0.5 and low[9, 10] >= 0.5 and low[4, 5] < 0.5 and low[8, 10] < 0.5
    assert high[0, 5] <= 0.5 and high[1, 10] <= 0.5 and high[1, 5] > 0.5 and high[2, 10] > 0.5
    assert rules.wilson(4, 5)[0] == pytest.approx(0.376, abs=1e-3)  # the "reaches down to 0.38"
    t = rules.tally([R] * 4 + [N])
    assert (t["k"], t["n"], t["headline"]) == (4, 5, rules.MIXED) and t["high"] == pytest.approx(0.964, abs=1e-3)


def test_a_row_states_its_source_and_its_pass_is_computed():
    with pytest.raises(ValueError, match="source"):
        Verdict("MLI-7").check("no source", 1.0, ">", 0, source=None)
    with pytest.raises(ValueError, match="reason"):
        ours(" ")
    with pytest.raises(ValueError, match="comparison"):
        Verdict("MLI-7").check("bad op", 1.0, "=>", 0, source=ours("x"))
    r = rows(4.0)
    assert [x["ok"] for x in r] == [True, False, True]
    assert r[1]["value"] == 4.0 and r[1]["threshold"] == 5 and r[1]["source"]["from"] == "ours"
    assert r[2]["source"] == {"from": "paper", "where": "Fig. 3", "line": 42}
    assert holds([1, 2, 3], ">", 0) and not holds([1, -2, 3], ">", 0) and not holds(math.nan, "<", 1)
    assert holds([1, 2], "<", [2, 3]) and not holds(math.inf, "<", 1)
    table = Verdict("MLI-7")
    table.rows = r
    assert "ours" in table.table() and "half the paper's" in table.table()


def test_a_check_that_holds_in_its_control_is_uninformative(store):
    store("default", [6, 7, 8, 9, 6.5])              # every seed reproduces
    store("control", [9.4, 9.3, 2, 6.3, 8.3], gaps=[1, 2, 1, 2, 1])  # the untrained net passes both checks (4, 5 of 5)
    a = evidence.assess(MLI7)
    assert a["over_seeds"] == R and a["uninformative"] == ["plateau gap", "ratio s1/s2"] and not a["untested"]
    assert a["headline"] == I and a["declared"]["about"] == "the untrained network"
    store("control", [9.4, 9.3, 2, 6.3, 8.3], gaps=[-1, -2, -1, -2, -1])  # only the ratio: the gap still counts
    a = evidence.assess(MLI7)
    assert a["uninformative"] == ["ratio s1/s2"] and a["headline"] == R and (a["k"], a["n"]) == (5, 5)
    store("control", [1, 2, 3, 9, 9], gaps=[-1, -2, -1, -2, -1])  # now only 2 of 5 control seeds pass: informative
    a = evidence.assess(MLI7)
    assert a["uninformative"] == [] and a["headline"] == R


def test_a_control_whose_statistic_is_not_finite_tests_nothing(store):
    """A NaN in the control (a rise over training at step 0) is no failure of the check: the check is untested, and
    a run that rests on untested checks alone is INCONCLUSIVE."""
    store("default", [6, 7, 8, 9, 6.5])
    store("control", [math.nan] * 5, gaps=[math.nan] * 5)
    a = evidence.assess(MLI7)
    assert a["untested"] == {"plateau gap": "not finite in 5 of 5 control seeds",
                             "ratio s1/s2": "not finite in 5 of 5 control seeds"}
    assert a["uninformative"] == [] and a["over_seeds"] == R and a["headline"] == I
    assert set(a["outcomes"].values()) == {I}


def test_a_control_tests_a_check_unless_its_profile_declares_it_fixed_by_construction(store, tmp_path):
    """The same value in every control seed is what the control's networks did, and is tested (a net that predicts
    one class counts 1 category in every seed); only the profile's `control untested` (with its reason) makes a
    check untested by construction."""
    store("default", [6, 7, 8, 9, 6.5], gaps=[0.5, 0.6, 0.7, 0.8, 0.9])
    store("control", [5.5] * 5, gaps=[0] * 5)  # the ratio passes in every control seed, the gap fails
    a = evidence.assess(MLI7)
    assert a["untested"] == {} and a["uninformative"] == ["ratio s1/s2"] and a["headline"] == R
    (tmp_path / "profiles" / "MLI-7.yml").write_text(
        "control:\n  steps: 0\ncontrol about: the untrained network\n"
        "control untested:\n  plateau gap: the gap is 0 at step 0 by its definition\n")
    a = evidence.assess(MLI7)
    assert a["untested"] == {"plateau gap": "by construction: the gap is 0 at step 0 by its definition"}
    assert a["declared"]["untested"] == {"plateau gap": "the gap is 0 at step 0 by its definition"}
    assert a["headline"] == I  # the ratio is uninformative and the gap untested: nothing tested and informative


def test_a_check_is_informative_only_through_a_control_finite_in_4_of_5_seeds():
    runs = runs_of([6, 7, 8, 9, 6.5])
    gaps_nan = [math.nan] * 5
    four = runs_of([1, 2, 3, 4, math.nan], gaps=gaps_nan)  # the ratio finite in 4 of 5 control seeds, and failing
    j = rules.judge(runs, four)
    assert set(j["untested"]) == {"plateau gap"} and j["headline"] == R
    three = runs_of([1, 2, 3, math.nan, math.nan], gaps=gaps_nan)  # 3 of 5: the control tests nothing
    j = rules.judge(runs, three)
    assert j["untested"]["ratio s1/s2"] == "not finite in 2 of 5 control seeds" and j["headline"] == I
    assert rules.judge(runs, {})["headline"] == I  # declared but not run: nothing is tested
    assert rules.judge(runs, None)["headline"] == R  # no control declared (a formula): the checks alone


def test_an_uninformative_check_that_fails_still_counts_against_the_claim():
    control = runs_of([9, 8, 9, 8, 9], gaps=[1, 2, 1, 2, 1])  # both checks hold in every control seed
    runs = runs_of([4, 4, 4, 4, 6])  # the ratio fails in seeds 0-3
    j = rules.judge(runs, control)
    assert j["uninformative"] == ["plateau gap", "ratio s1/s2"] and j["headline"] == N


def test_the_headline_flips_at_the_nearest_measured_value(store):
    store("default", [5.2, 5.5, 6, 7, 8])  # 5 of 5 reproduce at >= 5
    store("control", [1, 2, 1, 2, 1], gaps=[-1, -2, -1, -2, -1])
    a = evidence.assess(MLI7)
    assert a["headline"] == R
    f = a["flips"]
    assert set(f) == {"ratio s1/s2", "trained: training error"}  # the paper's threshold is not varied
    ratio = f["ratio s1/s2"]
    # past 5.2 the first seed fails: 4 of 5, MIXED; 5.2 is within 10% of 5
    assert ratio["at"] == 5.2 and ratio["headline"] == rules.MIXED and ratio["sensitive"] and a["sensitive"]
    # training error is 0 in every seed: only a threshold below 0 fails them all
    assert f["trained: training error"] == {"at": 0, "headline": I, "threshold": 0.25, "step": 0.025,
                                           "sensitive": False}
    effects = {r["name"]: (s, c) for r, s, c in a["effects"]}
    s, c = effects["ratio s1/s2"]
    assert (s["n"], s["min"], s["max"]) == (5, 5.2, 8) and s["mean"] == pytest.approx(6.34) and c["mean"] == 1.4


def test_a_threshold_at_zero_moves_by_the_statistics_spread():
    """"> 0" is not moved by ±10% of 0: the flip point is judged against the statistic's standard deviation over
    the seeds (PFC-1's "loss still falling > 0" flipped at 0.00038 unflagged)."""
    def verdict(x):
        v = Verdict("MLI-7")
        v.check("loss still falling", x, ">", 0, source=ours("any fall"))
        v.check("plateau gap", 1.0, ">", 0.5, source=paper("Fig. 3"))
        return {"rows": v.rows}
    control = {s: verdict(-1.0 - s) for s in range(5)}
    near = {s: verdict(x) for s, x in enumerate([0.00038, 0.002, 0.003, 0.001, 0.0025])}
    f = evidence.sensitivity.flips(rules.judge, near, control, rules.judge(near, control)["headline"])[
        "loss still falling"]
    assert f["at"] == 0.00038 and f["headline"] == rules.MIXED and f["step"] == pytest.approx(statistics.stdev([0.00038, 0.002, 0.003, 0.001, 0.0025]))
    assert f["sensitive"]
    far = {s: verdict(x) for s, x in enumerate([0.5, 0.6, 0.55, 0.7, 0.65])}
    f = evidence.sensitivity.flips(rules.judge, far, control, R)["loss still falling"]
    assert f["at"] == 0.5 and not f["sensitive"]
    same = {s: verdict(0.4) for s in range(5)}  # no spread: the median absolute value is the step
    assert evidence.sensitivity.scale(same, "loss still falling") == 0.4


def test_thresholds_inside_a_metric_are_alternatives_and_can_make_a_claim_sensitive(store):
    def verdict(x, lower, higher):
        v = Verdict("MLI-7")
        v.check("plateau length", x, ">", 10, source=paper("Fig. 3"),
                inner={"eps = 0.05 log k (ours)": (lower, higher), "3-point hold (ours)": None})
        return v.rows
    for seed in range(5):  # at +10% seed 0's plateau is too short
        results.store(MLI7, meta(seed, verdict(20, 15, 12 if seed else 8)))
        results.store(MLI7, meta(seed, verdict(1 + seed, 1 + seed, 1 + seed)), "control")
    a = evidence.assess(MLI7)
    assert a["inner"]["3-point hold (ours)"] is None
    assert a["inner"]["eps = 0.05 log k (ours)"] == {"lower": R, "higher": rules.MIXED, "sensitive": True}
    assert a["alternatives"]["eps = 0.05 log k (ours), 10% higher"]["headline"] == rules.MIXED
    assert a["robust"] is False and a["depends"] == {"plateau length": {"eps = 0.05 log k (ours), 10% higher":
                                                                         rules.MIXED}}
    for seed in range(5):
        results.store(MLI7, meta(seed, verdict(20, 15, 12)))
    a = evidence.assess(MLI7)
    assert not a["inner"]["eps = 0.05 log k (ours)"]["sensitive"] and a["robust"] is True


def test_rows_stored_before_their_numbers_are_judged_by_their_pass():
    """Rows without numbers (stored before them, as the store's history holds them) pass or fail as stored; a
    control cannot test them."""
    runs = {seed: {"rows": [{"kind": "check", "name": "claim", "expected": "", "measured": "1", "ok": seed > 0}]}
            for seed in range(5)}
    j = rules.judge(runs, {})
    assert j["over_seeds"] == rules.MIXED and j["untested"] == {"claim": "the control has not been run"}
    assert j["headline"] == I and j["k"] == 0
    assert rules.judge(runs, None)["headline"] == rules.MIXED and rules.judge(runs, None)["k"] == 4
    assert evidence.sensitivity.flips(rules.judge, runs, None, rules.MIXED) == {}
