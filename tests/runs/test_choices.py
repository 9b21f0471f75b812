"""The choices of ours on a synthetic store: the headline under each declared alternative (robust, or depends on a
reading; a requirement's alternative too), the tally over the runs that can tell (a diverged run is inconclusive,
never a failed check), passes recomputed from the numbers, and the fresh seeds that decide."""
import json
import math

import pytest

from nbdemo.claims.registry import CLAIMS
from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Verdict, alt, ours, paper
from nbdemo.runs import evidence, history, params, rules
from nbdemo.runs import store as results

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
MLI7 = CLAIMS["MLI-7"]


def verdict(share, share_sd, first_phase_finite=True, whole_run_finite=True):
    """A claim read literally ("always": a share of 1) with the figure's reading (mean - sd > 0) as an alternative,
    and a requirement of finiteness over the whole budget with "through the first phase" as its alternative."""
    v = Verdict("MLI-7")
    v.require("training stayed finite", -1 if whole_run_finite else 700, "==", -1,
              source=ours("a run whose loss diverged learned nothing"),
              alternatives={"finite through the first phase": alt(-1 if first_phase_finite else 300, why=(
                  "the claim is about the first phase; a divergence after it says nothing of it"))})
    v.check("'always positive': share of steps with o > 0", share, ">=", 1, source=ours("the literal 'always'"),
            alternatives={"the figure's mean - sd > 0": alt(share_sd, ">", 0, "the paper's figure shows mean ± sd")})
    v.check("gap", 1.0 if math.isfinite(share) else math.nan, ">", 0, source=paper("Fig. 3"))
    return v.rows


def meta(seed, rows, started="2026-01-01T00:00:00Z"):
    return {"claim": "MLI-7", "overrides": {"seed": seed}, "parameters": {"seed": seed},
            "verdict": {"outcome": None, "rows": rows}, "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc",
            "started": started, "provenance": {}}


@pytest.fixture
def put(tmp_path, monkeypatch):
    """Store MLI-7's runs in tmp_path ({seed: rows}); no control declared, no history: every seed is fresh."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(params, "PROFILES", tmp_path / "profiles")
    monkeypatch.setattr(history, "REVISIONS", tmp_path / "revisions")
    monkeypatch.setattr(history, "git_revisions", lambda claim: [])
    (tmp_path / "profiles").mkdir()
    (tmp_path / "profiles" / "MLI-7.yml").write_text("no control: a formula\n")

    def put(runs, profile="default"):
        for seed, rows in runs.items():
            results.store(MLI7, meta(seed, rows), profile)
    return put


def test_a_claim_robust_to_its_alternatives(put):
    put({s: verdict(1.0, 0.9) for s in range(10)})
    a = evidence.assess(MLI7)
    assert a["undeclared"] == []
    assert a["headline"] == R and (a["k"], a["n"], a["inconclusive"]) == (10, 10, 0)
    assert a["robust"] is True and a["depends"] == {}
    assert set(a["alternatives"]) == {"finite through the first phase", "the figure's mean - sd > 0"}
    assert all(x["headline"] == R for x in a["alternatives"].values())


def test_a_claim_that_depends_on_a_reading(put):
    """TFD-4's case: the literal share of 1 fails in most seeds, the figure's reading holds in every one."""
    put({s: verdict(1.0 if s < 1 else 0.95, 0.9) for s in range(10)})
    a = evidence.assess(MLI7)
    assert a["headline"] == N and (a["k"], a["n"]) == (1, 10)
    assert a["robust"] is False
    assert a["depends"] == {"'always positive': share of steps with o > 0": {"the figure's mean - sd > 0": R}}
    assert a["alternatives"]["the figure's mean - sd > 0"]["why"] == "the paper's figure shows mean ± sd"


def test_a_requirements_alternative_can_change_the_headline(put):
    """Six runs diverge late, after their first phase: INCONCLUSIVE under 'finite over the whole budget',
    REPRODUCED under 'finite through the first phase'."""
    put({s: verdict(1.0, 0.9, whole_run_finite=s >= 6) for s in range(10)})
    a = evidence.assess(MLI7)
    assert a["headline"] == I and a["inconclusive"] == 6 and (a["k"], a["n"]) == (4, 4)
    assert a["depends"] == {"training stayed finite": {"finite through the first phase": R}}


def test_a_diverged_run_is_inconclusive_never_a_failed_check(put):
    """A run whose net diverged has NaN statistics, which fail their checks; its requirement makes it INCONCLUSIVE,
    and the tally counts it beside the conclusive runs, not among them."""
    put({s: verdict(math.nan if s == 0 else 1.0, 0.9, s != 0, s != 0) for s in range(10)})
    a = evidence.assess(MLI7)
    assert a["outcomes"][0] == I and a["outcomes"][1] == R
    assert (a["headline"], a["k"], a["n"], a["inconclusive"]) == (R, 9, 9, 1)
    assert a["alternatives"]["finite through the first phase"]["headline"] == R  # seed 0 diverged before it too


def test_a_stored_pass_that_disagrees_with_its_numbers_is_recomputed():
    rows = verdict(1.0, 0.9)
    forged = {s: {"rows": [{**r, "ok": False} for r in rows]} for s in range(10)}
    j = rules.judge(forged)
    assert j["headline"] == R and j["k"] == 10


def test_fewer_than_ten_fresh_seeds_give_no_headline(put):
    put({s: verdict(1.0, 0.9) for s in range(9)})
    a = evidence.assess(MLI7)
    assert a["headline"] == rules.UNCONFIRMED and (a["k"], a["n"]) == (9, 9)
    assert a["all_seeds"]["headline"] == R


def _state(tmp_path, at, commit):
    """The history's state of the store as it is now, at a time."""
    body = results.path(MLI7).read_bytes()
    return {**history.state(body, None, {"lr": 0.1}, {}), "at": at, "commit": commit}


