"""Shared test fixtures."""
import pytest

from nbdemo import results
from nbdemo.claims import INCONCLUSIVE, REPRODUCED


def _fake_meta(claim, seed, outcome=REPRODUCED, fresh=True):
    """The metadata `runner.run` returns, for a run that never happened: one requirement and one check whose
    results give `outcome`; its fingerprint is today's (or not, with fresh=False)."""
    rows = [{"kind": "requirement", "name": "fit", "expected": "", "measured": "1", "ok": outcome != INCONCLUSIVE},
            {"kind": "check", "name": "claim", "expected": "", "measured": "1", "ok": outcome == REPRODUCED}]
    return {"claim": claim, "overrides": {"seed": seed}, "parameters": {"seed": seed},
            "verdict": {"outcome": outcome, "rows": rows},
            "fingerprint": results.expected_fingerprint(claim, seed) if fresh else "0" * 16,
            "wall_s": 1.0 + seed, "commit": "abc", "started": "now", "provenance": {"device": "cpu"}}


@pytest.fixture(scope="session")
def fake_meta():
    return _fake_meta
