import math

import pytest
import torch
from torch import nn

from nbdemo.ml.models import MLP
from nbdemo.papers.mli.metrics import (
    chord_gap,
    class_losses,
    interpolate,
    interpolated_state,
    learning_steps,
    max_rise,
    output_bias_gap,
    plateau,
    trend_test,
)


def states(model, seed):
    theta0 = {n: t.clone() for n, t in model.state_dict().items()}
    torch.manual_seed(seed)
    thetaT = {n: t + torch.randn_like(t) if t.is_floating_point() else t for n, t in theta0.items()}
    return theta0, thetaT


def linear_case(d, seed, n):
    """A one-layer model (d inputs, 3 classes), its two states (`states`) and n random samples."""
    torch.manual_seed(0)
    model = nn.Linear(d, 3)
    theta0, thetaT = states(model, seed)
    return model, theta0, thetaT, torch.randn(n, d), torch.randint(0, 3, (n,))


def test_linear_in_theta_gives_straight_output_and_convex_loss():
    # A one-layer model's logits are linear in θ, so along θ[α] they are (1−α)f(0) + αf(T) exactly.
    model, theta0, thetaT, X, y = linear_case(5, 1, 40)
    alphas = torch.linspace(0, 1, 11)
    net = nn.Linear(5, 3)
    outs = []
    for a in alphas.tolist():
        net.load_state_dict(interpolated_state(model, theta0, thetaT, a))
        outs.append(net(X).detach())
    net.load_state_dict(theta0)
    f0 = net(X).detach()
    net.load_state_dict(thetaT)
    fT = net(X).detach()
    for a, out in zip(alphas.tolist(), outs):
        torch.testing.assert_close(out, (1 - a) * f0 + a * fT, atol=1e-5, rtol=1e-5)
    # cross-entropy is convex in the logits, hence convex in α along a straight line of logits
    curve = interpolate(model, theta0, thetaT, X, y, alphas)
    assert chord_gap(curve["alpha"], curve["loss"]) <= 1e-9
    assert (curve["loss"].diff().diff() >= -1e-9).all()


def test_endpoints_reproduce_the_two_networks():
    torch.manual_seed(0)
    model = MLP(6, 8, 3, 4, bias="all")
    theta0, thetaT = states(model, 2)
    X, y = torch.randn(30, 6), torch.randint(0, 4, (30,))
    curve = interpolate(model, theta0, thetaT, X, y, [0.0, 1.0], scheme="homogeneous")
    for theta, loss in zip((theta0, thetaT), curve["loss"]):
        model.load_state_dict(theta)
        ref = nn.functional.cross_entropy(model(X).double(), y).item()
        assert loss.item() == pytest.approx(ref, rel=1e-6)


def test_homogeneous_equals_normal_for_one_layer():
    model, theta0, thetaT, X, y = linear_case(4, 3, 50)
    alphas = torch.linspace(0, 1, 7)
    a = interpolate(model, theta0, thetaT, X, y, alphas, scheme="normal")
    b = interpolate(model, theta0, thetaT, X, y, alphas, scheme="homogeneous")
    torch.testing.assert_close(a["loss"], b["loss"])
    torch.testing.assert_close(a["error"], b["error"])


def test_homogeneous_bias_power_per_layer():
    model = MLP(3, 4, 3, 2, bias="all")
    theta0 = {n: torch.zeros_like(t) for n, t in model.state_dict().items()}
    thetaT = {n: torch.ones_like(t) for n, t in model.state_dict().items()}
    s = interpolated_state(model, theta0, thetaT, 0.5, scheme="homogeneous")
    for h in range(3):
        assert s[f"linears.{h}.bias"].unique().item() == pytest.approx(0.5 ** (h + 1))
        assert s[f"linears.{h}.weight"].unique().item() == pytest.approx(0.5)


