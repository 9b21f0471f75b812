"""Analytic cases for the TFD quantities of nbdemo.papers.tfd.metrics (gradients, weight changes, common directions)."""
import math

import numpy as np
import pytest
import torch

from nbdemo.ml.models import MLP
from nbdemo.papers.tfd import metrics as tfd


def orthonormal(n, k, seed):
    q, _ = torch.linalg.qr(torch.randn(n, k, generator=torch.Generator().manual_seed(seed), dtype=torch.float64))
    return q.T  # k orthonormal rows


def test_feature_grads_are_per_sample_gradients():
    torch.manual_seed(0)
    model, X, y = MLP(6, 5, 3, 4).double(), torch.randn(7, 6, dtype=torch.float64), torch.arange(7) % 4
    feats, logits = model.features(X)
    grads = tfd.feature_grads(feats[1:], logits, y)
    for i in range(len(X)):  # one sample at a time, its own loss
        f_i, out_i = model.features(X[i:i + 1])
        ref = torch.autograd.grad(torch.nn.functional.cross_entropy(out_i, y[i:i + 1]), [*f_i[1:], out_i])
        for g, r in zip(grads, ref):
            assert torch.allclose(g[i], r[0])


def test_mean_weight_change_is_the_sgd_step():
    torch.manual_seed(0)
    model, X, y = MLP(6, 5, 3, 4, bias="none").double(), torch.randn(9, 6, dtype=torch.float64), torch.arange(9) % 4
    feats, logits = model.features(X)
    *fdot, gout = tfd.feature_grads(feats[1:], logits, y)
    g2 = fdot[1] * (feats[2] > 0)  # pre-activation gradient of layer 2 = D Ḟ
    lr = 0.1
    step = -lr * torch.autograd.grad(torch.nn.functional.cross_entropy(model(X), y), model.linears[2 - 1].weight)[0]
    assert torch.allclose(tfd.mean_weight_change(g2, feats[1], lr), step)
    assert torch.allclose(tfd.weight_changes(g2, feats[1], lr).mean(0), step)
    step_out = -lr * torch.autograd.grad(torch.nn.functional.cross_entropy(model(X), y), model.linears[-1].weight)[0]
    assert torch.allclose(tfd.mean_weight_change(gout, feats[-1], lr), step_out)


def test_same_class_cosine():
    e = torch.eye(3)
    assert tfd.same_class_cosine(torch.stack([e[0], 2 * e[0], e[1], e[1]]), torch.tensor([0, 0, 1, 1])) == pytest.approx(1)
    # class 0: orthogonal pair (0); class 1: opposite pair (-1); unweighted mean -0.5
    G, y = torch.stack([e[0], e[1], e[2], -e[2], -3 * e[2]]), torch.tensor([0, 0, 1, 1, 1])
    assert tfd.same_class_cosine(G, y) == pytest.approx((0 + (-1 - 1 + 1) / 3) / 2)


def test_pseudo_neuron_cosine():
    u = torch.randn(8, dtype=torch.float64)
    assert tfd.pseudo_neuron_cosine(torch.outer(u, torch.tensor([1.0, 2.0, 0.5, 0.0]).double())) == pytest.approx(1)
    assert tfd.pseudo_neuron_cosine(torch.outer(u, torch.tensor([1.0, -1.0]).double())) == pytest.approx(-1)
    assert tfd.pseudo_neuron_cosine(torch.eye(5)) == pytest.approx(0)


def test_common_direction_of_rank_one_changes():
    u = orthonormal(10, 1, 0)[0]
    dW = torch.stack([torch.outer(u, torch.randn(4, dtype=torch.float64)) for _ in range(6)])
    assert abs(tfd.common_direction(dW) @ u) == pytest.approx(1)


