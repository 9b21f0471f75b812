"""Structured verdict rows, and what the stored runs are evidence of: controls, threshold flips, effect sizes."""
import math

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
from nbdemo.runs import evidence, params
from nbdemo.runs import store as results

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


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A results store and a profile file for MLI-7 with a control, both in tmp_path."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "MLI-7.yml").write_text(
        "control:\n  steps: 0\ncontrol about: the untrained network\n")
    monkeypatch.setattr(params, "PROFILES", tmp_path / "profiles")

    def put(profile, ratios, gaps=None):
        for seed, ratio in enumerate(ratios):
            results.store(MLI7, meta(seed, rows(ratio, (gaps or [0.5] * len(ratios))[seed])), profile)
    return put


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
    store("control", [9.4, 9.3, 2, 6.3, 8.3], gaps=[1] * 5)  # the untrained net passes both checks (4 and 5 of 5)
    a = evidence.assess(MLI7)
    assert a["over_seeds"] == REPRODUCED and a["uninformative"] == ["plateau gap", "ratio s1/s2"]
    assert a["headline"] == INCONCLUSIVE and a["declared"]["about"] == "the untrained network"
    store("control", [9.4, 9.3, 2, 6.3, 8.3], gaps=[-1] * 5)  # only the ratio: the gap check still supports the claim
    a = evidence.assess(MLI7)
    assert a["uninformative"] == ["ratio s1/s2"] and a["headline"] == REPRODUCED
    store("control", [1, 2, 3, 9, 9], gaps=[-1] * 5)  # now only 2 of 5 control seeds pass: informative
    a = evidence.assess(MLI7)
    assert a["uninformative"] == [] and a["headline"] == REPRODUCED


def test_an_uninformative_check_that_fails_still_counts_against_the_claim():
    control = {s: {"rows": rows(9)} for s in range(5)}  # both checks hold in every control seed
    runs = {s: {"rows": rows(4 if s < 4 else 6)} for s in range(5)}  # the ratio fails in seeds 0-3
    j = evidence.judge(runs, control)
    assert j["uninformative"] == ["plateau gap", "ratio s1/s2"] and j["headline"] == NOT_REPRODUCED


def test_the_headline_flips_at_the_nearest_measured_value(store):
    store("default", [5.2, 5.5, 6, 7, 4.0])  # 4 of 5 reproduce at >= 5
    store("control", [1, 1, 1, 1, 1], gaps=[-1] * 5)
    f = evidence.assess(MLI7)["flips"]
    assert set(f) == {"ratio s1/s2", "trained: training error"}  # the paper's threshold is not varied
    ratio = f["ratio s1/s2"]
    # past 5.2 the second seed fails too: 3 of 5, MIXED; 5.2 is within 10% of 5
    assert ratio["at"] == 5.2 and ratio["headline"] == evidence.MIXED and ratio["sensitive"]
    # training error is 0 in every seed: only a threshold below 0 fails them all
    assert f["trained: training error"] == {"at": 0, "headline": INCONCLUSIVE, "threshold": 0.25, "sensitive": False}
    effects = {r["name"]: (s, c) for r, s, c in evidence.assess(MLI7)["effects"]}
    s, c = effects["ratio s1/s2"]
    assert (s["n"], s["min"], s["max"]) == (5, 4.0, 7) and s["mean"] == pytest.approx(5.54) and c["mean"] == 1


def test_rows_stored_before_their_numbers_are_judged_by_their_pass(store):
    for seed in range(5):
        ok = seed > 0
        legacy = [{"kind": "check", "name": "claim", "expected": "", "measured": "1", "ok": ok}]
        results.store(MLI7, {**meta(seed, legacy), "verdict": {"outcome": REPRODUCED if ok else NOT_REPRODUCED,
                                                          "rows": legacy}})
    a = evidence.assess(MLI7)
    assert a["headline"] == REPRODUCED and a["flips"] == {} and a["control"] is None
