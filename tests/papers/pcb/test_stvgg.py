"""st-VGG (app. D.2 of the PC-bias paper): its layers, shapes and parameter count against the paper's description, its
linear surrogate, and its ensemble training against `nbdemo.ml.ensemble.train_ensemble`."""
import pytest
import torch
from torch import nn

from nbdemo.ml.ensemble import ensemble_forward, functional, train_ensemble
from nbdemo.papers.pcb import stvgg
from nbdemo.papers.pcb.networks import SmallVGG, cnn_compact_weight, glorot_


def conv_params(c_in, c_out, k):
    return c_in * c_out * k * k + c_out


def test_default_is_the_papers_st_vgg():
    """App. D.2: 8 convolutions of 32, 32, 64, 64, 128, 128, 256, 256 filters, 3×3 but the last two 2×2; a 2×2
    max-pooling and a 0.25 dropout after every other one; a 512-unit layer, 0.5 dropout, the output layer."""
    net = stvgg.StVGG((3, 32, 32), n_classes=2)
    convs = [m for m in net.modules() if isinstance(m, nn.Conv2d)]
    assert [c.out_channels for c in convs] == [32, 32, 64, 64, 128, 128, 256, 256]
    assert [c.kernel_size for c in convs] == [(3, 3)] * 6 + [(2, 2)] * 2
    kinds = [type(m).__name__ for m in net.features]
    assert kinds == ["Conv2d", "ReLU", "Conv2d", "ReLU", "MaxPool2d", "Dropout"] * 4
    assert [m.p for m in net.modules() if isinstance(m, nn.Dropout)] == [0.25] * 4 + [0.5]
    linears = [m for m in net.modules() if isinstance(m, nn.Linear)]
    assert [(l.in_features, l.out_features) for l in linears] == [(256 * 2 * 2, 512), (512, 2)]
    chans = [3, 32, 32, 64, 64, 128, 128, 256, 256]
    ks = [3, 3, 3, 3, 3, 3, 2, 2]
    expected = sum(conv_params(a, b, k) for a, b, k in zip(chans, chans[1:], ks)) + (1024 * 512 + 512) + (512 * 2 + 2)
    assert expected == 1_206_562
    assert sum(p.numel() for p in net.parameters()) == expected
    x = torch.randn(3, 3, 32, 32)
    assert net.features(x).shape == (3, 256, 2, 2)  # "same" padding keeps each block's size until its pooling
    assert net.eval()(x).shape == (3, 2)


def test_small_input_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="pooled"):
        stvgg.StVGG((1, 14, 14), 2)  # four 2×2 poolings need at least 16×16
    with pytest.raises(ValueError, match="one kernel size"):
        stvgg.StVGG((1, 14, 14), 2, channels=[8, 8], kernels=[3])
    with pytest.raises(ValueError, match="dropout"):
        stvgg.StVGG((1, 14, 14), 2, channels=[8, 8], kernels=[3, 3], conv_dropout=1.0)


def test_linear_surrogate_is_affine_and_its_map_is_read_off_exactly():
    """linear=True drops ReLU and dropout and averages instead of max-pooling, so f_lin(x) = W x + b: the basis
    read-out W and the Jacobian (the dry-run path) agree, and W x + b reproduces f_lin on a random image."""
    torch.manual_seed(0)
    shape = (1, 8, 8)
    models = stvgg.ensemble(2, shape, 3, channels=[4, 4, 6, 6], kernels=[3, 3, 2, 2], hidden=5)
    state = {k: v.detach() for k, v in torch.func.stack_module_state(models)[0].items()}
    W = stvgg.compact_weight(models[0], state, shape)
    assert W.shape == (2, 3, 64)
    lin = stvgg.StVGG(shape, 3, channels=[4, 4, 6, 6], kernels=[3, 3, 2, 2], hidden=5, linear=True)
    lin.load_state_dict(models[1].state_dict())
    x = torch.randn(1, *shape)
    b = lin(torch.zeros(1, *shape))
    assert torch.allclose(W[1] @ x.flatten() + b[0], lin(x)[0], atol=1e-5)
    assert not torch.allclose(models[1].eval()(x), lin(x), atol=1e-3)  # the network itself is not linear
    jac = torch.func.jacrev(lin)(torch.zeros(1, *shape)).reshape(3, 64)
    assert torch.allclose(jac, W[1], atol=1e-5)


