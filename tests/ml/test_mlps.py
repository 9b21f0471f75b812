import pytest
import torch

from nbdemo.ml.ensemble import ensemble_forward, train_ensemble
from nbdemo.ml.mlps import _leaf, train_mlps
from nbdemo.ml.models import MLP


def data(n=60, d=8, k=3):
    torch.manual_seed(0)
    return torch.randn(n, d), torch.randint(0, k, (n,))


def nets(depth, bias, seed, n=3, d=8):
    torch.manual_seed(seed)
    return [MLP(d, 6, depth, 3, bias=bias, init="kaiming", out_scale=0.5) for _ in range(n)]


@pytest.mark.parametrize("d", [8, 80])  # more images than inputs; fewer (the first layer in the images' span)
def test_train_mlps_trains_each_net_as_train_ensemble_does_within_its_setting(d):
    X, y = data(d=d)
    # settings in order of depth, two and three of one depth, with and without each layer's bias
    settings = [(2, "all"), (3, "last"), (3, "none"), (5, "all"), (5, "none"), (5, "last")]
    kw = dict(steps=10, lr=0.1, momentum=0.9, batch_size=20, seed=4)
    states, hists = train_mlps([nets(depth, bias, 1, d=d) for depth, bias in settings], X, y, **kw)
    for (depth, bias), state, hist in zip(settings, states, hists):
        ref, ref_hist = train_ensemble(nets(depth, bias, 1, d=d), X, y, progress=False, **kw)
        assert list(state) == list(ref)  # the MLP's own names: no bias where the net has none
        for name in ref:
            assert state[name].shape == ref[name].shape
            assert torch.allclose(state[name], ref[name], atol=1e-5), (depth, bias, name)
        assert hist.loss == pytest.approx(ref_hist.loss, abs=1e-6) and hist.diverged_at is None
    full, _ = train_mlps([nets(2, "none", 1, d=d), nets(3, "all", 1, d=d)], X, y, steps=3, lr=0.1)  # full batch
    ref, _ = train_ensemble(nets(3, "all", 1, d=d), X, y, steps=3, lr=0.1, progress=False)
    assert all(torch.allclose(full[1][name], ref[name], atol=1e-5) for name in ref)


def test_a_bias_a_net_does_not_have_stays_exactly_zero():
    torch.manual_seed(0)
    keep = torch.tensor([True, False, True]).view(3, 1, 1).expand(3, 1, 4)
    b = _leaf(torch.where(keep, torch.randn(3, 1, 4), 0.0), keep)
    opt = torch.optim.SGD([b], lr=0.5, momentum=0.9, foreach=True)
    for scale in (1.0, 2.0, float("nan")):  # a diverged step too
        opt.zero_grad()
        (scale * (b * torch.randn(3, 1, 4)).sum()).backward()
        opt.step()
    assert torch.equal(b[1], torch.zeros(1, 4)) and not b[1].signbit().any()


def test_settings_out_of_order_or_uneven_are_refused():
    X, y = data()
    with pytest.raises(ValueError, match="order of depth"):
        train_mlps([nets(4, "all", 0), nets(3, "all", 0)], X, y, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="same number"):
        train_mlps([nets(3, "all", 0, n=2), nets(3, "all", 0)], X, y, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="one architecture"):
        train_mlps([nets(3, "all", 0, n=1) + nets(3, "none", 0, n=1)], X, y, steps=2, lr=0.1)


@pytest.mark.parametrize("d", [8, 80])
def test_records_see_the_nets_as_train_ensemble_records_them(d):
    X, y = data(d=d)
    kw = dict(steps=12, lr=0.1, batch_size=20, seed=2, record_at=4)
    acc = lambda state, model: {"acc": (ensemble_forward(model, state, X).argmax(-1) == y).double().mean(-1)}
    models = nets(2, "all", 3, d=d)
    _, (hist,) = train_mlps([models], X, y, record=lambda states, s: acc(states[0], models[0]), **kw)
    _, ref = train_ensemble(nets(2, "all", 3, d=d), X, y, record=lambda p, s: acc(p, models[0]), progress=False, **kw)
    assert hist.steps == ref.steps == [0, 4, 8, 12]
    assert all(torch.allclose(a, b) for a, b in zip(hist.records["acc"], ref.records["acc"]))


def test_settings_with_their_own_labels_train_as_train_ensemble_trains_tasks():
    X, _ = data(d=80)
    Y = torch.randint(0, 3, (2, len(X)), generator=torch.Generator().manual_seed(1))  # two label sets
    kw = dict(steps=10, lr=0.1, batch_size=20, seed=5)
    states, _ = train_mlps([nets(3, "all", 1, n=2, d=80), nets(3, "all", 1, n=2, d=80)], X, Y, **kw)
    ref, _ = train_ensemble(nets(3, "all", 1, n=2, d=80) + nets(3, "all", 1, n=2, d=80), X,
                            Y.repeat_interleave(2, 0), batch_seeds=[5, 6, 5, 6], progress=False, **kw)
    for name in ref:
        assert torch.allclose(torch.cat([s[name] for s in states]), ref[name], atol=1e-5), name
