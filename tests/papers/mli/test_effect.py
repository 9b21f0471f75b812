import math

import pytest
import torch

from nbdemo.claims.verdict import Verdict
from nbdemo.papers.mli.effect import check_longer


def curve(plateau_points, n=50, k=10):
    """An error curve at 1 - 1/k for its first `plateau_points` grid points, then 0; the loss at log k likewise."""
    alphas = torch.linspace(0, 1, n, dtype=torch.float64)
    high = torch.arange(n) < plateau_points
    return dict(alpha=alphas, error=torch.where(high, 1 - 1 / k, 0.0).double(),
                loss=torch.where(high, math.log(k), 0.01).double(), delta_max=0.0)


def verdict_of(first, last):
    v = Verdict("MLI-5")
    d = check_longer(v, {"FCN4": [curve(p) for p in first], "FCN10": [curve(p) for p in last]}, 10, "error",
                     where="§5, Fig. 7")
    return v, d


def test_a_difference_of_three_grid_steps_passes_and_two_fail():
    v, d = verdict_of([2, 2], [5, 5])  # lengths (p - 1)/49: a difference of 3 grid steps
    assert d == pytest.approx(3 / 49) and v.rows[0]["ok"]
    v, d = verdict_of([2, 2], [4, 4])
    assert d == pytest.approx(2 / 49) and not v.rows[0]["ok"]


def test_the_row_declares_the_plateau_thresholds_it_depends_on():
    v, _ = verdict_of([1, 3], [10, 20])
    row = v.rows[0]
    assert row["kind"] == "check" and row["source"]["from"] == "ours"
    assert any("hold" in name for name in row["inner"]) and all(len(x) == 2 for x in row["inner"].values())


def test_a_diverged_net_gives_a_failed_check_not_a_traceback():
    nan = curve(5)
    nan["error"][:] = math.nan
    nan["loss"][:] = math.nan
    v = Verdict("MLI-5")
    check_longer(v, {"FCN4": [curve(2)], "FCN10": [nan]}, 10, "error", where="§5")
    assert v.rows[0]["ok"] is False


def test_a_sweeps_verdict_has_both_trends_and_the_effect_size():
    from nbdemo.ml.train import History
    from nbdemo.papers.mli.effect import sweep_verdict
    runs = {"FCN4": [curve(p) for p in (2, 3, 2)], "FCN10": [curve(p) for p in (12, 14, 13)]}
    hists = {name: History(loss=None) for name in runs}
    v = sweep_verdict("MLI-5", runs, hists, 10, where="§5, Fig. 7")
    checks = [r["name"] for r in v.rows if r["kind"] == "check"]
    assert [c.split(" plateau")[0] for c in checks] == ["error", "error", "loss"]
    assert "by at least 3 grid steps" in checks[1] and v.outcome == "REPRODUCED"
