import pytest
import torch

from nbdemo.ml.models import MLP
from nbdemo.papers.mli.batched import interpolate_nets, sweep_experiment, train_sweep
from nbdemo.papers.mli.experiment import fcn_experiment, train_mlps
from nbdemo.papers.mli.metrics import interpolate

ALPHAS = torch.linspace(0, 1, 12)


def data(n=60, d=8, k=3):
    torch.manual_seed(0)
    return torch.randn(n, d), torch.randint(0, k, (n,))


def nets(depth, bias, seed, n=3, d=8):
    torch.manual_seed(seed)
    return [MLP(d, 6, depth, 3, bias=bias, init="kaiming", out_scale=0.5) for _ in range(n)]


@pytest.mark.parametrize("bias", ["all", "last", "none"])
@pytest.mark.parametrize("d", [8, 80])  # more images than inputs; fewer (the first layer in the images' span)
def test_a_sweep_trains_each_net_as_train_mlps_does_within_its_setting(bias, d):
    X, y = data(d=d)
    depths = (2, 3, 3, 5)  # settings in order of depth, two of one depth
    kw = dict(steps=10, lr=0.1, momentum=0.9, batch_size=20, seed=4)
    states, hists = train_sweep([nets(depth, bias, 1, d=d) for depth in depths], X, y, **kw)
    for depth, state, hist in zip(depths, states, hists):
        ref, ref_hist = train_mlps(nets(depth, bias, 1, d=d), X, y, **kw)
        assert set(state) == set(ref)
        for name in ref:
            assert state[name].shape == ref[name].shape
            assert torch.allclose(state[name], ref[name], atol=1e-5), (bias, depth, name)
        assert hist.loss == pytest.approx(ref_hist.loss, abs=1e-6) and hist.diverged_at is None
    full, _ = train_sweep([nets(2, bias, 1, d=d), nets(3, bias, 1, d=d)], X, y, steps=3, lr=0.1)  # full batch
    assert torch.allclose(full[1]["linears.0.weight"], train_mlps(nets(3, bias, 1, d=d), X, y, steps=3, lr=0.1)[0]
                          ["linears.0.weight"], atol=1e-5)


def test_settings_out_of_order_or_uneven_are_refused():
    X, y = data()
    with pytest.raises(ValueError, match="order of depth"):
        train_sweep([nets(4, "all", 0), nets(3, "all", 0)], X, y, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="same number"):
        train_sweep([nets(3, "all", 0, n=2), nets(3, "all", 0)], X, y, steps=2, lr=0.1)
    with pytest.raises(ValueError, match="bias"):
        train_sweep([nets(3, "all", 0), nets(3, "none", 0)], X, y, steps=2, lr=0.1)


@pytest.mark.parametrize("scheme", ["normal", "homogeneous"])
@pytest.mark.parametrize("bias", ["all", "last", "none"])
def test_interpolate_nets_is_interpolate_for_each_net(scheme, bias):
    X, y = data()
    models = nets(4, bias, 2)
    theta0 = {k: torch.stack([m.state_dict()[k] for m in models]) for k in models[0].state_dict()}
    thetaT = {k: v + 0.3 * torch.randn_like(v) for k, v in theta0.items()}
    curves = interpolate_nets(theta0, thetaT, X, y, ALPHAS, scheme=scheme, batch_size=25, alpha_chunk=5)
    for i, c in enumerate(curves):
        ref = interpolate(models[0], {k: v[i] for k, v in theta0.items()}, {k: v[i] for k, v in thetaT.items()}, X, y,
                          ALPHAS, scheme=scheme)
        assert torch.equal(c["alpha"], ref["alpha"]) and torch.equal(c["error"], ref["error"])
        assert torch.allclose(c["loss"], ref["loss"], rtol=1e-5)
        out = thetaT.get("linears.3.bias")
        assert c["delta_max"] == pytest.approx(0.0 if out is None else float(out[i].max() - out[i].min()))


def test_sweep_experiment_gives_fcn_experiments_runs():
    X, y = data()
    settings = {f"FCN{d}": (lambda d=d: MLP(8, 6, d, 3, init="kaiming", out_scale=0.5)) for d in (2, 4)}
    kw = dict(n_models=2, steps=10, lr=0.1, momentum=0.9, batch_size=20, seed=3)
    runs, hists = sweep_experiment(settings, X, y, ALPHAS, **kw)
    ref, ref_hists = fcn_experiment(settings, X, y, ALPHAS, **kw)
    assert list(runs) == list(ref) == list(hists)
    for name in ref:
        for c, r in zip(runs[name], ref[name]):
            assert torch.equal(c["error"], r["error"]) and torch.allclose(c["loss"], r["loss"], rtol=1e-5)
            assert c["delta_max"] == pytest.approx(r["delta_max"], abs=1e-6)
        assert hists[name].loss == pytest.approx(ref_hists[name].loss, abs=1e-6)


def test_the_loop_runs_on_the_threads_asked_and_restores_torchs():
    X, y = data()
    before = torch.get_num_threads()
    one, _ = train_sweep([nets(3, "all", 0)], X, y, steps=3, lr=0.1, batch_size=20)
    assert torch.get_num_threads() == before
    kept, _ = train_sweep([nets(3, "all", 0)], X, y, steps=3, lr=0.1, batch_size=20, threads=None)
    assert all(torch.allclose(one[0][k], kept[0][k], atol=1e-6) for k in one[0])