def test_without_dropout_it_is_smallvgg_and_random_draws_change_nothing():
    """A dropout-free StVGG with two blocks of two 3×3 convolutions is the package's SmallVGG layer for layer: the same
    Glorot draws, the same steps (trained with randomness="different", which draws nothing here), the same compact
    map as `cnn_compact_weight`."""
    shape, n = (1, 14, 14), 3
    X, y = torch.randn(60, *shape), torch.arange(60) % 2
    torch.manual_seed(1)
    old = [glorot_(SmallVGG(shape, channels=(4, 8), hidden=6, n_classes=2)) for _ in range(n)]
    torch.manual_seed(1)
    new = stvgg.ensemble(n, shape, 2, channels=[4, 4, 8, 8], kernels=[3] * 4, hidden=6, conv_dropout=0, fc_dropout=0)
    for a, b in zip(old, new):
        assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    Uf = torch.linalg.qr(torch.randn(196, 196))[0]
    p_old, h_old = train_ensemble(old, X, y, steps=12, lr=0.1, batch_size=20, seed=3, record_at=4, progress=False,
                                  record=lambda p, s: {"C": cnn_compact_weight(old[0], p, shape) @ Uf})
    p_new, h_new = train_ensemble(new, X, y, steps=12, lr=0.1, batch_size=20, seed=3, record_at=4, progress=False,
                                  randomness="different",
                                  record=lambda p, s: {"C": stvgg.compact_weight(new[0], p, shape) @ Uf})
    assert (h_old.loss == h_new.loss).all() and h_old.steps == h_new.steps
    assert all(torch.equal(a, b) for a, b in zip(h_old.records["C"], h_new.records["C"]))
    assert torch.equal(ensemble_forward(old[0], p_old, X), stvgg.predict(new[0], p_new, X))


def test_dropout_draws_a_mask_per_member_and_predict_uses_none():
    torch.manual_seed(0)
    shape = (1, 8, 8)
    net = stvgg.StVGG(shape, 2, channels=[4, 4], kernels=[3, 3], hidden=16)
    state = {k: torch.stack([v.detach()] * 2) for k, v in net.named_parameters()}  # two identical members
    X = torch.randn(5, *shape)
    with pytest.raises(RuntimeError, match="randomness"):  # vmap's default refuses the random masks
        functional(net.train())(state, X)
    train_out = functional(net.train(), randomness="different")(state, X)
    assert not torch.allclose(train_out[0], train_out[1])
    out = stvgg.predict(net.train(), state, X, max_rows=4)  # chunks of 2 images: eval mode, identical members
    assert out.shape == (2, 5, 2) and torch.equal(out[0], out[1]) and torch.allclose(out[0], net.eval()(X))


def test_papers_st_vgg_takes_a_training_step():
    """The paper's network (dropout on) on CIFAR-shaped data: one SGD step of two members at lr 0.05 changes every
    layer and leaves a finite loss."""
    torch.manual_seed(0)
    X, y = torch.randn(8, 3, 32, 32), torch.arange(8) % 2
    models = stvgg.ensemble(2, (3, 32, 32), 2)
    before = {k: v.detach().clone() for k, v in torch.func.stack_module_state(models)[0].items()}
    state, hist = train_ensemble(models, X, y, steps=2, lr=stvgg.LR, batch_size=4, seed=0, randomness="different",
                                 progress=False)
    assert hist.loss.shape == (2, 2) and torch.isfinite(torch.as_tensor(hist.loss)).all()
    assert all(not torch.equal(before[k], state[k]) for k in before)


def test_paper_profiles_build_the_papers_st_vgg():
    """The `paper` profiles of PCB-5 and PCB-6 run app. D.2's st-VGG with its training setting (lr 0.05, batch 100)."""
    from nbdemo.claims.registry import get
    from nbdemo.runs import params
    for claim, lr in (("PCB-5", "cnn_lr"), ("PCB-6", "lr")):
        _, full = params.resolve(get(claim), "paper")
        assert (tuple(full["cnn_channels"]), tuple(full["cnn_kernels"]), full["cnn_hidden"]) == \
            (stvgg.CHANNELS, stvgg.KERNELS, stvgg.HIDDEN), claim
        assert (full["conv_dropout"], full["fc_dropout"]) == (stvgg.CONV_DROPOUT, stvgg.FC_DROPOUT), claim
        assert (full[lr], full["batch_size"]) == (stvgg.LR, stvgg.BATCH_SIZE), claim
        assert full["dataset"] in ("cifar10", "cifar100") and full.get("downsample", 1) == 1, claim
    assert params.resolve(get("PCB-6"), "paper")[1]["model"] == "st-vgg"
