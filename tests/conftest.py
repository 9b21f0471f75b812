"""Shared test fixtures."""
import shutil
import tempfile
from pathlib import Path

import pytest

from nbdemo.claims.verdict import INCONCLUSIVE, REPRODUCED, Verdict, ours
from nbdemo.runs import store

TOGETHER = ("tests/book/test_book.py",)  # modules whose tests share a build and a browser's visits (module fixtures)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """Under pytest-xdist's default `--dist load`, the tests of each TOGETHER module run on one worker, so that its
    module fixtures are made once rather than once per worker; every other test is scheduled on its own, as by load.
    (xdist's own xdist_group mark does not group under pytest 9.)"""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Together(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return next((module for module in TOGETHER if nodeid.startswith(module + "::")), nodeid)

    return Together(config, log)


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """Torch on one thread in the test process, as in every notebook (`nbdemo.setup`): the tests' small tensors spend
    their time in each operation's fixed cost, which a second thread does not share, and two pytest-xdist workers of
    two threads each on two cores wait on each other's threads."""
    import torch
    torch.set_num_threads(1)


def _fake_meta(claim, seed, outcome=REPRODUCED, fresh=True, profile="default"):
    """The metadata `runner.run` returns for a `Claim`, for a run that never happened: one requirement and one check
    (each with a statistic of 1 where it passes and 0 where it fails, against 0.5) whose results give `outcome`; its
    fingerprint is today's (or not, with fresh=False)."""
    v = Verdict(claim.id)
    v.require("fit", float(outcome != INCONCLUSIVE), ">=", 0.5, source=ours("synthetic"))
    v.check("claim", float(outcome == REPRODUCED), ">=", 0.5, source=ours("synthetic"))
    return {"claim": claim.id, "overrides": {"seed": seed}, "parameters": {"seed": seed},
            "verdict": {"outcome": outcome, "rows": v.rows},
            "fingerprint": store.expected_fingerprint(claim, seed, profile) if fresh else "0" * 16,
            "wall_s": 1.0 + seed, "commit": "abc", "started": "now", "provenance": {"device": "cpu"}}


@pytest.fixture(scope="session")
def fake_meta():
    return _fake_meta


@pytest.fixture
def short_tmpdir():
    """An empty folder for $TMPDIR of a command under test, with a short path: a kernel's Unix sockets live under
    it, and a socket's path may not be longer than 107 bytes (pytest's tmp_path is long already)."""
    folder = Path(tempfile.mkdtemp(prefix="nbd-", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)
