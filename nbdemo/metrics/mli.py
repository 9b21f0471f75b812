"""Linear interpolation between initial and trained networks (paper 003, MLI), and the plateau on it.

Conventions
- θ[α] = (1−α)θ(0) + αθ(T) for every parameter ("normal" scheme).
- The "homogeneous" scheme interpolates the bias of layer h (the input is layer 0, the h-th Linear or
  Conv2d module in `model.modules()` order is layer h) as (1−α)^h b_h(0) + α^h b_h(T), which is
  α^h b_h(T) for the usual zero initial biases. Weights, and any other parameter, stay linear.
- BatchNorm running statistics are never interpolated: at each α they are reset and recomputed exactly
  (cumulative average over the evaluation set in training mode) before evaluating in eval mode.
- Loss is the mean cross-entropy and error the fraction of misclassified samples over (X, y).
"""
import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d)


def layer_index(model):
    """{parameter name: h} for the bias of the h-th (1-based) Linear/Conv layer of `model`."""
    names = {m: n for n, m in model.named_modules()}
    layers = [m for m in model.modules() if isinstance(m, LAYERS)]
    return {f"{names[m]}.bias": h for h, m in enumerate(layers, 1) if m.bias is not None}


def interpolated_state(model, theta0, thetaT, alpha, scheme="normal"):
    """The state dict of θ[α]: parameters interpolated per `scheme`, buffers taken from θ(T)."""
    if scheme not in ("normal", "homogeneous"):
        raise ValueError(f"scheme={scheme!r}: choose 'normal' or 'homogeneous'")
    bias_layer = layer_index(model) if scheme == "homogeneous" else {}
    params = dict(model.named_parameters())
    state = {}
    for name, t in thetaT.items():
        if name not in params:
            state[name] = t
        elif name in bias_layer:
            h = bias_layer[name]
            state[name] = (1 - alpha) ** h * theta0[name] + alpha ** h * t
        else:
            state[name] = (1 - alpha) * theta0[name] + alpha * t
    return state


@torch.no_grad()
def _recompute_batchnorm(net, X, batch_size):
    bns = [m for m in net.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative moving average: exact mean over the batches seen
    net.train()
    for i in range(0, len(X), batch_size):
        net(X[i:i + batch_size])
    net.eval()


@torch.no_grad()
def evaluate(net, X, y, batch_size=10_000):
    """(mean cross-entropy, error) of `net` on (X, y), in float64."""
    loss, wrong = 0.0, 0
    for i in range(0, len(X), batch_size):
        logits = net(X[i:i + batch_size]).double()
        loss += F.cross_entropy(logits, y[i:i + batch_size], reduction="sum").item()
        wrong += (logits.argmax(1) != y[i:i + batch_size]).sum().item()
    return loss / len(X), wrong / len(X)


def interpolate(model, theta0, thetaT, X, y, alphas, *, scheme="normal", batch_size=10_000):
    """Loss and error curves along θ[α] for each α in `alphas`.

    model: an instance of the architecture (its own parameters are not used or changed).
    theta0, thetaT: state dicts at initialisation and after training.
    Returns dict(alpha, loss, error) of float64 tensors.
    """
    net = copy.deepcopy(model).eval()
    alphas = torch.as_tensor(alphas, dtype=torch.float64)
    loss, error = [], []
    for a in alphas.tolist():
        net.load_state_dict(interpolated_state(model, theta0, thetaT, a, scheme))
        _recompute_batchnorm(net, X, batch_size)
        l, e = evaluate(net, X, y, batch_size)
        loss.append(l)
        error.append(e)
    return dict(alpha=alphas, loss=torch.tensor(loss, dtype=torch.float64),
                error=torch.tensor(error, dtype=torch.float64))


def _prefix_end(alphas, inside):
    """Largest α such that `inside` holds at every grid point up to it; NaN if it fails at the first one."""
    out = (~inside).nonzero()
    n = len(inside) if len(out) == 0 else out[0].item()
    return float(alphas[n - 1]) if n > 0 else math.nan


def plateau(alphas, error, loss, k, *, eps, tol=0.01):
    """The plateau of an interpolation curve of a k-class problem, measured from α = 0.

    Error plateau: the α-range [0, error_end] over which |error − (1 − 1/k)| ≤ tol at every grid point
    (the error of predicting one class for a balanced set). Loss plateau: [0, loss_end] over which
    |loss − log k| ≤ eps. An end is NaN when the curve is already off the level at α = alphas[0].
    Returns dict(error_end, loss_end, error_level, loss_level).
    """
    alphas, error, loss = (torch.as_tensor(t, dtype=torch.float64) for t in (alphas, error, loss))
    err_level, loss_level = 1 - 1 / k, math.log(k)
    return dict(error_end=_prefix_end(alphas, (error - err_level).abs() <= tol),
                loss_end=_prefix_end(alphas, (loss - loss_level).abs() <= eps),
                error_level=err_level, loss_level=loss_level)


def max_rise(curve):
    """Largest increase of a curve over any earlier value: 0 for a non-increasing curve."""
    c = torch.as_tensor(curve, dtype=torch.float64)
    return float((c - c.cummin(0).values).max())


def chord_gap(alphas, curve):
    """max over α of (curve − chord between the endpoints), divided by |curve[0] − curve[-1]|.

    ≤ 0 for a convex curve; near 1 for a curve that stays at its start value and drops at the end.
    """
    a, c = (torch.as_tensor(t, dtype=torch.float64) for t in (alphas, curve))
    t = (a - a[0]) / (a[-1] - a[0])
    chord = (1 - t) * c[0] + t * c[-1]
    return float((c - chord).max() / (c[0] - c[-1]).abs())


def class_losses(logits, y, k):
    """Mean cross-entropy of the samples of each class: a (k,) float64 tensor (NaN for an absent class)."""
    per_sample = F.cross_entropy(logits.double(), y, reduction="none")
    total = torch.zeros(k, dtype=torch.float64, device=logits.device).index_add_(0, y, per_sample)
    count = torch.bincount(y, minlength=k).double()
    return total / count


def learning_steps(steps, class_loss, threshold):
    """First recorded step at which each class's loss is ≤ threshold (inf when never): (k,) float64.

    steps: (T,) recorded steps; class_loss: (T, k) per-class losses at those steps.
    """
    steps = torch.as_tensor(steps, dtype=torch.float64)
    below = torch.as_tensor(class_loss) <= threshold
    first = steps[below.double().argmax(0)]  # argmax returns the first maximal index
    return torch.where(below.any(0), first, math.inf)
