import math
from fractions import Fraction

import pytest
import torch

from nbdemo.ml.models import MLP
from nbdemo.papers.mli.gridsteps import grid_steps, mean_length, same_as_normal, shortening
from nbdemo.papers.mli.metrics import interpolate, plateau


def lengths(steps, start=3, n=50):
    """Plateau lengths as `plateau` reads them off the float32 grid of fcn_data: differences of grid points."""
    alphas = torch.linspace(0, 1, n)
    return torch.tensor([float(alphas[start + s]) - float(alphas[start]) for s in steps], dtype=torch.float64)


def test_lengths_read_off_the_float32_grid_are_whole_steps():
    assert grid_steps(lengths([0, 7, 12, 19]), 50) == [0, 7, 12, 19]
    with pytest.raises(ValueError):
        grid_steps([0.5 / 49], 50)


def test_an_exact_tie_is_exactly_zero_where_the_float_lengths_are_not():
    arm, normal = lengths([6, 6, 7], start=0), lengths([13, 12, 13], start=1)  # 19 steps against half of 38
    assert arm.mean() - normal.mean() / 2 != 0  # the float32 residue the exact count removes
    assert shortening(arm, normal, 50) == 0.0
    assert mean_length(arm, 50) * 147 == 19


def test_shortening_is_the_exact_mean_difference_with_the_factor_as_its_decimal():
    arm, normal = lengths([1, 2, 3]), lengths([20, 20, 20])
    assert shortening(arm, normal, 50) == pytest.approx(2 / 49 - 10 / 49)
    assert shortening(arm, normal, 50, 0.45) == pytest.approx(2 / 49 - 9 / 49)
    assert shortening(lengths([9, 9]), lengths([20, 20]), 50, 0.45) == 0.0  # 9 - 0.45 * 20, exactly


def test_same_as_normal_only_where_every_bias_has_degree_one():
    last, full, none = (MLP(6, 5, 4, 3, bias=b) for b in ("last", "all", "none"))
    assert same_as_normal(last, 1) and same_as_normal(none, None) and same_as_normal(none, 2)
    assert not same_as_normal(last, None) and not same_as_normal(last, 2)
    assert not same_as_normal(full, 1)  # its hidden biases keep degrees 2, 3


@pytest.mark.parametrize("bias,degree", [("last", 1), ("all", 1), ("last", 2), ("last", None)])
def test_same_as_normal_says_when_the_curves_are_the_normal_ones(bias, degree):
    torch.manual_seed(0)
    model = MLP(6, 5, 4, 3, bias=bias, init="kaiming")
    theta0 = {n: t.clone() for n, t in model.state_dict().items()}
    thetaT = {n: t + torch.randn_like(t) for n, t in theta0.items()}
    X, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    alphas = torch.linspace(0, 1, 9)
    a = interpolate(model, theta0, thetaT, X, y, alphas)
    b = interpolate(model, theta0, thetaT, X, y, alphas, scheme="homogeneous", output_degree=degree)
    assert torch.equal(a["loss"], b["loss"]) == same_as_normal(model, degree)


def test_plateau_lengths_of_metrics_count_as_whole_steps():
    alphas = torch.linspace(0, 1, 50)
    error = torch.where(alphas < 0.3, 0.9, 0.0).double()
    p = plateau(alphas, error, torch.full((50,), math.log(10)), 10, eps=0.1)
    assert grid_steps([p["error_len"]], 50) == [14]


def test_a_diverged_net_makes_the_exact_mean_nan():
    assert math.isnan(grid_steps([1 / 49, math.nan], 50)[1])
    assert math.isnan(mean_length([1 / 49, math.nan], 50))
    assert math.isnan(shortening([1 / 49, math.nan], [2 / 49, 2 / 49], 50))
    assert mean_length([1 / 49, 3 / 49], 50) == Fraction(2, 49)