def test_decompose_lemmas():
    W = torch.randn(6, 4, dtype=torch.float64)
    C = torch.randn(6, dtype=torch.float64)
    V, eps = tfd.decompose(W, C)
    assert torch.allclose(V[:, None] * C + eps, W.T)
    assert torch.allclose(eps @ C, torch.zeros(4, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(tfd.decompose(torch.outer(C, V), C)[0], V)  # W = C Vᵀ has ε = 0


def test_common_directions_strengths():
    U, Vr = orthonormal(12, 3, 1), orthonormal(7, 3, 2)
    dW = (10 * torch.outer(U[0], Vr[0]) + torch.outer(U[1], Vr[1]) + 0.5 * torch.outer(U[2], Vr[2])).expand(4, 12, 7)
    C, s = tfd.common_directions(dW, k=4)
    assert s.tolist() == pytest.approx([10, 1, 0.5, 0], abs=1e-9)
    assert abs(C[0] @ U[0]) == pytest.approx(1) and abs(C[1] @ U[1]) == pytest.approx(1)
    # a coefficient that flips sign over time averages out of s_i
    flip = torch.stack([torch.outer(U[0], Vr[0]), -torch.outer(U[0], Vr[0]), 0.1 * torch.outer(U[1], Vr[1]),
                        0.1 * torch.outer(U[1], Vr[1])])
    assert tfd.common_directions(flip, k=2)[1].tolist() == pytest.approx([0, 0.05], abs=1e-9)


def test_perspective2_matches_theorem1_explicitly():
    torch.manual_seed(0)
    n, d, h, h2, lr = 5, 6, 8, 7, 0.1
    W2 = torch.randn(h2, h, dtype=torch.float64)
    C = torch.randn(h2, dtype=torch.float64)
    g2 = torch.randn(n, h2, dtype=torch.float64)
    f = torch.relu(torch.randn(n, h, dtype=torch.float64))
    f_prev = torch.randn(n, d, dtype=torch.float64)
    primary, noise = tfd.perspective2(W2, C, g2, f, f_prev, lr, k=min(h, h2))
    V, eps = tfd.decompose(W2, C)
    U, sig, Vh = torch.linalg.svd(eps, full_matrices=False)
    for x in range(n):
        D = torch.diag((f[x] > 0).double())
        dW2 = -lr * torch.outer(g2[x], f[x])                       # ΔW^(l+1)|x
        dV, deps = tfd.decompose(dW2, C)
        scale = f[x] @ f[x]
        P = D @ torch.outer(V, C) @ torch.outer(C, dV) @ f[x][:, None] @ f_prev[x][None] / scale
        N = [D @ (sig[k] * torch.outer(U[:, k], Vh[k])) @ deps.T @ f[x][:, None] @ f_prev[x][None] / scale
             for k in range(min(h, h2))]
        direct = -lr * torch.outer(D @ (W2.T @ g2[x]), f_prev[x])   # ΔW^(l)|x = -lr D Ḟ^(l) F^(l-1)ᵀ
        assert torch.allclose(P + sum(N), direct)
        assert primary[x] == pytest.approx(torch.linalg.norm(P).item())  # invariant to the scale of C
        assert noise[x].tolist() == pytest.approx([torch.linalg.norm(Nk).item() for Nk in N])


def test_perspective2_primary_dominates_when_w_is_rank_one():
    U = orthonormal(20, 2, 3)
    W2 = 5 * torch.outer(U[0], torch.randn(10, dtype=torch.float64)) + 1e-3 * torch.randn(20, 10, dtype=torch.float64)
    g2 = torch.randn(30, 20, dtype=torch.float64) + 3 * U[0]
    primary, noise = tfd.perspective2(W2, U[0], g2, torch.rand(30, 10), torch.rand(30, 4), lr=0.1)
    assert primary.mean() > 100 * noise.mean(0).max()


def test_lemma3_o_is_one_without_noise():
    # W = C Vᵀ (ε = 0): ΔV = ΔWᵀC ∥ -(Cᵀg) F and ΔF ≈ -Ḟ = -Wᵀg = -(Cᵀg) V, so o = +1 for every sample.
    C, V = orthonormal(9, 1, 4)[0], torch.randn(5, dtype=torch.float64)
    W = torch.outer(C, V)
    g, Fp = torch.randn(6, 9, dtype=torch.float64), torch.rand(6, 5, dtype=torch.float64)
    dV = tfd.decompose(tfd.weight_changes(g, Fp, 0.1), C)[0]
    o = tfd.lemma3_o(dV, Fp, tfd.decompose(W, C)[0], -(g @ W))
    assert o.tolist() == pytest.approx([1] * 6)
    assert tfd.lemma3_o(dV, Fp, tfd.decompose(W, C)[0], g @ W).tolist() == pytest.approx([-1] * 6)


def test_class_weight_changes_are_the_category_means():
    torch.manual_seed(0)
    g, f, y = torch.randn(9, 5, dtype=torch.float64), torch.rand(9, 4, dtype=torch.float64), torch.arange(9) % 3
    dW = tfd.class_weight_changes(g, f, y, 0.1, 4)
    for c in range(3):
        assert torch.allclose(dW[c], tfd.weight_changes(g, f, 0.1)[y == c].mean(0))
    assert torch.isnan(dW[3]).all()  # no sample of category 3
    # one sample's change is rank one: all its pseudo-neurons parallel, cosine 1 for non-negative inputs
    assert tfd.pseudo_neuron_cosine(tfd.weight_changes(g, f, 0.1)[0]) == pytest.approx(1)
    assert tfd.pseudo_neuron_cosine(dW[0]) < 0.99  # the category's change made by 3 samples is not
    batched = tfd.pseudo_neuron_cosine(dW[:3])
    assert batched.tolist() == pytest.approx([tfd.pseudo_neuron_cosine(dW[c]) for c in range(3)])


def test_per_class_scores_tell_predicted_from_learned():
    y = torch.tensor([0, 0, 1, 1, 2, 2, 3, 3])
    always1 = torch.eye(4)[[1] * 8]                       # predicts category 1 for everything
    recall, precision, share = tfd.per_class_scores(always1, y, 4)
    assert recall.tolist() == [0, 1, 0, 0] and share.tolist() == [0, 1, 0, 0]
    assert precision[1] == pytest.approx(0.25) and torch.isnan(precision[0])
    learned = torch.eye(4)[[0, 0, 1, 1, 1, 1, 1, 1]]      # category 0 learned, the rest called 1
    recall, precision, share = tfd.per_class_scores(learned, y, 4)
    assert (recall[0], precision[0], share[0]) == (1, 1, 0.25)
    assert (recall[1], precision[1]) == (1, pytest.approx(1 / 3))


def test_per_class_accuracy():
    logits = torch.eye(3)[[0, 0, 1, 2, 2, 2]]
    acc = tfd.per_class_accuracy(logits, torch.tensor([0, 1, 1, 2, 2, 0]), 4)
    assert acc[:3].tolist() == pytest.approx([0.5, 0.5, 1.0]) and math.isnan(acc[3])


# --- the shared first-phase definition and the inter-class feature similarity (TFD-1) -------------------------

def plateau_then_drop(knee, steps, level=math.log(10), slope=-2e-3, noise=0.0, seed=0):
    """A synthetic loss curve: flat at `level` up to step `knee`, then falling linearly, plus Gaussian noise."""
    t = np.asarray(steps, dtype=float)
    rng = np.random.default_rng(seed)
    return level + slope * np.maximum(0, t - knee) + noise * rng.standard_normal(len(t))


@pytest.mark.parametrize("knee, last", [(600, 600), (437, 420), (20, 20), (0, 0)])
def test_first_phase_boundary_of_a_known_knee(knee, last):
    steps = list(range(0, 2001, 20))
    loss = np.maximum(plateau_then_drop(knee, steps), 0.2)
    phase = tfd.first_phase(steps, loss, 10)
    assert (phase.last, phase.second) == (last, last + 20)
    assert phase.drop == steps[int(np.nonzero(loss < 0.9 * math.log(10))[0][0])]  # the detection lies later
    assert phase.drop > phase.second or knee <= 20
    assert phase.ended


def test_first_phase_boundary_with_plateau_noise():
    # eval-loss noise of 0.005 on a plateau at ln 10, then a drop of 0.01 per step: the knee is found within a record
    steps = list(range(0, 1201, 20))
    for seed in range(5):
        loss = plateau_then_drop(580, steps, slope=-5e-4, noise=5e-3, seed=seed)
        phase = tfd.first_phase(steps, loss, 10)
        assert phase.last in (560, 580) and phase.second == phase.last + 20


def test_first_phase_of_a_smooth_sigmoid_drop_ends_before_the_detection():
    steps = np.arange(0, 2001, 20)
    loss = math.log(10) - 2.0 / (1 + np.exp(-(steps - 1000) / 40))  # no sharp knee: it bends over ~800-950
    phase = tfd.first_phase(steps, loss, 10)
    assert 760 <= phase.last < phase.drop <= 960
    assert all(loss[steps <= phase.last] > 0.97 * math.log(10))   # every first-phase record sits on the plateau


def test_first_phase_plateau_level_is_chance_when_the_loss_starts_higher():
    steps = [0, 10, 20, 30]
    loss = [5.0, 2.3, 2.3, 2.3]  # falls from a large initial loss to ln 10 and sticks there: no learning
    assert tfd.first_phase(steps, loss, 10) == tfd.Phase(30)
    assert not tfd.first_phase(steps, loss, 10).ended


def test_first_phase_ignores_a_start_up_transient_above_the_plateau():
    steps = list(range(0, 1001, 20))
    loss = plateau_then_drop(500, steps)
    loss[:3] = [4.0, 3.2, 2.6]
    phase = tfd.first_phase(steps, loss, 10)
    assert (phase.last, phase.second) == (500, 520)


def test_in_first_phase():
    assert tfd.in_first_phase([0, 20, 40, 60], tfd.Phase(40, 60, 60)) == [0, 1, 2]


def test_trend_of_monotone_flat_and_falling_series():
    steps = list(range(12))
    rho, rise = tfd.trend(steps, [0.1 * s for s in steps])
    assert rho == pytest.approx(1) and rise == pytest.approx(0.9)  # last 3 mean 1.0, first 3 mean 0.1
    rho, rise = tfd.trend(steps, [1 - 0.1 * s for s in steps])
    assert rho == pytest.approx(-1) and rise == pytest.approx(-0.9)
    # a rise anchored on one record: the end points say +0.5, the windows and the ranks say no trend
    wobble = [0.5, 0.3, 0.4, 0.3, 0.5, 0.4, 0.3, 0.5, 0.4, 0.3, 0.4, 1.0]
    rho, rise = tfd.trend(steps, wobble)
    assert wobble[-1] - wobble[0] == pytest.approx(0.5) and rise < 0.2 and abs(rho) < 0.5
    assert all(math.isnan(x) for x in tfd.trend([0, 1], [0.0, 1.0]))


def test_interclass_cosine_matches_the_pairwise_mean():
    g = torch.Generator().manual_seed(0)
    F_ = torch.relu(torch.randn(40, 7, generator=g))
    y = torch.arange(40) % 3
    U = torch.nn.functional.normalize(F_.double(), dim=1)
    S = U @ U.T
    expected = S[y[:, None] != y[None, :]].mean()
    assert tfd.interclass_cosine(F_, y) == pytest.approx(float(expected), rel=1e-12)


def test_interclass_cosine_of_identical_and_orthogonal_classes():
    y = torch.tensor([0, 0, 1, 1])
    same = torch.tensor([[1.0, 2.0]] * 4)
    assert tfd.interclass_cosine(same, y) == pytest.approx(1.0)
    orth = torch.tensor([[1.0, 0.0], [2.0, 0.0], [0.0, 3.0], [0.0, 1.0]])
    assert tfd.interclass_cosine(orth, y) == pytest.approx(0.0)