def test_homogeneous_relu_net_scales_output_by_alpha_power():
    # Zero init: θ[α] = αθ(T) for the weights and α^h b_h(T) for the biases; a depth-L ReLU net is then
    # exactly α^L times the trained net, so every α > 0 predicts the trained labels.
    torch.manual_seed(0)
    model = MLP(5, 16, 4, 3, bias="all")
    thetaT = {n: torch.randn_like(t) for n, t in model.state_dict().items()}
    theta0 = {n: torch.zeros_like(t) for n, t in thetaT.items()}
    X = torch.randn(64, 5)
    net = MLP(5, 16, 4, 3, bias="all")
    net.load_state_dict(thetaT)
    fT = net(X).detach()
    net.load_state_dict(interpolated_state(model, theta0, thetaT, 0.3, scheme="homogeneous"))
    torch.testing.assert_close(net(X).detach(), 0.3 ** 4 * fT, rtol=1e-4, atol=1e-7)
    net.load_state_dict(interpolated_state(model, theta0, thetaT, 0.3, scheme="normal"))
    assert not torch.allclose(net(X).detach(), 0.3 ** 4 * fT, rtol=1e-2)


def degree_nets(bias, seed=0):
    torch.manual_seed(seed)
    model = MLP(6, 5, 4, 3, bias=bias, init="kaiming")
    theta0 = {n: t.clone() for n, t in model.state_dict().items()}
    thetaT = {n: t + torch.randn_like(t) for n, t in theta0.items()}
    return model, theta0, thetaT


def test_output_bias_takes_the_given_degree_and_the_rest_stays_homogeneous():
    model, theta0, thetaT = degree_nets("all")
    s = interpolated_state(model, theta0, thetaT, 0.5, "homogeneous", output_degree=2)
    h = interpolated_state(model, theta0, thetaT, 0.5, "homogeneous")
    out = "linears.3.bias"
    assert torch.allclose(s[out], 0.25 * theta0[out] + 0.25 * thetaT[out])
    assert all(torch.equal(s[n], h[n]) for n in s if n != out)


def test_no_output_degree_is_the_papers_homogeneous_scheme():
    for bias in ("all", "last", "none"):
        model, theta0, thetaT = degree_nets(bias)
        X, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
        a = interpolate(model, theta0, thetaT, X, y, torch.linspace(0, 1, 7), scheme="homogeneous")
        for degree in (None, 4):  # the output layer is layer 4: its homogeneous degree
            b = interpolate(model, theta0, thetaT, X, y, torch.linspace(0, 1, 7), scheme="homogeneous",
                            output_degree=degree, batch_size=16, alpha_chunk=3)
            assert torch.allclose(a["loss"], b["loss"]) and torch.equal(a["error"], b["error"])


def test_output_degree_one_is_the_normal_scheme_for_an_output_bias_only():
    model, theta0, thetaT = degree_nets("last")
    X, y = torch.randn(40, 6), torch.randint(0, 3, (40,))
    a = interpolate(model, theta0, thetaT, X, y, torch.linspace(0, 1, 5))
    b = interpolate(model, theta0, thetaT, X, y, torch.linspace(0, 1, 5), scheme="homogeneous", output_degree=1)
    assert torch.allclose(a["loss"], b["loss"]) and torch.equal(a["error"], b["error"])


def test_batchnorm_statistics_recomputed_not_interpolated():
    torch.manual_seed(0)
    model = MLP(5, 8, 2, 2, norm="bn")
    theta0, thetaT = states(model, 4)
    thetaT["norms.0.running_mean"] = torch.full((8,), 1e3)  # stale statistics must not be used
    X, y = torch.randn(200, 5), torch.randint(0, 2, (200,))
    curve = interpolate(model, theta0, thetaT, X, y, [1.0])
    net = MLP(5, 8, 2, 2, norm="bn")
    net.load_state_dict(thetaT)
    net.train()
    with torch.no_grad():
        h = net.linears[0](X)
        bn = net.norms[0]
        z = (h - h.mean(0)) / torch.sqrt(h.var(0) + bn.eps) * bn.weight + bn.bias  # running_var is unbiased
        ref = nn.functional.cross_entropy(net.linears[1](torch.relu(z)).double(), y).item()
    assert curve["loss"].item() == pytest.approx(ref, rel=1e-4)


