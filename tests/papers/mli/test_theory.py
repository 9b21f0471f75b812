import math

import pytest
import torch

from nbdemo.papers.mli import theory as mt


def test_homogeneous_net_is_the_r_th_power_plus_bias():
    torch.manual_seed(0)
    net = mt.HomogeneousNet(3, 5, r=3, delta=0.1)
    assert (net.W >= 0).all() and (net.b == 0).all()
    with torch.no_grad():
        net.b.copy_(torch.tensor([1.0, -2.0, 0.5]))
    x = torch.randn(4, 5)
    assert torch.allclose(net(x), (x @ net.W.T) ** 3 + net.b)


def test_dataset_without_noise_is_the_class_basis_vectors():
    X, y = mt.orthonormal_dataset(3, 6, 2, 0.0)
    assert y.tolist() == [0, 0, 1, 1, 2, 2]
    assert torch.equal(X, torch.eye(3, 6)[y])
    X, _ = mt.orthonormal_dataset(2, 10_000, 1, 0.5, generator=torch.Generator().manual_seed(0))
    assert (X - torch.eye(2, 10_000)[[0, 1]]).norm(dim=1).tolist() == pytest.approx([0.5, 0.5], rel=0.05)


def test_homogeneous_bounds_by_hand():
    W = torch.diag(torch.tensor([1.0, 2.0, 3.0]))
    b = torch.tensor([0.0, -1.0, 1.0])  # top class 2, gaps 1 and 2, R = 1/1 and 2/8
    out = mt.homogeneous_bounds(W, b, r=3, delta=0.01, eps=0.001)
    assert out["top"] == 2 and out["delta_min"] == 1 and out["delta_max"] == 2 and out["W_max"] == 3
    assert out["R_min"] == pytest.approx(0.25) and out["R_max"] == pytest.approx(1.0)
    assert out["alpha1"] == pytest.approx(0.01)
    assert out["alpha2_lead"] == pytest.approx(0.5)
    assert out["alpha2"] == pytest.approx(0.5 / 1.1 ** 1.5)
    assert out["alpha3"] == pytest.approx(0.1 / 3)
    assert out["alpha4"] == pytest.approx(math.sqrt(1.01 / 3))


def test_error_plateau_ends_at_the_leading_order_alpha2():
    # θ(0) = 0: the logits of e_j at α are (α W_jj)^r δ_ij + α b_i, so sample j leaves the top class
    # exactly when α^(r−1) = Δ_j / W_jj^r; the plateau ends at R_min^(1/(r−1)).
    r, W, b = 4, torch.tensor([1.5, 0.8, 2.0]), torch.tensor([0.2, 0.1, 1.0])
    end = mt.homogeneous_bounds(torch.diag(W), b, r=r, delta=1e-6, eps=0.1)["alpha2_lead"]

    def predictions(alpha):
        return ((alpha * torch.diag(W)) ** r + alpha * b).argmax(1)

    assert predictions(end * 0.99).tolist() == [2, 2, 2]
    assert predictions(end * 1.01).tolist() != [2, 2, 2]


def test_loss_band():
    lo, hi = mt.loss_band(torch.tensor([0.0, 0.5]), 4, 2.0, 0.1, c=2)
    assert lo == pytest.approx(math.log(4) - 0.2 * math.e)
    assert hi.tolist() == pytest.approx([math.log(4) + 0.2 * math.e, math.log(4) + 1 + 0.2 * math.e])


def test_fcn_bounds_by_hand():
    V0, VT = [0.01 * torch.eye(2)] * 3, [torch.eye(2)] * 3
    out = mt.fcn_bounds(V0, VT, torch.tensor([0.5, 0.0]), eps=0.001)
    assert out["delta"] == pytest.approx(0.01) and out["V_max"] == pytest.approx(1.0)
    assert out["alpha1"] == pytest.approx(0.02)
    assert out["alpha2"] == pytest.approx(0.5 / 1.1 ** 1.5)
    assert out["alpha3"] == pytest.approx(0.1)
    assert out["delta_limit"] == pytest.approx(min(0.1 / 3, 1 / 9, 1 / (2 * math.e) ** 2))