def test_the_fresh_seeds_decide_and_a_seed_stored_with_a_declared_revision_is_fresh(put, tmp_path):
    """Seeds 0-4 were run, the check was revised (declared in c2), and seeds 0-19 were stored in c3 with the
    revised check: 5-19 are fresh (first run after the declaration, though stored in the state that carries the
    change), 0-4 are not. The fresh seeds decide the headline; every seed's tally is shown beside it."""
    put({s: verdict(0.95, 0.9) for s in range(5)})
    first = _state(tmp_path, "2026-01-01T00:00:00+00:00", "c1")
    for s in range(20):  # seeds 0-4 now reproduce too, so that the fresh tally (5-19) differs from all seeds'
        results.store(MLI7, meta(s, verdict(1.0 if s < 14 else 0.95, 0.9), "2026-01-02T12:00:00Z"))
    body = results.path(MLI7).read_bytes()
    revised = {**history.state(body, None, {"lr": 0.1}, {}), "at": "2026-01-03T00:00:00+00:00", "commit": "c3"}
    revised["rows"]["'always positive': share of steps with o > 0"][2] = 0.99  # the threshold moved
    revision = {**history._revision({"date": "2026-01-02", "kind": "threshold", "what": "share >= 1",
                                     "why": "the text's 'always'"}), "at": "2026-01-02T00:00:00+00:00", "commit": "c2"}
    history.merge(MLI7, [first, revised], [revision])
    a = evidence.assess(MLI7)
    assert a["fresh"]["seeds"] == list(range(5, 20)) and a["fresh"]["since"] == "2026-01-02T00:00:00+00:00"
    assert (a["headline"], a["k"], a["n"]) == (rules.MIXED, 9, 15)  # seeds 5-13 of 5-19
    assert (a["all_seeds"]["k"], a["all_seeds"]["n"]) == (14, 20)


def test_an_undeclared_change_leaves_no_seed_before_it_fresh(put, tmp_path):
    put({s: verdict(1.0, 0.9) for s in range(10)})
    first = _state(tmp_path, "2026-01-01T00:00:00+00:00", "c1")
    moved = {**first, "key": "other", "at": "2026-01-02T00:00:00+00:00", "commit": "c2",
             "rows": {**first["rows"], "gap": ["check", ">", 0.1, "Fig. 3"]}}
    history.merge(MLI7, [first, moved])
    a = evidence.assess(MLI7)
    assert a["fresh"]["seeds"] == [] and a["headline"] == rules.UNCONFIRMED and a["all_seeds"]["headline"] == R


