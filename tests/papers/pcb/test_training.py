"""The PCB notebooks' training paths, each with a diverging learning rate (the run must end in a History that says
where it diverged, which `Verdict.require_finite` turns into INCONCLUSIVE, never in an exception), and the first-layer
training of PCB-2's control; the verdict rows of `nbdemo.papers.pcb.rows`."""
import copy

import numpy as np
import pytest
import torch

from nbdemo.claims.verdict import INCONCLUSIVE, Verdict, paper
from nbdemo.ml.ensemble import train_ensemble
from nbdemo.papers.pcb import stvgg
from nbdemo.papers.pcb.metrics import compact_weight
from nbdemo.papers.pcb.networks import linear_init, relu_init, train_linear, train_relu
from nbdemo.papers.pcb.rows import band_order


def data(n=40, q=6, k=3):
    g = torch.Generator().manual_seed(0)
    return torch.randn(n, q, generator=g), torch.arange(n) % k


def diverged_verdict(hist):
    v = Verdict("PCB-1")
    v.require_finite(hist)
    v.check("a check that holds", 1.0, ">", 0, source=paper("Eq. 10"))
    return v


def test_train_linear_diverges_into_its_history():
    """Full-batch MSE and SGD cross-entropy at a learning rate of 1e6: training stops when every member diverged,
    recording nothing after, and the verdict is INCONCLUSIVE "diverged at step N"."""
    X, y = data()
    for loss, batch_size in (("mse", None), ("ce", 10)):
        weights = linear_init([6, 8, 3], 2, seed=0)
        hist = train_linear(weights, X, y, steps=50, lr=1e6, loss=loss, batch_size=batch_size, record_at=5,
                            record=lambda w, s: {"W": compact_weight(w)})
        assert hist.diverged_at is not None and hist.diverged_at <= 50, loss
        assert hist.steps[-1] < 50 and len(hist.records["W"]) == len(hist.steps), loss
        v = diverged_verdict(hist)
        assert v.outcome == INCONCLUSIVE and v.rows[0]["measured"] == f"diverged at step {hist.diverged_at}"


def test_train_relu_diverges_into_its_history():
    X, y = data()
    W, a = relu_init(6, 8, 2, seed=0)
    hist = train_relu(W, a, X, (2.0 * (y % 2) - 1), steps=50, lr=1e6, record_at=5, record=lambda W, s: {"W": W})
    assert hist.diverged_at is not None and hist.steps[-1] < 50
    assert diverged_verdict(hist).outcome == INCONCLUSIVE


def test_dropout_ensemble_diverges_into_its_history():
    """PCB-5/6's CNN path: `train_ensemble(..., randomness="different")` with dropout, at a diverging rate."""
    torch.manual_seed(0)
    X, y = torch.randn(20, 1, 8, 8), torch.arange(20) % 2
    models = stvgg.ensemble(2, (1, 8, 8), 2, channels=[2, 2], kernels=[3, 3], hidden=4)
    _, hist = train_ensemble(models, X, y, steps=30, lr=1e8, batch_size=10, randomness="different", progress=False,
                             record_at=5, record=lambda p, s: {"C": stvgg.compact_weight(models[0], p, (1, 8, 8))})
    assert hist.diverged_at is not None
    assert diverged_verdict(hist).outcome == INCONCLUSIVE


def test_frozen_layers_make_the_step_that_of_the_first_layer_alone():
    """PCB-2's control: with W_2, W_3 frozen, one full-batch GD step moves the compact weight by -μ A_1 Er / n, A_1 =
    (W_3 W_2)(W_3 W_2)ᵀ (Theorem 1 with one term; the loss is ½ mean‖Wx - y‖²); the frozen layers do not change."""
    X, y = data(q=5)
    weights = linear_init([5, 7, 7, 3], 1, seed=3)
    for w in weights[1:]:
        w.requires_grad_(False)
    frozen = [w.clone() for w in weights[1:]]
    W0 = compact_weight(weights).detach().double()[0]
    train_linear(weights, X, y, steps=1, lr=0.05)
    assert all(torch.equal(a, b) for a, b in zip(weights[1:], frozen))
    F = (weights[2] @ weights[1])[0].double()
    Xd, Y = X.double(), torch.nn.functional.one_hot(y, 3).double()
    er = (W0 @ Xd.T - Y.T) @ Xd / len(X)
    torch.testing.assert_close(compact_weight(weights).detach().double()[0], W0 - 0.05 * F @ F.T @ er, rtol=1e-4, atol=1e-6)


