"""The first-phase rows of the TFD verdicts (nbdemo.papers.tfd.experiment): their statistic decides exactly what first_phase decides."""
import math

import numpy as np
import pytest

from nbdemo.claims.verdict import Verdict
from nbdemo.papers.tfd import experiment as tfd
from nbdemo.papers.tfd.metrics import first_phase

K = 10
STEPS = list(range(0, 1001, 20))


def curve(plateau_until, floor=0.5, start=math.log(K)):
    """A loss that sits at `start` up to `plateau_until`, then falls linearly to `floor` at the last step."""
    t = np.array(STEPS, dtype=float)
    fall = np.clip((t - plateau_until) / max(1, STEPS[-1] - plateau_until), 0, 1)
    return start + (floor - start) * fall


@pytest.mark.parametrize("loss", [curve(500), curve(40), curve(2000), curve(500, floor=0.91 * math.log(K)),
                                  curve(500, floor=0.89 * math.log(K)), curve(300, start=3.0)])
def test_drop_ratio_decides_what_first_phase_decides(loss):
    phase = first_phase(STEPS, loss, K)
    assert (tfd.drop_ratio(loss, K) < 1 - tfd.DROP) == phase.ended


def rows(loss, steps=STEPS[-1], kind="requirement"):
    v = Verdict("TFD-2")
    tfd.require_first_phase(v, first_phase(STEPS[:len(loss)], loss, K), loss, K, steps, kind=kind)
    return {r["name"]: r for r in v.rows}


def test_first_phase_rows_pass_for_a_long_plateau_and_a_drop():
    r = rows(curve(500))
    assert [x["kind"] for x in r.values()] == ["requirement", "requirement"]
    assert all(x["ok"] for x in r.values())
    assert r["the first phase lasts at least 5% of the budget"]["value"] == 500  # the last step before the fall


def test_a_short_first_phase_fails_only_the_length_row():
    r = rows(curve(20))
    assert r["the loss drops within the budget"]["ok"]
    assert not r["the first phase lasts at least 5% of the budget"]["ok"]  # last step < 1000 // 20


def test_no_drop_fails_both_rows_and_step_0_does_not_crash():
    for loss, steps in [(curve(2000), STEPS[-1]), (curve(2000)[:1], 0)]:
        r = rows(loss, steps, kind="check")
        assert [x["kind"] for x in r.values()] == ["check", "check"]
        assert not any(x["ok"] for x in r.values())
        assert r["the first phase lasts at least 5% of the budget"]["value"] == "nan"
