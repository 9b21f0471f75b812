import pytest
import torch

from nbdemo.ml.ensemble import train_ensemble
from nbdemo.ml.models import MLP
from nbdemo.papers.mli.batched import _leaf, interpolate_nets, stacked_state, sweep_experiment, train_sweep
from nbdemo.papers.mli.metrics import interpolate

ALPHAS = torch.linspace(0, 1, 12)


def data(n=60, d=8, k=3):
    torch.manual_seed(0)
    return torch.randn(n, d), torch.randint(0, k, (n,))


def nets(depth, bias, seed, n=3, d=8):
    torch.manual_seed(seed)
    return [MLP(d, 6, depth, 3, bias=bias, init="kaiming", out_scale=0.5) for _ in range(n)]


@pytest.mark.parametrize("d", [8, 80])  # more images than inputs; fewer (the first layer in the images' span)
def test_a_sweep_trains_each_net_as_train_ensemble_does_within_its_setting(d):
    X, y = data(d=d)
    # settings in order of depth, two and three of one depth, with and without each layer's bias
    settings = [(2, "all"), (3, "last"), (3, "none"), (5, "all"), (5, "none"), (5, "last")]
    kw = dict(steps=10, lr=0.1, momentum=0.9, batch_size=20, seed=4)
    states, hists = train_sweep([nets(depth, bias, 1, d=d) for depth, bias in settings], X, y, **kw)
    for (depth, bias), state, hist in zip(settings, states, hists):
        ref, ref_hist = train_ensemble(nets(depth, bias, 1, d=d), X, y, progress=False, **kw)
        assert list(state) == list(ref)  # the MLP's own names: no bias where the net has none
        for name in ref:
            assert state[name].shape == ref[name].shape
            assert torch.allclose(state[name], ref[name], atol=1e-5), (depth, bias, name)
        assert hist.loss == pytest.approx(ref_hist.loss, abs=1e-6) and hist.diverged_at is None
    full, _ = train_sweep([nets(2, "none", 1, d=d), nets(3, "all", 1, d=d)], X, y, steps=3, lr=0.1)  # full batch
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
        train_sweep([nets(4, "all", 0), nets(3, "all", 0)], X, y, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="same number"):
        train_sweep([nets(3, "all", 0, n=2), nets(3, "all", 0)], X, y, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="one architecture"):
        train_sweep([nets(3, "all", 0, n=1) + nets(3, "none", 0, n=1)], X, y, steps=2, lr=0.1)


@pytest.mark.parametrize("scheme, degree", [("normal", None), ("homogeneous", None), ("homogeneous", 1),
                                            ("homogeneous", 2), ("normal", 3)])
@pytest.mark.parametrize("bias", ["all", "last", "none"])
def test_interpolate_nets_is_interpolate_for_each_net(scheme, degree, bias):
    X, y = data()
    models = nets(4, bias, 2)
    theta0 = stacked_state(models)
    thetaT = {k: v + 0.3 * torch.randn_like(v) for k, v in theta0.items()}
    curves = interpolate_nets(theta0, thetaT, X, y, ALPHAS, scheme=scheme, output_degree=degree, batch_size=25,
                              alpha_chunk=5)
    for i, c in enumerate(curves):
        ref = interpolate(models[0], {k: v[i] for k, v in theta0.items()}, {k: v[i] for k, v in thetaT.items()}, X, y,
                          ALPHAS, scheme=scheme, output_degree=degree)
        assert torch.equal(c["alpha"], ref["alpha"]) and torch.equal(c["error"], ref["error"])
        assert torch.allclose(c["loss"], ref["loss"], rtol=1e-5)
        out = thetaT.get("linears.3.bias")
        assert c["delta_max"] == pytest.approx(0.0 if out is None else float(out[i].max() - out[i].min()))


def test_sweep_experiment_trains_and_interpolates_every_setting_in_the_callers_order():
    X, y = data()
    make = lambda depth, bias: (lambda: MLP(8, 6, depth, 3, bias=bias, init="kaiming", out_scale=0.5))
    settings = {"deep": make(4, "all"), "shallow": make(2, "last"), "deep, no bias": make(4, "none")}
    kw = dict(steps=10, lr=0.1, momentum=0.9, batch_size=20, seed=3)
    runs, hists = sweep_experiment(settings, X, y, ALPHAS, n_models=2, schemes=("normal", "homogeneous"),
                                   output_degree=2, **kw)
    assert list(hists) == list(settings)
    assert list(runs) == [f"{name}, {scheme}" for name in settings for scheme in ("normal", "homogeneous")]
    for name, mk in settings.items():
        torch.manual_seed(3)  # each setting's nets drawn after the seed
        models = [mk() for _ in range(2)]
        theta0 = [{k: v.clone() for k, v in m.state_dict().items()} for m in models]
        ref, ref_hist = train_ensemble(models, X, y, progress=False, **kw)
        assert hists[name].loss == pytest.approx(ref_hist.loss, abs=1e-6)
        for scheme, degree in (("normal", None), ("homogeneous", 2)):  # the degree applies to the homogeneous one
            for i, (c, t0) in enumerate(zip(runs[f"{name}, {scheme}"], theta0)):
                r = interpolate(models[0], t0, {k: v[i] for k, v in ref.items()}, X, y, ALPHAS, scheme=scheme,
                                output_degree=degree)
                assert torch.equal(c["error"], r["error"]) and torch.allclose(c["loss"], r["loss"], rtol=1e-4)
    one, _ = sweep_experiment(settings, X, y, ALPHAS, n_models=2, **kw)  # one scheme: runs named by setting
    assert list(one) == list(settings)
    assert all(torch.equal(a["loss"], b["loss"]) for a, b in zip(one["deep"], runs["deep, normal"]))


def test_a_diverged_training_gives_curves_and_its_history_says_so():
    X, y = data(30, 6)
    settings = {"a": lambda: MLP(6, 5, 4, 3, bias="all", init="kaiming")}
    runs, hists = sweep_experiment(settings, X, y, torch.linspace(0, 1, 3), n_models=2, output_degree=2, steps=20,
                                   lr=1e6, momentum=0.9, batch_size=10)
    assert hists["a"].diverged_at is not None and len(runs["a"]) == 2
