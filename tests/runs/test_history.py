"""The verdict's history: rebuilt from git it is wholly in the committed files, merging and sweeping only add to it,
and it marks revisions after results and finds the seeds run after the last of them."""
import contextlib
import json
import subprocess

import pytest
import yaml

from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, Verdict, ours
from nbdemo.runs import evidence, history, rules, store, sweep

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
MLI7 = CLAIMS["MLI-7"]


def in_git():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--is-shallow-repository"], capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return False
    return out.strip() == "false"


FACTS = ("seeds", "rows", "parameters", "control")


@pytest.mark.skipif(not in_git(), reason="needs the repository's whole git history")
@pytest.mark.parametrize("claim", CLAIMS.values(), ids=lambda c: c.id)
def test_the_committed_history_holds_every_state_and_revision_that_git_holds(claim, monkeypatch):
    """Rebuilt from git, every state of the claim's store is in results/history/, with the same facts (and the same
    headline, where it was judged by today's rule), and every revision ever committed is in it or still in
    results/revisions/ (where the history reads those it has not recorded yet): no entry was dropped or changed."""
    monkeypatch.setattr(store, "RESULTS", ROOT / "results")
    committed = history.load(claim)
    held = {e["key"]: e for e in committed["states"]}
    for s in history.git_states(claim):
        assert s["key"] in held, f"{claim.id}: the state of {s['commit']} is not in {history.path(claim)}; run " \
                                 "`nbdemo history --backfill` and commit results/history/"
        e = held[s["key"]]
        assert {k: e[k] for k in FACTS} == {k: s[k] for k in FACTS}, (claim.id, s["commit"])
        if e["rule"] == rules.RULE_ID:
            assert (e["headline"], e["k"], e["n"]) == (s["headline"], s["k"], s["n"]), (claim.id, s["commit"])
    revisions = {e["key"] for e in committed["revisions"] + history.pending(claim, history.now())}
    assert not [r for r in history.git_revisions(claim) if r["key"] not in revisions], claim.id


def test_every_revision_record_says_when_what_of_which_kind_and_why():
    for file in sorted(history.REVISIONS.glob("*.yml")):
        assert file.stem in CLAIMS, f"{file.name}: not a claim"
        for rev in history.declared(file.read_text()):
            assert rev["kind"] in history.KINDS, f"{file.name}: kind {rev['kind']!r} is not one of {history.KINDS}"
            assert all(rev[k].strip() for k in ("date", "what", "why")), f"{file.name}: {rev}"


def runs_body(outcomes, threshold=0.5, value=None, made="abc"):
    """A results file's bytes: one run per outcome, its check's statistic 1 (pass) or 0 (fail) against `threshold`,
    or `value`; `made`: the commit of the runs' code."""
    runs = {}
    for seed, outcome in enumerate(outcomes):
        v = Verdict("MLI-7")
        v.require("fit", float(outcome != I), ">=", 0.5, source=ours("synthetic"))
        v.check("claim", value if value is not None else float(outcome == R), ">=", threshold, source=ours("synthetic"))
        runs[str(seed)] = {"seed": seed, "outcome": v.outcome, "rows": v.rows, "commit": made, "started": str(seed)}
    return json.dumps({"claim": "MLI-7", "runs": runs}).encode()


