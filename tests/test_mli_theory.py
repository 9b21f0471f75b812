import math

import pytest
import torch

from nbdemo import mli_theory as mt


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
