import math

import pytest
import torch

from nbdemo.claims.verdict import Verdict
from nbdemo.papers.mli.effect import check_longer, check_never_shorter


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


def never_shorter(*settings):
    v = Verdict("MLI-5")
    runs = {f"FCN{2 * i + 4}": [curve(p) for p in points] for i, points in enumerate(settings)}
    return v, check_never_shorter(v, runs, 10, "error", where="§5, Fig. 7")


def test_a_reversal_of_one_grid_step_passes_and_of_two_fails():
    v, d = never_shorter([3, 3], [2, 2], [10, 10])  # means 2/49 -> 1/49 -> 9/49: one step back
    assert d == pytest.approx(-1 / 49) and v.rows[0]["ok"]
    v, d = never_shorter([4, 4], [2, 2], [10, 10])  # two steps back, though the ends are far apart
    assert d == pytest.approx(-2 / 49) and not v.rows[0]["ok"]
    row = v.rows[0]
    assert row["kind"] == "check" and row["source"]["from"] == "ours" and "grid's resolution" in row["source"]["why"]
    assert "means 0.06 → 0.02 → 0.18" in row["measured"] and any("hold" in name for name in row["inner"])


def test_a_reversal_of_exactly_one_step_on_the_notebooks_float32_grid_passes_and_three_steps_are_three():
    """The notebooks' α grid is float32, whose points are not exact multiples of 1/(n - 1): lengths are whole steps."""
    def curve32(points, start):
        c = curve(start + points, n=11)
        c["error"][:start] = 0.0
        return {**c, "alpha": torch.linspace(0, 1, 11)}
    v = Verdict("MLI-5")
    runs = {"FCN4": [curve32(2, 0), curve32(2, 0)], "FCN6": [curve32(1, 7), curve32(1, 3)],
            "FCN8": [curve32(5, 2), curve32(5, 4)]}  # lengths 0.1 → 0 → 0.4, each from other grid points
    assert check_never_shorter(v, runs, 10, "error", where="§5") == -0.1 and v.rows[0]["ok"]
    assert check_longer(v, runs, 10, "error", where="§5") == pytest.approx(0.3) and v.rows[1]["ok"]


def test_the_smallest_neighbouring_difference_is_of_means_not_of_single_nets():
    v, d = never_shorter([2, 6], [4, 4], [5, 5])  # means 3/49 -> 3/49 -> 4/49; one net of the first is longer
    assert d == pytest.approx(0.0) and v.rows[0]["ok"]


def test_a_length_off_the_grid_is_refused():
    from nbdemo.papers.mli.effect import smallest_step
    summary = {"FCN4": {"error_len": torch.tensor([0.1])}, "FCN6": {"error_len": torch.tensor([0.3])}}
    with pytest.raises(ValueError, match="whole number of steps"):
        smallest_step(summary, list(summary), "error", 50)


def test_a_sweeps_verdict_checks_the_means_for_error_and_loss_and_notes_the_rank_trend():
    from nbdemo.ml.train import History
    from nbdemo.papers.mli.effect import sweep_verdict
    runs = {"FCN4": [curve(p) for p in (2, 3, 2)], "FCN6": [curve(p) for p in (6, 7, 6)],
            "FCN10": [curve(p) for p in (12, 14, 13)]}
    hists = {name: History(loss=None) for name in runs}
    v = sweep_verdict("MLI-5", runs, hists, 10, where="§5, Fig. 7")
    checks = [r["name"] for r in v.rows if r["kind"] == "check"]
    assert [c.split(" plateau")[0] for c in checks] == ["mean error", "error", "mean loss", "loss"]
    assert "never shortens" in checks[0] and "by at least 3 grid steps" in checks[1]
    assert "never shortens" in checks[2] and "by at least 3 grid steps" in checks[3]
    notes = [r for r in v.rows if r["kind"] == "note"]
    assert [n["name"].split(" plateau")[0] for n in notes] == ["error", "loss"]
    assert all("p-value" in n["name"] and "ρ =" in n["measured"] for n in notes)
    assert not any("p-value" in c for c in checks) and v.outcome == "REPRODUCED"


def test_a_sweep_whose_mean_plateau_shortens_in_the_middle_is_not_reproduced():
    from nbdemo.ml.train import History
    from nbdemo.papers.mli.effect import sweep_verdict
    runs = {"init × 1.0": [curve(p) for p in (2, 2, 2)], "init × 0.1": [curve(p) for p in (8, 8, 8)],
            "init × 0.01": [curve(p) for p in (4, 4, 4)], "init × 0.001": [curve(p) for p in (12, 12, 12)]}
    v = sweep_verdict("MLI-4", runs, {name: History(loss=None) for name in runs}, 10, where="§5, Fig. 6")
    rows = {r["name"].split(":")[0]: r["ok"] for r in v.rows if r["kind"] == "check"}
    assert rows["mean error plateau never shortens along " + " → ".join(runs)] is False
    assert rows["error plateau longer at init × 0.001 than at init × 1.0 by at least 3 grid steps"] is True
    assert v.outcome == "NOT REPRODUCED"


def test_the_smallest_step_is_nan_where_a_setting_holds_a_diverged_net():
    from nbdemo.papers.mli.effect import smallest_step
    from nbdemo.papers.mli.experiment import summarize
    nan = curve(5)
    nan["loss"][:] = math.nan
    runs = {"FCN4": [curve(3)], "FCN6": [nan], "FCN8": [curve(9)]}
    assert math.isnan(smallest_step(summarize(runs, 10), list(runs), "error", 50))
    runs["FCN6"] = [curve(5)]
    assert smallest_step(summarize(runs, 10), list(runs), "error", 50) == pytest.approx(2 / 49)


def test_the_effect_rows_declare_their_grid_step_thresholds_alternatives():
    v, d = verdict_of([2, 2], [5, 5])  # a difference of 3 grid steps
    alts = v.rows[0]["alternatives"]
    assert alts["longer by at least 1 grid step"]["ok"] and not alts["longer by at least 5 grid steps"]["ok"]
    v, d = never_shorter([3, 3], [2, 2], [10, 10])  # one step back
    alts = v.rows[0]["alternatives"]
    assert not alts["never shortens: no reversal at all"]["ok"]
    assert alts["never shortens: reversals up to 2 grid steps"]["ok"]