def test_clean_plateau():
    alphas = torch.linspace(0, 1, 11)
    error = torch.tensor([0.85, 0.9, 0.9, 0.9, 0.9, 0.9, 0.5, 0.2, 0.1, 0.0, 0.0])  # random init, then one class
    loss = torch.tensor([2.30, 2.31, 2.29, 2.2, 2.0, 1.5, 1.0, 0.5, 0.2, 0.1, 0.0])
    p = plateau(alphas, error, loss, 10, eps=0.05)
    assert (p["error_start"], p["error_end"], p["error_len"]) == pytest.approx((0.1, 0.5, 0.4))
    assert (p["loss_start"], p["loss_end"], p["loss_len"]) == pytest.approx((0.0, 0.2, 0.2))
    assert p["loss_level"] == pytest.approx(math.log(10))
    off = plateau(alphas, error - 0.5, loss - 1, 10, eps=0.05)
    assert math.isnan(off["error_end"]) and off["error_len"] == 0.0 and off["loss_len"] == 0.0
    flat = plateau(alphas, torch.full((11,), 0.5), torch.full((11,), math.log(2)), 2, eps=0.01)
    assert flat["error_len"] == 1.0 and flat["loss_len"] == 1.0


def test_a_dip_shorter_than_hold_does_not_end_the_plateau():
    alphas = torch.linspace(0, 1, 21)
    error = torch.full((21,), 0.9)
    error[3] = 0.8  # one grid point
    error[6:8] = 0.85  # two grid points
    error[12:] = 0.1  # the real drop
    loss = torch.full((21,), math.log(10))
    p = plateau(alphas, error, loss, 10, eps=0.05)
    assert (p["error_start"], p["error_end"]) == pytest.approx((0.0, 0.55))
    error[6:9] = 0.85  # three grid points: the curve has left the level
    assert plateau(alphas, error, loss, 10, eps=0.05)["error_end"] == pytest.approx(0.25)
    assert plateau(alphas, error, loss, 10, eps=0.05, hold=4)["error_end"] == pytest.approx(0.55)


def test_a_rise_of_the_loss_within_the_bias_gap_does_not_end_the_plateau():
    alphas = torch.linspace(0, 1, 11)
    loss = math.log(3) + torch.tensor([0.0, 0.1, 0.2, 0.3, 0.4, 0.5, -0.1, -1.0, -1.0, -1.0, -1.0])  # log k + α·1
    p = plateau(alphas, torch.zeros(11), loss, 3, eps=0.05, delta_max=1.0)
    assert (p["loss_start"], p["loss_end"]) == pytest.approx((0.0, 0.5))
    # without a bias gap (Δ_max = 0) the band is log k ± eps: the rise leaves it after one grid point
    assert plateau(alphas, torch.zeros(11), loss, 3, eps=0.05)["loss_end"] == pytest.approx(0.0)


def test_a_descent_from_above_log_k_is_not_a_plateau():
    # a standard init: the loss starts far above log k and falls through the band in one grid step
    alphas = torch.linspace(0, 1, 11)
    loss = torch.tensor([4.5, 3.8, 3.1, 2.31, 1.6, 1.0, 0.6, 0.3, 0.1, 0.05, 0.0])
    p = plateau(alphas, torch.zeros(11), loss, 10, eps=0.05 * math.log(10), delta_max=0.5)
    assert (p["loss_start"], p["loss_end"], p["loss_len"]) == pytest.approx((0.3, 0.3, 0.0))


def test_output_bias_gap():
    from nbdemo.ml.models import MLP
    net = MLP(4, 8, 3, 3)  # a bias in every layer: the output layer's counts
    state = {k: v.clone() for k, v in net.state_dict().items()}
    state["linears.2.bias"] = torch.tensor([0.5, -1.0, 2.0])
    state["linears.0.bias"] = torch.tensor([9.0] * 8)
    assert output_bias_gap(net, state) == pytest.approx(3.0)
    assert output_bias_gap(MLP(4, 8, 3, 3, bias="none"), MLP(4, 8, 3, 3, bias="none").state_dict()) == 0.0


def test_trend_test():
    rho, p = trend_test([torch.tensor([0.0, 0.1]), torch.tensor([0.2, 0.3]), torch.tensor([0.4, 0.5])])
    assert rho == pytest.approx(16 / (4 * math.sqrt(17.5)))  # positions tie within a group: average ranks
    assert p < 0.05 and p >= 1 / 10_001
    rho, p = trend_test([torch.tensor([0.5, 0.4]), torch.tensor([0.3, 0.2]), torch.tensor([0.1, 0.0])])
    assert rho < 0 and p > 0.9
    rho, p = trend_test([torch.zeros(3), torch.zeros(3)])
    assert math.isnan(rho) and p == 1.0
    assert trend_test([torch.tensor([0.0, 0.2]), torch.tensor([0.1, 0.3])]) == trend_test(
        [torch.tensor([0.0, 0.2]), torch.tensor([0.1, 0.3])])  # seeded
    assert all(math.isnan(x) for x in trend_test([torch.tensor([math.nan, 0.1]), torch.tensor([0.2, 0.3])]))