def test_every_choice_of_ours_declares_its_alternatives_or_why_there_is_none():
    v = Verdict("MLI-7")
    v.check("a", 1.0, ">", 0, source=ours("any rise"))
    v.check("b", 1.0, ">", 0, source=ours("any rise", no_alternative="the sign is the claim's own statistic"))
    v.check("c", 1.0, ">", 0, source=paper("Fig. 3"))
    v.check("d", 1.0, ">", 0, source=ours("any rise"), inner={"eps (ours)": (1.0, 1.0)})
    assert evidence.sensitivity.undeclared({0: {"rows": v.rows}}) == ["a"]
    with pytest.raises(ValueError, match="plausible"):
        ours("x", no_alternative=" ")
    with pytest.raises(ValueError, match="reason"):
        Verdict("MLI-7").check("e", 1.0, ">", 0, source=ours("x"), alternatives={"y": alt(1.0)})


def test_a_revised_control_is_judged_on_its_fresh_seeds(put, tmp_path):
    """The control's seeds 0-4 ran before it was changed: they no longer count, and until seeds run after the
    change are stored the control tests nothing. Its first declaration is no revision of it."""
    (tmp_path / "profiles" / "MLI-7.yml").write_text("control:\n  power: 1\ncontrol about: a linear model\n")
    failing = {s: verdict(0.5, -1.0) for s in range(5)}  # the control fails the checks: informative
    put({s: verdict(1.0, 0.9) for s in range(10)})
    put(failing, "control")
    body, control = results.path(MLI7).read_bytes(), results.path(MLI7, "control").read_bytes()
    declared = {**history.state(body, control, {"lr": 0.1}, {"control": {"power": 1}}),
                "at": "2026-01-01T00:00:00+00:00", "commit": "c1"}
    history.merge(MLI7, [declared])
    a = evidence.assess(MLI7)
    assert a["history"]["control_fresh"]["seeds"] is None and a["headline"] == R
    changed = {**declared, "key": "other", "at": "2026-01-02T00:00:00+00:00", "commit": "c2",
               "control": {**declared["control"], "profile": {"power": 2}}}
    history.merge(MLI7, [changed])
    a = evidence.assess(MLI7)
    assert a["history"]["control_fresh"]["seeds"] == [] and a["untested"]  # nothing tested: INCONCLUSIVE runs
    assert a["all_seeds"]["headline"] == I and a["headline"] == rules.UNCONFIRMED  # a revision of the claim too
    for s in range(5, 10):
        results.store(MLI7, meta(s, verdict(0.5, -1.0)), "control")
    for s in range(10, 20):
        results.store(MLI7, meta(s, verdict(1.0, 0.9), "2026-01-02T12:00:00Z"))
    body, control = results.path(MLI7).read_bytes(), results.path(MLI7, "control").read_bytes()
    history.merge(MLI7, [{**history.state(body, control, {"lr": 0.1}, {"control": {"power": 2}}),
                          "at": "2026-01-03T00:00:00+00:00", "commit": "c3"}])
    a = evidence.assess(MLI7)
    assert a["history"]["control_fresh"]["seeds"] == [5, 6, 7, 8, 9] and a["fresh"]["seeds"] == list(range(10, 20))
    assert a["headline"] == R and not a["untested"]


def test_nbdemo_list_gives_the_deciding_tally_and_robustness_as_json(put, capsys):
    from nbdemo import cli
    put({s: verdict(1.0 if s < 1 else 0.95, 0.9) for s in range(10)})
    cli.main(["list", "--json"])
    line = next(x for x in json.loads(capsys.readouterr().out) if x["claim"] == "MLI-7")
    assert (line["headline"], line["k"], line["n"], line["inconclusive"]) == (N, 1, 10, 0)
    assert line["robustness"].startswith("depends on: 'always positive'") and line["fresh_seeds"] == list(range(10))


@pytest.mark.parametrize("claim", CLAIMS.values(), ids=lambda c: c.id)
def test_every_committed_choice_of_ours_declares_its_alternatives(claim):
    """In the committed notebook's verdict, every scored row whose threshold is ours declares alternatives or says
    why no other reading is plausible."""
    import nbformat
    from nbdemo.runs import runner
    meta = runner.summary(nbformat.read(claim.notebook, as_version=4))
    rows = {0: {"rows": meta["verdict"]["rows"]}}
    assert not evidence.sensitivity.undeclared(rows), f"{claim.id}: rows of ours without alternatives"
