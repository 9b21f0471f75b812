"""The results store, its summary, and fingerprints fine-grained enough to stale only what changed (the headline rule
is tested in test_evidence)."""
import json
import shutil

import pytest

from nbdemo.claims.registry import CLAIMS
from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from nbdemo.runs import evidence, fingerprint, params, rules, runner, store

R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
MLI7, PCB1 = CLAIMS["MLI-7"], CLAIMS["PCB-1"]


def test_store_keeps_one_record_per_seed_and_summarises(tmp_path, monkeypatch, fake_meta):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    for seed, outcome in [(0, R), (1, R), (2, N), (1, R), (3, I), (4, R)]:  # seed 1 stored twice: replaced
        store.store(MLI7, fake_meta(MLI7, seed, outcome))
    body = json.loads(store.path(MLI7).read_text())
    assert list(body["runs"]) == ["0", "1", "2", "3", "4"] and not list(tmp_path.rglob("*.tmp"))
    s = evidence.summary(MLI7)
    assert (s["headline"], s["n"], s["inconclusive"], s["k"], s["stale"]) == (rules.MIXED, 4, 1, 3, [])  # 3 of 4 conclusive
    assert s["rows"] == {("requirement", "fit"): [4, 5], ("check", "claim"): [3, 5]}
    store.store(MLI7, fake_meta(MLI7, 2, NOT_REPRODUCED, fresh=False))
    assert evidence.summary(MLI7)["stale"] == [2]


def test_editing_one_papers_metrics_stales_only_its_claims(tmp_path, monkeypatch):
    package = tmp_path / "nbdemo"
    shutil.copytree(fingerprint.PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fingerprint, "PACKAGE", package)
    before = {c.id: fingerprint.of(c, params.defaults(c)) for c in CLAIMS.values()}
    with open(package / "papers" / "pcb" / "metrics.py", "a") as f:
        f.write("\n# an edit\n")
    after = {c.id: fingerprint.of(c, params.defaults(c)) for c in CLAIMS.values()}
    changed = {c for c in CLAIMS if before[c] != after[c]}
    assert changed and all(c.startswith("PCB-") for c in changed)
    assert not {"TFD-1", "PFC-1", "MLI-1"} & changed and "PCB-1" in changed
    assert fingerprint.of(PCB1, {**params.defaults(PCB1), "seed": 1}) != after["PCB-1"]


def test_modules_no_notebook_runs_are_in_no_fingerprint():
    outside = {*(fingerprint.PACKAGE / "runs").glob("*.py"), *(fingerprint.PACKAGE / "book").glob("*.py"),
               fingerprint.PACKAGE / "cli.py", fingerprint.PACKAGE / "bench.py"}
    for claim in CLAIMS.values():
        deps = set(fingerprint.dependencies(claim))
        assert fingerprint.PACKAGE / "claims" / "verdict.py" in deps and not deps & outside, claim.id


def pending():
    """The claims listed in results/PENDING: changed, and awaiting the sweep that stores them fresh (README, "Pending
    claims"); the book shows them STALE with their last stored headline (tests/book)."""
    path = store.RESULTS / "PENDING"
    lines = path.read_text().splitlines() if path.exists() else []
    return {line.split("#")[0].strip() for line in lines} - {""}


def test_pending_claims_are_known_and_stale():
    """A claim in results/PENDING is a claim, and is stale: once it is swept fresh it must leave the list, so that the
    list never excuses a claim that no longer needs it."""
    listed = pending()
    assert listed <= set(CLAIMS), f"results/PENDING names no claim: {sorted(listed - set(CLAIMS))}"
    for c in sorted(listed):
        swept = [store.status(CLAIMS[c])] + ([store.status(CLAIMS[c], rules.CONTROL)]
                                             if evidence.control(CLAIMS[c])["profile"] else [])
        assert not all(status and all(fresh for _, fresh in status.values()) for status in swept), \
            f"{c} and its control are fresh in the store: remove it from results/PENDING"


def _pending(claim):
    if claim.id in pending():
        pytest.skip(f"{claim.id} is pending its sweep (results/PENDING)")


@pytest.mark.parametrize("claim", CLAIMS.values(), ids=lambda c: c.id)
def test_committed_results_hold_the_seed_0_page_and_are_fresh(claim):
    """Every claim has its default-profile run of the notebook's own seed stored (the committed page's run) and at
    least 5 seeds in all, so that it has a headline, and no stored run is stale: a change of the notebook's code, of
    a module it imports, or of its parameters needs `nbdemo sweep` again (or the claim listed in results/PENDING)."""
    _pending(claim)
    status, c = store.status(claim), claim.id
    assert params.defaults(claim)["seed"] in status, f"{c}: run `nbdemo sweep {c} --seeds 0 --commit`"
    assert len(status) >= rules.MIN_SEEDS, f"{c}: {len(status)} seeds; run `nbdemo sweep {c} --seeds 0-4`"
    stale = sorted(s for s, (_, fresh) in status.items() if not fresh)
    assert not stale, f"{c}: seeds {stale} are stale; run `nbdemo sweep {c} --seeds 0-4`"
    page = runner.latest(claim)
    assert page and page[1]["verdict"]["rows"] == status[params.defaults(claim)["seed"]][0]["rows"], \
        f"{c}: the committed notebook is not the stored seed-0 run"


@pytest.mark.parametrize("claim", CLAIMS.values(), ids=lambda c: c.id)
def test_committed_results_carry_their_evidence(claim):
    """Every stored requirement and check has its statistic, comparison and source; every claim declares a negative
    control (or why it has none) whose runs cover seeds 0-4 and are fresh; every stored run names the commit
    that holds its code (no +dirty)."""
    c = claim.id
    # the verdict is made with nbdemo.claims.verdict, in the notebook or in a package helper it calls (pfc.depth_order_verdict)
    assert fingerprint.PACKAGE / "claims" / "verdict.py" in fingerprint.dependencies(claim), f"{c}: use nbdemo.claims.verdict"
    decl = evidence.control(claim)
    assert decl and decl["about"].strip(), f"{c}: declare `control:` with `control about:`, or `no control:`"
    _pending(claim)
    stored = store.status(claim)
    runs = {("default", s): r for s, (r, _) in stored.items()}
    if decl["profile"]:
        control = store.status(claim, rules.CONTROL)
        missing = sorted(set(range(rules.MIN_SEEDS)) - set(control))
        assert not missing, f"{c}: control seeds {missing} missing; run `nbdemo sweep {c} --profile control --seeds 0-4`"
        stale = sorted(s for s, (_, fresh) in control.items() if not fresh)
        assert not stale, f"{c}: control seeds {stale} are stale; run `nbdemo sweep {c} --profile control --seeds 0-4`"
        runs.update({("control", s): r for s, (r, _) in control.items()})
    for (profile, seed), r in runs.items():
        bare = [row["name"] for row in r["rows"] if row["kind"] != "note" and not (rules.scored(row) and row["source"])]
        assert not bare, f"{c} {profile} seed {seed}: rows without statistic or source: {bare}"
        assert not r["commit"].endswith("+dirty"), f"{c} {profile} seed {seed}: made from uncommitted code"
