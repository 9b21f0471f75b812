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

from nbdemo.ml.ensemble import ensemble_forward

LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d)


def layer_index(model):
    """{parameter name: h} for the bias of the h-th (1-based) Linear/Conv layer of `model`."""
    names = {m: n for n, m in model.named_modules()}
    layers = [m for m in model.modules() if isinstance(m, LAYERS)]
    return {f"{names[m]}.bias": h for h, m in enumerate(layers, 1) if m.bias is not None}


def interpolated_state(model, theta0, thetaT, alpha, scheme="normal", output_degree=None):
    """The state dict of θ[α]: parameters interpolated per `scheme`, buffers taken from θ(T).

    output_degree: the output layer's bias (the last Linear/Conv layer's) at degree d in α, (1−α)^d b(0) + α^d b(T),
    in place of the degree the scheme gives it (MLI-3's control; None: the scheme's)."""
    if scheme not in ("normal", "homogeneous"):
        raise ValueError(f"scheme={scheme!r}: choose 'normal' or 'homogeneous'")
    bias_layer = layer_index(model) if scheme == "homogeneous" else {}
    if output_degree is not None:
        names = {m: n for n, m in model.named_modules()}
        out = f"{names[[m for m in model.modules() if isinstance(m, LAYERS)][-1]]}.bias"
        if out in thetaT:
            bias_layer[out] = output_degree
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


@torch.no_grad()
def interpolate(model, theta0, thetaT, X, y, alphas, *, scheme="normal", output_degree=None, batch_size=10_000,
                alpha_chunk=10):
    """Loss and error curves along θ[α] for each α in `alphas`.

    model: an instance of the architecture (its own parameters are not used or changed).
    theta0, thetaT: state dicts at initialisation and after training.
    scheme, output_degree: the path θ[α] (`interpolated_state`).
    The points of the path are evaluated `alpha_chunk` at a time, as the members of one vectorised ensemble
    (`nbdemo.ml.ensemble.ensemble_forward`); a net with BatchNorm, whose statistics are recomputed at each α, one
    at a time.
    Returns dict(alpha, loss, error) of float64 tensors.
    """
    alphas = torch.as_tensor(alphas, dtype=torch.float64)
    net = copy.deepcopy(model).eval()
    if any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in net.modules()):
        curve = []
        for a in alphas.tolist():
            net.load_state_dict(interpolated_state(model, theta0, thetaT, a, scheme, output_degree))
            _recompute_batchnorm(net, X, batch_size)
            curve.append(evaluate(net, X, y, batch_size))
        loss, error = (torch.tensor(c, dtype=torch.float64) for c in zip(*curve))
        return dict(alpha=alphas, loss=loss, error=error)
    loss, wrong = torch.zeros(len(alphas), dtype=torch.float64), torch.zeros(len(alphas), dtype=torch.float64)
    for c in torch.arange(len(alphas)).split(alpha_chunk):
        states = [interpolated_state(model, theta0, thetaT, a, scheme, output_degree) for a in alphas[c].tolist()]
        stacked = {name: torch.stack([st[name] for st in states]) for name in states[0]}
        for i in range(0, len(X), batch_size):
            logits, t = ensemble_forward(net, stacked, X[i:i + batch_size]).double(), y[i:i + batch_size]
            loss[c] += F.cross_entropy(logits.flatten(0, 1), t.repeat(len(c)), reduction="none").view(len(c), -1).sum(1)
            wrong[c] += (logits.argmax(-1) != t).sum(1).double()
    return dict(alpha=alphas, loss=loss / len(X), error=wrong / len(X))


def _plateau_run(alphas, high, hold):
    """(start, end) α of the plateau of a curve that is `high` at some grid points; (NaN, NaN) if it never is.

    It starts at the first high point and ends at the last high point before the curve is low at `hold`
    consecutive grid points, or at the last high point of the grid when no such run of low points follows.
    """
    idx = high.nonzero().flatten()
    if len(idx) == 0:
        return math.nan, math.nan
    first = last = idx[0].item()
    low = 0
    for j in range(first + 1, len(high)):
        if high[j]:
            last, low = j, 0
        else:
            low += 1
            if low == hold:
                break
    return float(alphas[first]), float(alphas[last])


def output_bias_gap(model, state):
    """Δ_max of Theorem 1 (paper 003, §3) for the net `model` with parameters `state`: its largest output bias
    minus its smallest (the output layer is the last Linear/Conv layer); 0 for a net without an output bias."""
    names = {m: n for n, m in model.named_modules()}
    bias = state.get(f"{names[[m for m in model.modules() if isinstance(m, LAYERS)][-1]]}.bias")
    return 0.0 if bias is None else float(bias.max() - bias.min())