@pytest.fixture
def tmp_history(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(history, "REVISIONS", tmp_path / "revisions")
    monkeypatch.setattr(history, "git_revisions", lambda claim: [])  # the repository's own are not these tests'
    return tmp_path


def state(outcomes, at, commit=None, params_=None, **kw):
    return {**history.state(runs_body(outcomes, **kw), None, params_ or {"lr": 0.1, "seed": 0}, {}),
            "at": at, "commit": commit}


def test_merging_only_adds_and_fills_in_commits(tmp_history):
    a, b, c = state([R] * 5, "2026-01-01"), state([R] * 4 + [N], "2026-01-02"), state([N] * 5, "2026-01-03")
    history.merge(MLI7, [a, b])
    h = history.merge(MLI7, [{**b, "commit": "1234567890", "at": "2026-02-01"}, c])  # b found in git later
    assert [e["key"] for e in h["states"]] == [a["key"], b["key"], c["key"]]
    assert h["states"][1]["commit"] == "1234567890" and h["states"][1]["at"] == "2026-01-02"
    assert history.merge(MLI7, []) == h == history.load(MLI7)  # nothing given, nothing lost


def test_a_sweep_of_the_default_profile_or_the_control_records_the_stores_state(tmp_history, monkeypatch,
                                                                                 fake_meta):
    (tmp_history / "revisions").mkdir()
    (tmp_history / "revisions" / "MLI-7.yml").write_text(yaml.safe_dump(
        [{"date": "2026-11-25", "kind": "check", "what": "a check", "why": "Fig. 3"}]))

    def run(client, todo, profile, overrides, *args, **kwargs):
        for claim, seed in todo:
            store.store(claim, fake_meta(claim, seed, R), profile)
        return [], []
    monkeypatch.setattr(sweep, "_run", run)
    monkeypatch.setattr(sweep, "_cluster", lambda *args: None)
    monkeypatch.setattr(sweep, "connect", lambda *args: contextlib.nullcontext())
    sweep.sweep([MLI7], [0, 1, 2, 3, 4], scheduler="tcp://127.0.0.1:1", log=lambda *_: None)
    h = history.load(MLI7)
    assert len(h["states"]) == 1 and h["states"][0]["commit"] is None
    assert h["states"][0]["n"] + h["states"][0]["inconclusive"] == 5
    assert [r["what"] for r in h["revisions"]] == ["a check"] and h["revisions"][0]["at"] <= h["states"][0]["at"]
    history.record(MLI7, history.now())  # the same state again: nothing new
    assert history.load(MLI7) == h
    sweep.sweep([MLI7], [0], overrides={"steps": 10}, scheduler="tcp://127.0.0.1:1", log=lambda *_: None)
    assert history.load(MLI7) == h  # overrides make another store, not the claim's


def test_the_history_marks_revisions_after_results_and_finds_the_fresh_seeds(tmp_history):
    first = state([R] * 5, "2026-01-01T00:00:00+00:00", "c1")
    moved = state([R] * 5, "2026-01-02T00:00:00+00:00", "c2", threshold=0.4)  # a threshold moved: not declared
    again = state([R] * 5, "2026-01-03T00:00:00+00:00", "c3", threshold=0.4, value=0.45)  # other values alone
    more = state([R] * 10, "2026-01-05T00:00:00+00:00", "c5", params_={"lr": 0.2, "seed": 0}, threshold=0.4,
                 value=0.45)
    revision = {**history._revision({"date": "2026-01-04", "kind": "setting", "what": "lr 0.2", "why": "§3"}),
                "at": "2026-01-04T00:00:00+00:00", "commit": "c4"}
    history.merge(MLI7, [first, moved, again, more], [revision])
    past = evidence.past(MLI7, {s: R for s in range(9)} | {9: N})
    items = past["items"]
    assert [e.get("commit") for e in items] == ["c1", "c2", "c3", "c4", "c5"]
    assert [e["revised"] for e in items] == [False, True, False, True, True]
    assert items[1]["changes"] == [("threshold", "claim: >= 0.5 → >= 0.4", "threshold of a check")]
    assert items[2]["changes"] == [("rerun", "seeds 0-4 rerun: values changed", None)]
    assert items[4]["declared"] and not items[1]["declared"]
    assert ("setting", "lr 0.1 → 0.2", None) in items[4]["changes"]
    assert (past["revised"], past["declared"]) == (2, 1)  # the undeclared threshold, and the declared setting
    fresh = past["fresh"]  # the setting was declared (c4) before seeds 5-9 were first stored with it (c5)
    assert fresh["seeds"] == [5, 6, 7, 8, 9] and fresh["since"] == "2026-01-04T00:00:00+00:00"
    later = state([R] * 12, "2026-01-06T00:00:00+00:00", "c6", params_={"lr": 0.2, "seed": 0}, threshold=0.4)
    history.merge(MLI7, [later])
    fresh = evidence.past(MLI7, {s: R for s in range(12)})["fresh"]
    assert fresh["seeds"] == [5, 6, 7, 8, 9, 10, 11]
    assert evidence.brief(items[4]["changes"]) == ["lr 0.1 → 0.2", "seeds 5-9 added"]


def test_outcomes_that_change_with_the_code_alone_are_a_revision(tmp_history):
    history.merge(MLI7, [state([R] * 5, "2026-01-01", "c1"), state([R] * 4 + [N], "2026-01-02", "c2")])
    items = evidence.past(MLI7, {})["items"]
    assert items[1]["revised"] and items[1]["changes"][0][:2] == (
        "reading", "seed 4: outcome changed with the code alone (a statistic's definition, or its numerics)")
    assert evidence.past(MLI7, {s: R for s in range(5)})["fresh"]["seeds"] == []


def test_a_claim_never_revised_has_every_seed_fresh(tmp_history):
    history.merge(MLI7, [state([R] * 5, "2026-01-01", "c1"), state([R] * 5, "2026-01-02", "c2", made="def")])
    past = evidence.past(MLI7, {s: R for s in range(5)})
    assert past["revised"] == 0 and past["fresh"]["seeds"] == [0, 1, 2, 3, 4] and past["fresh"]["since"] is None
    assert past["items"][1]["changes"] == [("rerun", "rerun: every row of every seed equal", None)]


def test_a_revision_written_since_the_last_sweep_is_shown_after_every_state(tmp_history):
    """A revision record not yet merged (written after the last sweep) counts at once: it is after results, and no
    stored seed is fresh after it."""
    history.merge(MLI7, [state([R] * 5, "2026-01-01", "c1")])
    (tmp_history / "revisions").mkdir()
    (tmp_history / "revisions" / "MLI-7.yml").write_text(yaml.safe_dump(
        [{"date": "2026-11-26", "kind": "control", "what": "shuffled labels", "why": "§4"}]))
    past = evidence.past(MLI7, {s: R for s in range(5)})
    assert past["items"][-1]["revision"] and past["items"][-1]["commit"] is None and past["items"][-1]["revised"]
    assert (past["revised"], past["declared"], past["fresh"]["seeds"]) == (1, 1, [])
    assert history.load(MLI7)["revisions"] == []  # reading merges nothing