def test_fcn_bounds_rebalance_and_input_norm():
    # layers of init norms 0.1, 1, 10 (geometric mean 1), input norms up to 2 folded into layer 1
    V0 = [0.1 * torch.eye(2), torch.eye(2), 10 * torch.eye(2)]
    VT = [torch.eye(2), torch.eye(2), torch.eye(2)]
    b = torch.tensor([1.0, 0.0])
    plain = mt.fcn_bounds(V0, VT, b, eps=0.1, x_norm=2.0, rebalance=False)
    assert plain["delta"] == pytest.approx(10) and plain["V_max"] == pytest.approx(2)
    bal = mt.fcn_bounds(V0, VT, b, eps=0.1, x_norm=2.0)
    assert bal["delta"] == pytest.approx(2 ** (1 / 3))  # (0.2 · 1 · 10)^(1/3)
    assert bal["V_max"] == pytest.approx(2 ** (1 / 3) / 0.2 * 2)  # c_1 = 2^(1/3)/0.2 on layer 1 of norm 2
    # a function-preserving rescaling of the layers does not change the rebalanced bounds
    c = [3.0, 0.5, 2 / 3]
    scaled = mt.fcn_bounds([ci * v for ci, v in zip(c, V0)], [ci * v for ci, v in zip(c, VT)], b, eps=0.1, x_norm=2.0)
    assert scaled["alpha1"] == pytest.approx(bal["alpha1"]) and scaled["alpha2"] == pytest.approx(bal["alpha2"])


def test_random_symmetric_tensor():
    T = mt.random_symmetric_tensor(4, generator=torch.Generator().manual_seed(0))
    assert T.norm().item() == pytest.approx(1.0)
    assert torch.allclose(T, T.permute(1, 0, 2)) and torch.allclose(T, T.permute(2, 1, 0))


def test_hard_minimiser_of_a_rank_one_tensor():
    T = torch.zeros(3, 3, 3, dtype=torch.float64)
    T[0, 0, 0] = 1.0  # max T(v, v, v) = 1 at v = e1, so x* = 3/4 e1 and f* = −27/256
    x, z = mt.hard_minimiser(T, n_starts=50, generator=torch.Generator().manual_seed(0))
    assert x.tolist() == pytest.approx([0.75, 0, 0], abs=1e-6) and z.item() == 0
    assert mt.hard_function(T, x, z).item() == pytest.approx(-27 / 256)
    x = torch.tensor([[0.0, 1.0, 0.0]], dtype=torch.float64)
    assert mt.hard_function(T, x, torch.tensor([2.0], dtype=torch.float64)).tolist() == [1 + 16]


def test_easy_function_values_of_the_paper():
    f = lambda x, y: mt.easy_function(torch.tensor(x, dtype=torch.float64), torch.tensor(y, dtype=torch.float64)).item()
    assert f(0.0, 1.0) == pytest.approx(-2 / 3)
    assert f(0.0, -1.0) == pytest.approx(-4 / 3)
    assert f(0.0, 0.0) == 0
    # the midpoint of (sin β, cos β) and (0, −1) for β = π/3 (proof of Prop. 5)
    assert f(math.sqrt(3) / 4, -0.25) == pytest.approx(-49 / 96)
    theta, r = torch.tensor([0.3, 2.0, -1.2], dtype=torch.float64), torch.tensor([0.5, 1.0, 1.7], dtype=torch.float64)
    assert torch.allclose(mt.easy_function(r * theta.cos(), r * theta.sin()), mt.h_polar(theta, r))


def test_bounds_without_a_bias_gap_are_an_empty_interval():
    # the untrained model (equal biases) breaks Assumption 1: no plateau is predicted, and nothing divides by zero
    out = mt.homogeneous_bounds(torch.eye(3, 5) * 0.5, torch.zeros(3), r=3, delta=0.1, eps=0.05)
    assert out["alpha1"] == math.inf and out["alpha2"] == 0
    V = [torch.eye(4) * 0.5 for _ in range(3)]
    out = mt.fcn_bounds(V, V, torch.zeros(4), eps=0.1)
    assert out["alpha1"] == math.inf and out["alpha2"] == 0