def test_a_drop_in_the_last_grid_points_ends_the_plateau_there():
    alphas = torch.linspace(0, 1, 11)
    error = torch.tensor([0.9] * 9 + [0.3, 0.0])
    assert plateau(alphas, error, torch.zeros(11), 10, eps=0.05)["error_end"] == pytest.approx(0.8)


def test_curve_shape():
    a = torch.linspace(0, 1, 21)
    assert max_rise(1 - a) == 0.0
    assert max_rise(torch.tensor([3.0, 1.0, 2.5, 0.0])) == pytest.approx(1.5)
    assert chord_gap(a, (1 - a) ** 2) <= 0
    assert chord_gap(a, 1 - a ** 8) > 0.5


def test_class_losses_and_learning_steps():
    logits = torch.tensor([[0.0, 0.0], [0.0, 0.0], [5.0, -5.0], [-5.0, 5.0]])
    y = torch.tensor([0, 0, 0, 1])
    cl = class_losses(logits, y, 2)
    ref0 = (2 * math.log(2) + math.log1p(math.exp(-10))) / 3
    assert cl.tolist() == pytest.approx([ref0, math.log1p(math.exp(-10))])
    assert class_losses(logits, y, 2, "amax").tolist() == pytest.approx([math.log(2), math.log1p(math.exp(-10))])
    assert math.isnan(class_losses(logits, y, 3)[2])
    steps = torch.tensor([0, 10, 20, 30])
    curves = torch.tensor([[0.7, 0.7, 0.7], [0.6, 0.2, 0.7], [0.1, 0.1, 0.7], [0.1, 0.1, 0.5]])
    assert learning_steps(steps, curves, 0.3).tolist() == [20.0, 10.0, math.inf]


def test_untrained_ensemble_interpolates_to_a_flat_curve():
    from nbdemo.papers.mli.batched import sweep_experiment
    from nbdemo.papers.mli.experiment import plateaus
    X, y = torch.randn(60, 5), torch.arange(60) % 3
    runs, _ = sweep_experiment({"a": lambda: MLP(5, 8, 3, 3)}, X, y, torch.linspace(0, 1, 5), n_models=2, steps=0,
                               lr=0.1)
    for c in runs["a"]:  # θ(T) = θ(0): every α is the initial network
        assert torch.allclose(c["loss"], c["loss"][0].expand(5))
    assert plateaus(runs["a"], 3, eps_frac=10.0)["loss_len"].tolist() == [1.0, 1.0]


def test_vgg_out_scale_multiplies_the_output():
    from nbdemo.papers.mli.experiment import VGG
    x = torch.randn(2, 3, 32, 32)
    torch.manual_seed(0)
    ref = VGG(11, bias="none")(x)
    torch.manual_seed(0)
    small = VGG(11, bias="none", out_scale=1e-3)(x)
    torch.testing.assert_close(small, 1e-3 * ref, rtol=1e-3, atol=1e-9)


def test_interpolate_evaluates_the_path_as_one_net_per_alpha():
    # the vectorised path (chunks of alphas as ensemble members) gives each alpha's own net's loss and error
    torch.manual_seed(0)
    model = MLP(7, 5, 3, 4, bias="all")
    theta0, thetaT = states(model, 2)
    X, y = torch.randn(30, 7), torch.randint(0, 4, (30,))
    alphas = torch.linspace(0, 1, 13)
    for scheme in ("normal", "homogeneous"):
        c = interpolate(model, theta0, thetaT, X, y, alphas, scheme=scheme, batch_size=11, alpha_chunk=4)
        net = MLP(7, 5, 3, 4, bias="all")
        for a, l, e in zip(alphas.tolist(), c["loss"], c["error"]):
            net.load_state_dict(interpolated_state(model, theta0, thetaT, a, scheme))
            out = net(X).double()
            assert float(l) == pytest.approx(float(torch.nn.functional.cross_entropy(out, y)), rel=1e-5)
            assert float(e) == pytest.approx(float((out.argmax(1) != y).double().mean()))
