"""The MLP, the training loop and the vectorised ensemble."""
import copy

import numpy as np
import pytest
import torch

from nbdemo.ml.ensemble import ensemble_forward, train_ensemble
from nbdemo.ml.models import MLP
from nbdemo.ml.train import batches, schedule, train
from nbdemo.papers.pfc.resnets import FCResNet


def blobs(n=300, d=10, k=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % k
    return torch.randn(n, d, generator=g) + 3 * torch.eye(k, d)[y], y


def test_xavier_variance_is_scaled_by_gamma():
    torch.manual_seed(0)
    w = MLP(400, 600, 3, 10, gamma=0.25).linears[1].weight
    assert w.var().item() == pytest.approx(0.25 * 2 / 1200, rel=0.03)


def test_out_scale_scales_a_bias_free_relu_net_by_beta():
    torch.manual_seed(0)
    a = MLP(5, 16, 4, 2, bias="none")
    b = copy.deepcopy(a)
    with torch.no_grad():
        for lin in b.linears:
            lin.weight.mul_(0.001 ** 0.25)
    x = torch.randn(7, 5)
    torch.manual_seed(0)
    c = MLP(5, 16, 4, 2, bias="none", out_scale=0.001)
    assert torch.allclose(c(x), 0.001 * a(x), rtol=1e-4, atol=1e-9)
    assert torch.allclose(b(x), c(x), rtol=1e-4, atol=1e-9)


def test_bias_placement():
    last = MLP(5, 8, 3, 2, bias="last")
    assert [lin.bias is not None for lin in last.linears] == [False, False, True]
    assert all(lin.bias is None for lin in MLP(5, 8, 3, 2, bias="none").linears)


def test_features_are_post_activation_outputs_of_each_layer():
    m = MLP(5, 8, 3, 2)
    x = torch.randn(4, 5)
    feats, logits = m.features(x)
    assert len(feats) == 3 and feats[0] is x
    assert torch.equal(feats[1], torch.relu(m.linears[0](x)))
    assert torch.equal(logits, m(x))


def test_batches_cover_each_epoch_once():
    idx = torch.cat(list(batches(100, 10, 10, seed=0, device="cpu")))
    assert sorted(idx.tolist()) == list(range(100))


def test_schedule_always_has_the_ends():
    assert schedule(10, 4) == [0, 4, 8, 10]
    assert schedule(10, [3, 99]) == [0, 3, 10]


def test_training_is_deterministic_and_learns():
    X, y = blobs()
    runs = []
    for _ in range(2):
        torch.manual_seed(1)
        m = MLP(10, 32, 3, 3)
        h = train(m, X, y, steps=60, lr=0.1, batch_size=30, momentum=0.9, seed=4, progress=False,
                  record=lambda m, s: {"acc": (m(X).argmax(1) == y).float().mean().item()}, record_at=20)
        runs.append((h.loss, h["acc"]))
    assert np.array_equal(runs[0][0], runs[1][0]) and np.array_equal(runs[0][1], runs[1][1])
    assert runs[0][1][-1] > 0.9 and runs[0][1][0] < 0.7


def test_divergence_stops_training_at_the_bad_step():
    X, y = blobs()
    torch.manual_seed(0)
    h = train(MLP(10, 32, 3, 3), X, y, steps=500, lr=1e6, batch_size=None, progress=False)
    assert h.diverged_at is not None and h.diverged_at < 500
    assert len(h.loss) == h.diverged_at - 1 and np.isfinite(h.loss).all()


ARCHITECTURES = {  # the three the book trains as ensembles, and one with BatchNorm's running statistics
    "MLP": lambda: MLP(10, 32, 3, 3),
    "deep linear": lambda: MLP(10, 32, 4, 3, bias="none", activation="identity"),
    "FC ResNet": lambda: FCResNet(10, 16, 3, 3),
    "MLP with BatchNorm": lambda: MLP(10, 32, 3, 3, norm="bn"),
}


@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.parametrize("batch_size", [None, 50])
def test_each_ensemble_member_matches_training_it_alone(arch, batch_size):
    X, y = blobs()
    torch.manual_seed(0)
    models = [ARCHITECTURES[arch]() for _ in range(4)]
    alone = copy.deepcopy(models[2])
    kw = dict(steps=12, lr=0.05, batch_size=batch_size, momentum=0.9, weight_decay=1e-3, progress=False)  # 2 epochs
    params, hist = train_ensemble(models, X, y, seed=5, **kw)
    h = train(alone, X, y, seed=5 + 2, **kw)
    assert hist.loss.shape == (12, 4) and h.diverged_at is None
    np.testing.assert_allclose(hist.loss[:, 2], h.loss, rtol=1e-5, atol=1e-6)
    for name, p in [*alone.named_parameters(), *alone.named_buffers()]:
        torch.testing.assert_close(params[name][2], p.detach(), rtol=1e-5, atol=1e-6)
    evaluated = ensemble_forward(models[0].eval(), params, X)[2]  # BatchNorm: with the running statistics
    torch.testing.assert_close(evaluated, alone.eval()(X), rtol=1e-5, atol=1e-5)


def test_members_with_their_own_weight_decay_on_the_same_batches_match_training_alone():
    X, y = blobs()
    torch.manual_seed(0)
    models, decays = [MLP(10, 32, 3, 3) for _ in range(3)], [0.0, 1e-3, 1e-2]
    kw = dict(steps=12, lr=0.05, batch_size=50, momentum=0.5, seed=5, progress=False)  # two epochs of batches
    params, hist = train_ensemble([copy.deepcopy(m) for m in models], X, y, weight_decay=decays, same_batches=True, **kw)
    for i, (model, decay) in enumerate(zip(models, decays)):
        h = train(model, X, y, weight_decay=decay, **kw)
        np.testing.assert_allclose(hist.member(i).loss, h.loss, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(params["linears.0.weight"][i], model.linears[0].weight.detach(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="one per member"):
        train_ensemble(models, X, y, weight_decay=[0.0, 1e-3], **kw)


def test_an_ensemble_trains_on_past_one_members_divergence():
    X, y = blobs()
    torch.manual_seed(0)
    models = [MLP(10, 32, 3, 3) for _ in range(3)]
    alone = copy.deepcopy(models[0])
    kw = dict(steps=30, lr=0.05, batch_size=None, progress=False)  # member 1 diverges at step 10
    _, hist = train_ensemble(models, X, y, weight_decay=[0.0, 100.0, 0.0], **kw,
                             record=lambda p, s: {"w": p["linears.0.weight"].norm(dim=(1, 2))})
    h = train(alone, X, y, **kw)
    bad = hist.member(1)
    assert bad.diverged_at is not None and hist.diverged_at == bad.diverged_at < 30
    assert hist.member(0).diverged_at is None and hist.member(2).diverged_at is None and hist.loss.shape == (30, 3)
    np.testing.assert_allclose(hist.member(0).loss, h.loss, rtol=1e-5, atol=1e-6)
    assert np.isfinite(hist.member(2)["w"]).all() and not np.isfinite(bad["w"][-1])


def test_bfloat16_training_learns_and_keeps_float32_weights():
    X, y = blobs()
    torch.manual_seed(0)
    model = MLP(10, 32, 3, 3)
    h = train(model, X, y, steps=60, lr=0.1, batch_size=50, precision="bfloat16", progress=False)
    assert h.loss[-1] < 0.5 * h.loss[0]
    assert all(p.dtype == torch.float32 for p in model.parameters())
    with pytest.raises(ValueError, match="precision='float16'"):
        train(model, X, y, steps=1, lr=0.1, precision="float16")


def test_compiled_training_matches_eager(tmp_path, monkeypatch):
    # inductor's own cache folder: a machine-wide /tmp/torchinductor_<user> can hold kernels compiled under another
    # CPU capability (make sets ATEN_CPU_CAPABILITY=avx2), whose reuse gave a wrong forward pass
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    X, y = blobs()
    torch.manual_seed(0)
    eager = MLP(10, 32, 3, 3)
    compiled = copy.deepcopy(eager)
    kw = dict(steps=20, lr=0.1, batch_size=50, progress=False)
    np.testing.assert_allclose(train(compiled, X, y, compile=True, **kw).loss, train(eager, X, y, **kw).loss,
                               rtol=1e-4, atol=1e-5)


def test_sgd_step_is_torch_sgd_bit_for_bit():
    """`train.sgd_step`, the update `fit` takes, against torch.optim.SGD(foreach=True) on the same gradients: plain,
    with momentum, with weight decay, with a lr that changes, and a parameter without a gradient on some steps (no
    update, and its momentum buffer starts at its first gradient)."""
    from nbdemo.ml.train import sgd_step
    g = torch.Generator().manual_seed(0)
    for momentum, weight_decay in ((0.0, 0.0), (0.9, 0.0), (0.9, 5e-4), (0.0, 1e-2)):
        ours = [torch.randn(7, 3, generator=g), torch.randn(5, generator=g)]
        theirs = [p.clone() for p in ours]
        opt = torch.optim.SGD(theirs, lr=0.1, momentum=momentum, weight_decay=weight_decay, foreach=True)
        step = sgd_step(ours, momentum, weight_decay)
        for s in range(6):
            grads = [torch.randn(p.shape, generator=g) for p in ours]
            for i, (a, b) in enumerate(zip(ours, theirs)):
                a.grad = b.grad = None if (i == 1 and s in (0, 3)) else grads[i].clone()
            lr = 0.1 * 0.5 ** (s // 2)
            opt.param_groups[0]["lr"] = lr
            opt.step()
            step(lr)
            for a, b in zip(ours, theirs):
                assert torch.equal(a, b), (momentum, weight_decay, s)