def test_band_order_rows():
    """Increasing band medians pass, a flat or a NaN profile fails; the inner variants move the band edges."""
    q = 200
    v = Verdict("PCB-1")
    rising = torch.linspace(0.1, 1.0, q, dtype=torch.float64)
    b = band_order(v, "rising", rising, source=paper("Fig. 4a"))
    band_order(v, "flat", torch.ones(q, dtype=torch.float64), source=paper("Fig. 4a"), kind="requirement")
    band_order(v, "diverged", torch.full((q,), float("nan")), source=paper("Fig. 4a"))
    rows = {r["name"]: r for r in v.rows}
    assert rows["rising"]["ok"] and not rows["flat"]["ok"] and not rows["diverged"]["ok"]
    assert rows["flat"]["kind"] == "requirement" and rows["rising"]["expected"] == "band medians 1-10 < 11-100 < 101-q"
    assert np.allclose(b, [rising[:10].median(), rising[10:100].median(), rising[100:].median()])
    (lower, higher), = rows["rising"]["inner"].values()
    m = [rising[:9].median(), rising[9:90].median(), rising[90:].median()]  # edges 9, 90
    assert lower == pytest.approx([float(m[1] - m[0]), float(m[2] - m[1])], rel=1e-5)
    assert v.outcome == INCONCLUSIVE  # the flat requirement failed


def test_grouped_data_trains_as_separate_calls():
    """train_linear with X (G, n, q), y (G, n): member i trains on dataset i // M as a call of its own on that dataset
    would (same init, same batches), for minibatch cross-entropy and full-batch MSE."""
    X, y = data()
    X2, y2 = X.flip(1) * 2, (y + 1) % 3
    for loss, batch_size in (("ce", 10), ("mse", None)):
        alone = [linear_init([6, 8, 3], 2, seed=4) for _ in range(2)]
        for w, (Xd, yd) in zip(alone, ((X, y), (X2, y2))):
            train_linear(w, Xd, yd, steps=20, lr=0.05, loss=loss, batch_size=batch_size, seed=1)
        together = [torch.cat([a, b]).detach().requires_grad_() for a, b in zip(*(linear_init([6, 8, 3], 2, seed=4)
                                                                                 for _ in range(2)))]
        hist = train_linear(together, torch.stack([X, X2]), torch.stack([y, y2]), steps=20, lr=0.05, loss=loss,
                            batch_size=batch_size, seed=1)
        assert hist.loss.shape == (20, 4)
        for w, a, b in zip(together, *alone):
            torch.testing.assert_close(w.detach(), torch.cat([a, b]).detach(), rtol=1e-5, atol=1e-6)


def test_minibatch_cross_entropy_is_that_of_the_generic_ensemble():
    """train_linear's per-member cross-entropy (one flattened call) steps as `train_ensemble` on the same deep linear
    nets with the same batches."""
    from nbdemo.ml.models import MLP
    X, y = data()
    weights = linear_init([6, 8, 3], 3, seed=2)
    models = [MLP(6, 8, 2, 3, bias="none", activation="identity") for _ in range(3)]
    for i, m in enumerate(models):
        with torch.no_grad():
            for lin, w in zip(m.linears, weights):
                lin.weight.copy_(w[i])
    train_linear(weights, X, y, steps=25, lr=0.1, loss="ce", batch_size=10, seed=5)
    params, _ = train_ensemble(models, X, y, steps=25, lr=0.1, batch_size=10, seed=5, same_batches=True, progress=False)
    for l, w in enumerate(weights):
        torch.testing.assert_close(w.detach(), params[f"linears.{l}.weight"], rtol=1e-4, atol=1e-6)


