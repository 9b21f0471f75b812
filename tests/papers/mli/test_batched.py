import pytest
import torch

from nbdemo.ml.ensemble import train_ensemble
from nbdemo.ml.models import MLP
from nbdemo.ml.mlps import stacked_state
from nbdemo.papers.mli.batched import interpolate_nets, sweep_experiment
from nbdemo.papers.mli.metrics import interpolate
from tests.ml.test_mlps import data, nets  # the small data and nets of the trainer's tests

ALPHAS = torch.linspace(0, 1, 12)


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


@pytest.mark.parametrize("scheme, degree, expected", [("normal", None, 1), ("homogeneous", None, 4),
                                                      ("homogeneous", 1, 1), ("normal", 3, 3)])
def test_each_curve_says_the_degree_of_its_output_bias(scheme, degree, expected):
    X, y = data()
    theta0 = stacked_state(nets(4, "all", 2))
    thetaT = {k: v + 0.3 * torch.randn_like(v) for k, v in theta0.items()}
    curves = interpolate_nets(theta0, thetaT, X, y, ALPHAS, scheme=scheme, output_degree=degree)
    assert len(curves) == 3 and all(c["bias_degree"] == expected for c in curves)
