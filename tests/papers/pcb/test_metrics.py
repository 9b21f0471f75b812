"""Analytic checks of nbdemo.papers.pcb.metrics."""
import math

import pytest
import torch

from nbdemo.ml.models import MLP
from nbdemo.papers.pcb import metrics as pcb


def rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def scale_matrices(weights):
    """A_l = FᵀF, B_l = GᵀG (Eq. 7) for l = 1..L, formed from `pcb.scale_factors`."""
    factors = [pcb.scale_factors(weights, l) for l in range(1, len(weights) + 1)]
    return [F.mT @ F for F, _ in factors], [G.mT @ G for _, G in factors]


def matrix_stats(M, scale):
    """The statistics `pcb.gram_stats` reads off a factor, computed on the whole matrix M (..., k, k)."""
    k = M.shape[-1]
    diag, off = torch.diagonal(M, dim1=-2, dim2=-1), M[..., ~torch.eye(k, dtype=torch.bool)]
    return {"diag_dev": (diag - scale).abs().mean().item(), "offdiag_mean": off.mean().item(),
            "offdiag_rms": off.pow(2).mean().sqrt().item(),
            "sq_dev": (M - scale * torch.eye(k, dtype=M.dtype)).pow(2).mean().item()}


def test_principal_coordinates_diagonal_data():
    X = torch.tensor([[0.0, 3.0, 0.0], [0.0, 0.0, -2.0], [1.0, 0.0, 0.0]])
    U, d = pcb.principal_coordinates(X)
    assert torch.allclose(d, torch.tensor([9.0, 4.0, 1.0], dtype=torch.float64))
    assert torch.allclose(U, torch.tensor([[0.0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=torch.float64))


@pytest.mark.parametrize("n", [50, 4])  # more rows than columns (eigh of XᵀX), fewer (SVD of X)
def test_principal_coordinates_diagonalise_sigma(n):
    X = rand(n, 6) * torch.arange(1, 7)
    U, d = pcb.principal_coordinates(X)
    assert torch.all(d[:-1] >= d[1:]) and torch.all(d[n:] == 0)
    assert torch.allclose(U.T @ U, torch.eye(6, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(U.T @ (X.T @ X) @ U, torch.diag(d), atol=1e-9)


def test_w_opt_recovers_a_linear_map():
    X, W = rand(40, 5, seed=1), rand(3, 5, seed=2)
    assert torch.allclose(pcb.w_opt(X, X @ W.T), W, atol=1e-9)


def test_w_opt_ignores_unspanned_directions():
    X = torch.cat([rand(40, 2), torch.zeros(40, 1, dtype=torch.float64)], 1)
    Wo = pcb.w_opt(X, rand(40, 2, seed=3))
    assert torch.allclose(Wo[:, 2], torch.zeros(2, dtype=torch.float64), atol=1e-12)


def test_w_opt_with_fewer_rows_than_columns_is_the_minimum_norm_solution():
    X, Y = rand(4, 9, seed=4), rand(4, 2, seed=5)
    assert torch.allclose(pcb.w_opt(X, Y), torch.linalg.lstsq(X, Y, driver="gelsd").solution.T, atol=1e-10)


def test_compact_weight_list_dict_and_module():
    Ws = [rand(7, 4, seed=i) for i in range(3)] + [rand(2, 7, seed=9)]
    Ws[1], Ws[2] = rand(7, 7, seed=5), rand(7, 7, seed=6)
    W = Ws[3] @ Ws[2] @ Ws[1] @ Ws[0]
    assert torch.allclose(pcb.compact_weight(Ws), W)
    stacked = {f"linears.{i}.weight": torch.stack([w, 2 * w]) for i, w in enumerate(Ws)}
    assert torch.allclose(pcb.compact_weight(stacked), torch.stack([W, 16 * W]))
    net = MLP(4, 7, 4, 2, bias="none", activation="identity").double()
    x = rand(5, 4, seed=8)
    assert torch.allclose(net(x), x @ pcb.compact_weight(net).T)


@pytest.mark.parametrize("n", [200, 3])
def test_zca_whiten_spectrum_and_transform(n):
    X = rand(n, 4) * torch.tensor([4.0, 2.0, 1.0, 0.1]) + 3
    eps = 1e-2
    Xw, f = pcb.zca_whiten(X, eps)
    lam, V = torch.linalg.eigh(torch.cov(X.T, correction=0))
    cov_w = torch.cov(Xw.T, correction=0)
    assert torch.allclose(V.T @ cov_w @ V, torch.diag(lam / (lam + eps)), atol=1e-10)
    assert torch.allclose(Xw.mean(0), torch.zeros(4, dtype=torch.float64), atol=1e-12)
    assert torch.allclose(f(X[:3]), Xw[:3])


def test_prediction_is_exact_for_one_layer_full_batch_gd():
    """Eq. 10 with L = 1, L2 loss ½ mean‖Wx - y‖², full-batch GD: the prediction holds to round-off."""
    n, q, K, lr, steps = 60, 8, 3, 0.05, 40
    X = rand(n, q) * torch.linspace(3, 0.2, q)
    Y = torch.nn.functional.one_hot(torch.arange(n) % K, K).double()
    U, d = pcb.principal_coordinates(X)
    W = rand(K, q, seed=4)
    W0 = W.clone()
    for _ in range(steps):
        W = W - lr * (W @ X.T - Y.T) @ X / n
    pred = pcb.pc_prediction(W0 @ U, pcb.w_opt(X, Y) @ U, d / n, lr, 1, steps)
    assert torch.allclose(W @ U, pred, rtol=0, atol=1e-12)
    # the per-column rate of the distance to the optimum is -log(1 - μ d_j) exactly
    dists = []
    W = W0.clone()
    for s in range(steps + 1):
        dists.append(pcb.pc_distance(W @ U, pcb.w_opt(X, Y) @ U))
        W = W - lr * (W @ X.T - Y.T) @ X / n
    rate = pcb.convergence_rate(torch.stack(dists), torch.arange(steps + 1))
    assert torch.allclose(rate, -torch.log(1 - lr * d / n), atol=1e-9)


def test_prediction_fails_for_the_wrong_depth():
    lam = pcb.pc_prediction(torch.ones(1, 2), torch.zeros(1, 2), torch.tensor([1.0, 0.5]), 0.1, 2, 3)
    assert torch.allclose(lam, torch.tensor([[0.8 ** 3, 0.9 ** 3]], dtype=torch.float64))


def test_convergence_rate_of_exponentials():
    s = torch.arange(0, 50, 5)
    r = torch.tensor([0.3, 0.01, 0.0])
    v = 2.0 * torch.exp(-s[:, None] * r)
    assert torch.allclose(pcb.convergence_rate(v, s), r.double(), atol=1e-9)


def test_pc_std_and_distance():
    W = torch.zeros(4, 2, 3, dtype=torch.float64)
    W[:, 0, 1] = torch.tensor([1.0, -1, 1, -1])  # unbiased var 4/3 in one of K = 2 rows
    assert torch.allclose(pcb.pc_std(W), torch.tensor([0.0, math.sqrt(2 / 3), 0.0], dtype=torch.float64))
    assert torch.allclose(pcb.pc_distance(W[0], torch.zeros(2, 3)), torch.tensor([0.0, 1.0, 0.0], dtype=torch.float64))


def test_band_medians():
    v = torch.arange(1.0, 201.0)
    assert torch.equal(pcb.band_medians(v), torch.tensor([5.0, 55.0, 150.0]))


def test_scale_factors_give_the_first_order_step():
    """Theorem 1: W(s+1) - W(s) = -μ Σ_l A_l Er B_l + O(μ²) for GD on ½‖WX - Y‖² over the layers."""
    q, m, K, n = 5, 6, 2, 20
    X, Y = rand(n, q, seed=1), rand(n, K, seed=2)
    Ws = [rand(m, q, seed=3) / 3, rand(m, m, seed=4) / 3, rand(K, m, seed=5) / 3]
    A, B = scale_matrices(Ws)
    Er = pcb.compact_weight(Ws) @ X.T @ X - Y.T @ X
    first_order = -sum(a @ Er @ b for a, b in zip(A, B))
    errors = []
    for mu in (1e-3, 1e-4):
        params = [w.clone().requires_grad_() for w in Ws]
        loss = 0.5 * ((X @ pcb.compact_weight(params).T - Y) ** 2).sum()
        grads = torch.autograd.grad(loss, params)
        W1 = pcb.compact_weight([w - mu * g for w, g in zip(Ws, grads)])
        errors.append((W1 - pcb.compact_weight(Ws) - mu * first_order).norm().item())
    assert errors[1] < errors[0] / 50  # the remainder is O(μ²)
    assert torch.allclose(A[-1], torch.eye(K, dtype=torch.float64)) and torch.allclose(B[0], torch.eye(q, dtype=torch.float64))
    assert torch.allclose(A[0], (Ws[2] @ Ws[1]) @ (Ws[2] @ Ws[1]).T)
    assert torch.allclose(B[2], (Ws[1] @ Ws[0]).T @ (Ws[1] @ Ws[0]))


def test_scale_expectations_match_theorem_3_and_sampling():
    dims, var = [30, 400, 400, 3], [1 / 400, 2 / 800, 1 / 400]  # Def. 3: every α_l, β_l is 1 (up to K/m)
    alpha, beta = pcb.scale_expectations(dims, var)
    assert alpha == pytest.approx([1.0, 1.0, 1.0]) and beta == pytest.approx([1.0, 1.0, 1.0])
    alpha, beta = pcb.scale_expectations([10, 20, 5], [0.1, 0.3])
    assert alpha == pytest.approx([20 * 0.3, 1.0]) and beta == pytest.approx([1.0, 20 * 0.1])
    g = torch.Generator().manual_seed(0)
    Ws = [torch.randn(200, m_out, m_in, generator=g, dtype=torch.float64) * v ** 0.5
          for m_in, m_out, v in [(10, 20, 0.1), (20, 5, 0.3)]]
    A, B = scale_matrices(Ws)
    assert matrix_stats(A[0].mean(0), 6.0)["diag_dev"] < 0.3
    assert matrix_stats(B[1].mean(0), 2.0)["diag_dev"] < 0.1


def test_gram_stats_of_a_known_matrix():
    M = torch.full((3, 3), 0.5, dtype=torch.float64)
    M.diagonal().copy_(torch.tensor([2.0, 2.5, 1.5]))
    s = pcb.gram_stats(torch.linalg.cholesky(M).mT, 2.0, full=True)
    assert s["diag_dev"] == pytest.approx(1 / 3) and s["offdiag_mean"] == pytest.approx(0.5)
    assert s["offdiag_rms"] == pytest.approx(0.5) and s["sq_dev"] == pytest.approx(2 / 9)


def test_train_linear_full_batch_is_plain_gd_on_the_compact_weight():
    """nbdemo.papers.pcb.networks trains L = 1 full-batch "mse" through Σ_XX, Σ_YX; it must equal W ← W - μ (W Xᵀ - Yᵀ) X / n."""
    from nbdemo.papers.pcb.networks import linear_init, train_linear
    X = rand(30, 6).float()
    y = torch.arange(30) % 3
    (W,) = linear_init([6, 3], 2, seed=1)
    W0 = W.detach().clone()
    train_linear([W], X, y, steps=5, lr=0.1)
    Y = torch.nn.functional.one_hot(y, 3).float()
    for _ in range(5):
        W0 = W0 - 0.1 * (W0 @ X.T - Y.T) @ X / 30
    assert torch.allclose(W.detach(), W0, atol=1e-5)


def test_train_linear_matches_the_generic_torch_func_ensemble():
    """pcb.train_linear (stacked weights, compact-weight form) against train_ensemble (vmap) on the same deep linear
    nets, full batch. Its loss is ½ of train_ensemble's "mse", so it takes twice the learning rate."""
    from nbdemo.ml.ensemble import train_ensemble
    from nbdemo.papers.pcb.networks import linear_init, train_linear
    X, y = rand(40, 6).float(), torch.arange(40) % 3
    dims = [6, 8, 8, 3]
    weights = linear_init(dims, 3, seed=2)
    models = [MLP(6, 8, 3, 3, bias="none", activation="identity") for _ in range(3)]
    for i, m in enumerate(models):
        with torch.no_grad():
            for lin, w in zip(m.linears, weights):
                lin.weight.copy_(w[i])
    compact = train_linear(weights, X, y, steps=30, lr=0.2)
    params, generic = train_ensemble(models, X, y, steps=30, lr=0.1, batch_size=None, loss="mse", progress=False)
    torch.testing.assert_close(torch.as_tensor(compact.loss * 2), torch.as_tensor(generic.loss), rtol=1e-4, atol=1e-6)
    for l, w in enumerate(weights):
        torch.testing.assert_close(w.detach(), params[f"linears.{l}.weight"], rtol=1e-4, atol=1e-6)


def test_relu_model_starts_linear_and_cnn_compact_is_its_surrogate():
    from nbdemo.papers.pcb.networks import (
        SmallVGG,
        cnn_compact_weight,
        relu_forward,
        relu_init,
    )
    W, a = relu_init(5, 8, 3, seed=0)
    x = torch.randn(4, 5)
    assert torch.allclose(relu_forward(W.detach(), a, x), 0.5 * (a @ W.detach()) @ x.T, atol=1e-6)
    net = SmallVGG((1, 8, 8), channels=(2,), hidden=4, n_classes=3)
    params = {k: v.detach()[None] for k, v in net.named_parameters()}
    W = cnn_compact_weight(net, params, (1, 8, 8))[0]
    lin = SmallVGG((1, 8, 8), channels=(2,), hidden=4, n_classes=3, linear=True)
    lin.load_state_dict(net.state_dict())
    x = torch.randn(2, 1, 8, 8)
    with torch.no_grad():
        assert torch.allclose(lin(x) - lin(torch.zeros(1, 1, 8, 8)), x.reshape(2, -1) @ W.T, atol=1e-5)


def test_gram_stats_from_scale_factors_match_the_full_matrices():
    """A_l, B_l read off their factors give the statistics of the matrices of Eq. 7 (3 members, every layer; factors
    with more rows than columns, B_3's (6, 7), and fewer, A_1's (6, 2))."""
    g = torch.Generator().manual_seed(0)
    Ws = [torch.randn(3, b, a, generator=g, dtype=torch.float64) / a ** 0.5 for a, b in [(7, 6), (6, 6), (6, 2)]]
    for l in (1, 2, 3):
        for factor in pcb.scale_factors(Ws, l):
            assert pcb.gram_stats(factor, 1.5, full=True) == pytest.approx(matrix_stats(factor.mT @ factor, 1.5))


def test_glorot_init_has_zero_biases_and_the_glorot_variance():
    from nbdemo.papers.pcb.networks import SmallVGG, glorot_
    torch.manual_seed(0)
    net = glorot_(SmallVGG((1, 16, 16), channels=(16,), hidden=64, n_classes=2))
    conv, fc = net.features[0], net.head[1]
    for layer, fan_in, fan_out in ((conv, 9, 16 * 9), (fc, 16 * 8 * 8, 64)):
        bound = (6 / (fan_in + fan_out)) ** 0.5
        assert torch.all(layer.bias == 0) and layer.weight.abs().max() <= bound
        assert layer.weight.var().item() == pytest.approx(bound ** 2 / 3, rel=0.15)


def test_convergence_rate_before_floor_ignores_the_floor():
    s = torch.arange(30)
    r = torch.tensor([0.3, 0.05])
    v = torch.exp(-s[:, None] * r) + 1e-3  # column 0 levels off at 1e-3 after about 20 steps, column 1 does not
    before = pcb.convergence_rate_before_floor(v, s, 0.05)
    assert before[0] == pytest.approx(0.3, rel=0.05) and before[1] == pytest.approx(0.05, rel=0.05)
    assert pcb.convergence_rate(v, s)[0] < 0.25  # the fit over every step is pulled down by the floor
    assert torch.allclose(pcb.convergence_rate_before_floor(v, s, 0.0), pcb.convergence_rate(v, s))