def plateau(alphas, error, loss, k, *, eps, delta_max=0.0, tol=0.01, hold=3, bias_degree=1):
    """The plateaus of an interpolation curve of a k-class problem.

    The paper never defines a plateau numerically: it reads them off the curves, as stretches where "the loss
    and error remain high until close to the optimum" (paper 003, §1). Theorem 1 (§3) says what "high" is:
    on [α1, α2] the error is 1 − 1/k (every sample takes one class; a balanced set's error cannot exceed that level
    by much), and on [0, α3] the mean loss lies in the band [log k − 2eϵ, log k + αΔ_max + 2eϵ], which starts at
    log k and widens upwards with the output bias gap Δ_max. So a point is on the error plateau when
        error ≥ 1 − 1/k − tol,
    and on the loss plateau when it lies in that band, with `eps` for 2eϵ:
        log k − eps ≤ loss ≤ log k + α·delta_max + eps.
    On a path that puts the output bias at degree d in α (the homogeneous scheme: d = the depth), the gap at α is
    α^d·Δ_max and the band widens by α^`bias_degree`·delta_max instead.
    A rise of the loss that the bias gap explains does not end the loss plateau; a loss above the band, such as
    the descent of a net whose initial loss starts well above log k (a standard init), is not on it.
    "Remain high" is about where the curve leaves the level for good, so the plateau runs from the first high
    point to the last high point before the curve is low at `hold` consecutive grid points (or the grid ends).
    A dip of fewer than `hold` points that returns to the level is part of the plateau. The default hold = 3
    means the curve must stay low over more than two grid steps (0.04 of the path on the paper's 50-point
    grid): one or two grid points never end a plateau, and only the grid's resolution sets that number.
    The plateau may start after α = 0, because the initial network's predictions are random (Theorem 1 skips
    [0, δ/Δ_min] for the same reason).

    Returns dict(error_start, error_end, error_len, loss_start, loss_end, loss_len, error_level, loss_level);
    a length is end − start (0 when the curve is never high).
    """
    alphas, error, loss = (torch.as_tensor(t, dtype=torch.float64) for t in (alphas, error, loss))
    err_level, loss_level = 1 - 1 / k, math.log(k)
    in_band = (loss >= loss_level - eps) & (loss <= loss_level + alphas ** bias_degree * delta_max + eps)
    out = dict(error_level=err_level, loss_level=loss_level)
    for name, high in (("error", error >= err_level - tol), ("loss", in_band)):
        start, end = _plateau_run(alphas, high, hold)
        out.update({f"{name}_start": start, f"{name}_end": end, f"{name}_len": 0.0 if math.isnan(start) else end - start})
    return out


def _ranks(x):
    """Ranks 1…n of the numbers in x, ties given their average rank."""
    less, equal = (x[:, None] > x[None, :]).sum(1), (x[:, None] == x[None, :]).sum(1)
    return (less + (equal + 1) / 2).double()


def trend_test(groups, *, n_perm=10_000, seed=0):
    """Spearman's rank correlation between each value's group position and the value, over all values, and its
    one-sided permutation p-value for a positive trend.

    groups: a list of 1-d tensors, the values of each setting in the order of the hypothesised increase.
    Returns (rho, p): p = (1 + #{permutations with rho ≥ observed}) / (1 + n_perm), with the values permuted among
    all positions (a seeded generator, so it is deterministic). rho is NaN and p is 1 when every value is equal; both
    are NaN when a value is NaN.
    """
    x = torch.cat([torch.as_tensor(g, dtype=torch.float64).flatten() for g in groups])
    if x.isnan().any():
        return math.nan, math.nan
    pos = torch.cat([torch.full((len(g),), float(i)) for i, g in enumerate(groups)]).double()
    rx, rp = _ranks(x), _ranks(pos)
    if rx.std() == 0:
        return math.nan, 1.0
    rx, rp = rx - rx.mean(), rp - rp.mean()
    scale = rx.norm() * rp.norm()
    rho = float(rx @ rp / scale)
    gen = torch.Generator().manual_seed(seed)
    perms = torch.argsort(torch.rand(n_perm, len(x), generator=gen), dim=1)
    null = (rx[perms] @ rp) / scale
    return rho, float((1 + (null >= rho - 1e-12).sum()) / (1 + n_perm))


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


def class_losses(logits, y, k, reduce="mean"):
    """Cross-entropy of the samples of each class, their mean or (reduce="amax") their largest: a (k,) float64
    tensor (NaN for an absent class)."""
    per_sample = F.cross_entropy(logits.double(), y, reduction="none")
    out = torch.full((k,), math.nan, dtype=torch.float64, device=logits.device)
    return out.scatter_reduce_(0, y, per_sample, reduce, include_self=False)


def learning_steps(steps, class_loss, threshold):
    """First recorded step at which each class's loss is ≤ threshold (inf when never): (k,) float64.

    steps: (T,) recorded steps; class_loss: (T, k) per-class losses at those steps.
    """
    steps = torch.as_tensor(steps, dtype=torch.float64)
    below = torch.as_tensor(class_loss) <= threshold
    first = steps[below.double().argmax(0)]  # argmax returns the first maximal index
    return torch.where(below.any(0), first, math.inf)


def majority_chance(p, n):
    """The probability that at least n // 2 + 1 of n independent nets show an event of probability p each: the
    chance level of a check that asks a majority of n nets for it."""
    need = n // 2 + 1
    return sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(need, n + 1))