def test_easy_line_values_of_the_paper():
    # Prop. 5's proof at r = 1, beta = pi/3: start (sin b, cos b) with f = -5/6, midpoint -49/96, end (0, -1) at -4/3
    alphas = torch.tensor([0.0, 0.5, 1.0], dtype=torch.float64)
    g = mt.easy_line(1.0, math.pi / 3, alphas)
    assert g.tolist() == pytest.approx([-5 / 6, -49 / 96, -4 / 3])
    # broadcasting: (alpha, r, beta), and the curve for -beta is the mirror image's, the same
    r, beta = torch.tensor([1.0, 2.0], dtype=torch.float64), torch.tensor([-0.5, 0.5], dtype=torch.float64)
    g = mt.easy_line(r[:, None], beta[None], alphas)
    assert g.shape == (3, 2, 2) and torch.allclose(g[..., 0], g[..., 1])
    assert g[-1].flatten().tolist() == pytest.approx([-4 / 3] * 4)


def test_rise():
    c = torch.tensor([[3.0, 1.0, 2.0, 0.0, 5.0], [4.0, 3.0, 2.0, 1.0, 0.0]], dtype=torch.float64)
    assert mt.rise(c, dim=1).tolist() == [5.0, 0.0]  # 5 - 0, and a decreasing curve
    assert mt.rise(c.T).tolist() == [5.0, 0.0]
    # from (0, 1) straight down through the origin: -2/3 at the start, 0 at the origin, so a rise of 2/3
    down = mt.easy_line(1.0, 0.0, torch.linspace(0, 1, 101, dtype=torch.float64))
    assert mt.rise(down).item() == pytest.approx(2 / 3)


def test_prop5_at_the_edge_angle_fails_beyond_the_unit_circle():
    # |beta| = pi/3: the rise is above 5/32 at r = 1, below it from r = 1.963 on, and the curve is monotone beyond
    # r = 45.12 (where its largest slope reaches 0)
    alphas = torch.linspace(0, 1, 10001, dtype=torch.float64)
    out = mt.rise(mt.easy_line(torch.tensor([1.0, 1.95, 1.98, 44.0, 46.0, 60.0]), math.pi / 3, alphas)).tolist()
    assert out[0] == pytest.approx(0.3354, abs=1e-4)
    assert out[1] > 5 / 32 > out[2]
    assert out[3] > 0 and out[4] == out[5] == 0


def test_bounds_of_a_diverged_net_are_not_finite_and_do_not_raise():
    # issue 43: a net whose weights went NaN gives NaN bounds (an empty interval), not a linear-algebra error
    nan, V = torch.full((4, 3), float("nan")), [torch.randn(4, 4), torch.randn(2, 4)]
    b = mt.fcn_bounds([nan, *V], [nan, *V], torch.tensor([float("nan"), 1.0]), eps=0.1)
    assert b["alpha1"] == math.inf and not b["alpha2"] > 0 and math.isnan(b["alpha3"])
    h = mt.homogeneous_bounds(torch.full((3, 5), float("nan")), torch.full((3,), float("nan")), r=3, delta=0.1, eps=0.05)
    assert h["alpha1"] == math.inf and math.isnan(h["alpha2"])


def test_homogeneous_bounds_at_r_1_have_no_alpha2_or_alpha4():
    # MLI-7's control is the linear model (r = 1), where Theorem 3's exponent 1/(r - 1) is undefined
    b = mt.homogeneous_bounds(2 * torch.eye(3), torch.tensor([0.0, 1.0, 2.0]), r=1, delta=0.1, eps=0.05)
    assert b["alpha1"] == pytest.approx(0.1) and b["alpha3"] == pytest.approx(0.025)
    assert math.isnan(b["alpha2"]) and math.isnan(b["alpha2_lead"]) and math.isnan(b["alpha4"])