def test_tasks_with_their_own_labels_train_as_separate_ensembles():
    """`train_ensemble` with y (N, n), one label vector per member, and batch_seeds: PCB-10's six label sets as one
    ensemble train as six separate calls would (member i of each task from seed + i)."""
    from nbdemo.ml.models import MLP
    X, y = data(n=60, q=7)
    tasks = [y, (y + 1) % 3]
    torch.manual_seed(0)
    nets = [MLP(7, 5, 2, 3) for _ in range(4)]  # two tasks of two members
    apart = [train_ensemble([copy.deepcopy(m) for m in nets[2 * t:2 * t + 2]], X, labels, steps=12, lr=0.1,
                            batch_size=20, seed=3, progress=False)[0] for t, labels in enumerate(tasks)]
    together, _ = train_ensemble([copy.deepcopy(m) for m in nets], X, torch.stack(tasks).repeat_interleave(2, 0),
                                 steps=12, lr=0.1, batch_size=20, seed=3, batch_seeds=[3, 4, 3, 4], progress=False)
    for k, v in together.items():
        torch.testing.assert_close(v, torch.cat([apart[0][k], apart[1][k]]))
    with pytest.raises(ValueError, match="one batch seed"):
        train_ensemble(nets, X, y, steps=1, lr=0.1, batch_size=20, batch_seeds=[0], progress=False)


def test_band_order_alternatives():
    """An alternative reading of a band row is judged on its own per-PC quantity."""
    q = 200
    v = Verdict("PCB-1")
    rising = torch.linspace(0.1, 1.0, q, dtype=torch.float64)
    band_order(v, "rising", rising, source=paper("Fig. 4a"),
               alternatives={"read flat": (torch.ones(q, dtype=torch.float64), "another record")})
    a = v.rows[0]["alternatives"]["read flat"]
    assert v.rows[0]["ok"] and not a["ok"] and a["value"] == [0.0, 0.0] and a["why"] == "another record"


def test_first_layer_trains_in_the_span_of_fewer_rows_than_inputs(monkeypatch):
    """Minibatches of fewer rows than inputs (n < q), records far enough apart: train_linear trains the first layer in
    the span of the rows (`_FirstLayerSpan`), grouped data and a product of two layers above it, and steps as the
    compact-weight form does (records every step) up to rounding, its records and final weights alike. With the
    layers above it frozen, the first layer trains the compact way."""
    from nbdemo.papers.pcb import networks
    calls = []
    apply = networks._FirstLayerSpan.apply
    monkeypatch.setattr(networks._FirstLayerSpan, "apply", lambda *a: calls.append(1) or apply(*a))
    g = torch.Generator().manual_seed(3)
    X, y = torch.randn(2, 12, 30, generator=g), torch.randint(0, 3, (2, 12), generator=g)
    gap = networks.SPAN_RECORD_GAP
    runs, counts = [], []
    for record_at in (gap, 1):
        calls.clear()
        weights = [torch.cat([w] * 2).detach().requires_grad_() for w in linear_init([30, 16, 8, 3], 2, seed=1)]
        hist = train_linear(weights, X, y, steps=2 * gap, lr=0.05, loss="ce", batch_size=4, seed=2,
                            record_at=record_at, record=lambda w, s: {"W": compact_weight(w)})
        runs.append((weights, dict(zip(hist.steps, hist.records["W"]))))
        counts.append(len(calls))
    assert counts == [2 * gap, 0]  # every step of the first run, none of the second
    (span_w, span_rec), (compact_w, compact_rec) = runs
    for a, b in zip(span_w, compact_w):
        torch.testing.assert_close(a.detach(), b.detach(), rtol=1e-4, atol=1e-5)
    for s, W in span_rec.items():
        torch.testing.assert_close(W, compact_rec[s], rtol=1e-4, atol=1e-5)
    calls.clear()
    frozen = [w.detach().requires_grad_(i == 0) for i, w in enumerate(linear_init([30, 16, 8, 3], 2, seed=1))]
    before = frozen[0].detach().clone()
    train_linear(frozen, X[0], y[0], steps=2 * gap, lr=0.05, loss="ce", batch_size=4)
    assert not calls and not torch.equal(frozen[0].detach(), before)
