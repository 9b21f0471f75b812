import torch

from nbdemo.ml.models import MLP
from nbdemo.papers.mli.degree import degree_state, interpolate_degree, normal_and_degree
from nbdemo.papers.mli.experiment import train_and_interpolate
from nbdemo.papers.mli.metrics import interpolate, interpolated_state


def nets(bias, seed=0):
    torch.manual_seed(seed)
    model = MLP(6, 5, 4, 3, bias=bias, init="kaiming")
    theta0 = {n: t.clone() for n, t in model.state_dict().items()}
    thetaT = {n: t + torch.randn_like(t) for n, t in theta0.items()}
    return model, theta0, thetaT


def test_output_bias_takes_the_given_degree_and_the_rest_stays_homogeneous():
    model, theta0, thetaT = nets("all")
    s, h = degree_state(model, theta0, thetaT, 0.5, 2), interpolated_state(model, theta0, thetaT, 0.5, "homogeneous")
    out = "linears.3.bias"
    assert torch.allclose(s[out], 0.25 * theta0[out] + 0.25 * thetaT[out])
    assert all(torch.equal(s[n], h[n]) for n in s if n != out)


def test_no_degree_is_the_papers_homogeneous_scheme():
    for bias in ("all", "last", "none"):
        model, theta0, thetaT = nets(bias)
        X, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
        a = interpolate(model, theta0, thetaT, X, y, torch.linspace(0, 1, 7), scheme="homogeneous")
        for degree in (None, 4):  # the output layer is layer 4: its homogeneous degree
            b = interpolate_degree(model, theta0, thetaT, X, y, torch.linspace(0, 1, 7), output_degree=degree,
                                   batch_size=16, alpha_chunk=3)
            assert torch.allclose(a["loss"], b["loss"]) and torch.equal(a["error"], b["error"])


def test_degree_one_is_the_normal_scheme_for_an_output_bias_only():
    model, theta0, thetaT = nets("last")
    X, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    a = interpolate(model, theta0, thetaT, X, y, torch.linspace(0, 1, 5))
    b = interpolate_degree(model, theta0, thetaT, X, y, torch.linspace(0, 1, 5), output_degree=1)
    assert torch.allclose(a["loss"], b["loss"]) and torch.equal(a["error"], b["error"])


def test_normal_and_degree_trains_the_nets_of_train_and_interpolate():
    X, y = torch.randn(30, 6), torch.randint(0, 3, (30,))
    make = lambda: MLP(6, 5, 4, 3, bias="all", init="kaiming", out_scale=0.01)
    kw = dict(steps=5, lr=0.05, momentum=0.9, batch_size=10, seed=3)
    alphas = torch.linspace(0, 1, 4)
    curves, _ = train_and_interpolate(make, 2, X, y, X, y, alphas, schemes=("normal", "homogeneous"), **kw)
    normal, degree, hist = normal_and_degree(make, 2, X, y, alphas, **kw)
    for ref, got in ((curves["normal"], normal), (curves["homogeneous"], degree)):
        for r, g in zip(ref, got):
            assert torch.allclose(r["loss"], g["loss"]) and r["delta_max"] == g["delta_max"]
    assert hist.diverged_at is None


def test_a_diverged_training_gives_curves_and_its_history_says_so():
    X, y = torch.randn(30, 6), torch.randint(0, 3, (30,))
    make = lambda: MLP(6, 5, 4, 3, bias="all", init="kaiming")
    normal, degree, hist = normal_and_degree(make, 2, X, y, torch.linspace(0, 1, 3), output_degree=2, steps=20,
                                             lr=1e6, momentum=0.9, batch_size=10, seed=0)
    assert hist.diverged_at is not None and len(degree) == 2
