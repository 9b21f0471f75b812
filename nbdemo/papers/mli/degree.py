"""The homogeneous bias interpolation of paper 003 (§5, Fig. 5) with the output bias at a chosen degree in α.

The paper's homogeneous scheme interpolates the bias of layer h as (1−α)^h b_h(0) + α^h b_h(T), so that every term of
a depth-r net's output has degree r in α (`nbdemo.papers.mli.metrics.interpolated_state`). Here the output layer's bias
takes degree `output_degree` instead (the other layers keep α^h): with output_degree = r it is the paper's scheme; with a
degree d below r the output bias gap grows as α^d against a weight signal of order α^r near α = 0, the discrepancy that
Theorem 1 (§3) says creates the error plateau and that the homogeneous scheme exists to correct. MLI-3's control
interpolates at d = 2, the lowest degree that differs from the normal scheme's output bias.
"""
import copy

import torch
import torch.nn.functional as F

from nbdemo.ml.ensemble import ensemble_forward
from nbdemo.papers.mli.experiment import train_mlps, unstack
from nbdemo.papers.mli.metrics import LAYERS, interpolate, interpolated_state, output_bias_gap


def degree_state(model, theta0, thetaT, alpha, output_degree=None):
    """The state dict of θ[α] under the homogeneous scheme, the output bias at degree `output_degree` (None: its
    layer index, the paper's scheme)."""
    state = interpolated_state(model, theta0, thetaT, alpha, "homogeneous")
    names = {m: n for n, m in model.named_modules()}
    out = f"{names[[m for m in model.modules() if isinstance(m, LAYERS)][-1]]}.bias"
    if output_degree is not None and out in state:
        d = output_degree
        state[out] = (1 - alpha) ** d * theta0[out] + alpha ** d * thetaT[out]
    return state


@torch.no_grad()
def interpolate_degree(model, theta0, thetaT, X, y, alphas, *, output_degree=None, batch_size=10_000, alpha_chunk=10):
    """Loss and error along θ[α] of `degree_state` for each α (as `nbdemo.papers.mli.metrics.interpolate`, for nets
    without BatchNorm): dict(alpha, loss, error) of float64 tensors."""
    alphas = torch.as_tensor(alphas, dtype=torch.float64)
    net = copy.deepcopy(model).eval()
    loss, wrong = torch.zeros(len(alphas), dtype=torch.float64), torch.zeros(len(alphas), dtype=torch.float64)
    for c in torch.arange(len(alphas)).split(alpha_chunk):
        states = [degree_state(model, theta0, thetaT, a, output_degree) for a in alphas[c].tolist()]
        stacked = {name: torch.stack([st[name] for st in states]) for name in states[0]}
        for i in range(0, len(X), batch_size):
            logits, t = ensemble_forward(net, stacked, X[i:i + batch_size]).double(), y[i:i + batch_size]
            loss[c] += F.cross_entropy(logits.flatten(0, 1), t.repeat(len(c)), reduction="none").view(len(c), -1).sum(1)
            wrong[c] += (logits.argmax(-1) != t).sum(1).double()
    return dict(alpha=alphas, loss=loss / len(X), error=wrong / len(X))


def normal_and_degree(make_model, n_models, X, y, alphas, *, output_degree=None, seed=0, **train_kwargs):
    """MLI-3's experiment for one setting: train `n_models` MLPs from `make_model()` as
    `nbdemo.papers.mli.experiment.train_and_interpolate` does (the same inits and batches), then interpolate each
    normally and by `degree_state`. Returns (normal curves, degree curves, history); each curve holds delta_max."""
    torch.manual_seed(seed)
    models = [make_model().to(X.device) for _ in range(n_models)]
    theta0 = [{k: v.detach().clone() for k, v in m.state_dict().items()} for m in models]
    params, hist = train_mlps(models, X, y, seed=seed, **train_kwargs)
    normal, degree = [], []
    for t0, tT in zip(theta0, unstack(params)):
        gap = output_bias_gap(models[0], tT)
        normal.append({**interpolate(models[0], t0, tT, X, y, alphas), "delta_max": gap})
        degree.append({**interpolate_degree(models[0], t0, tT, X, y, alphas, output_degree=output_degree),
                       "delta_max": gap})
    return normal, degree, hist
