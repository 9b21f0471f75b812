"""The sweeps of paper 003 (MLI-4, MLI-5) as one vectorised ensemble: every net of every setting trains in one SGD
loop, and each setting's nets are interpolated with all their α at once.

`nbdemo.papers.mli.experiment.fcn_experiment` trains one ensemble per setting (`train_mlps`) and interpolates each net
chunk by chunk of α. On a 2-core CPU the time of these small nets goes largely into the fixed cost of each
operation, which it pays once per setting at every step and once per net and α chunk. Here the nets are the same (each
setting's inits drawn after `torch.manual_seed(seed)`, member i's batches from seed + i in every setting) and so is
their SGD (`nbdemo.ml.train.fit`): the first layers of all settings read one gathered batch, and every deeper layer
is one batched matrix product over the nets that have it, so nets of different depths (MLI-5's FCN4…FCN10) train
together when the settings come in order of depth.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nbdemo.ml.train import History, batches, fit


def _layer(h, W, b):
    return torch.bmm(h, W) if b is None else torch.baddbmm(b, h, W)


def _stack(models, i):
    """Layer i of `models` as trainable stacks: weights (N, in, out) and bias (N, 1, out), or None without a bias."""
    has_bias = {m.linears[i].bias is not None for m in models}
    if len(has_bias) > 1:
        raise ValueError(f"the nets' linears[{i}] must all have a bias or all have none")
    W = torch.stack([m.linears[i].weight.detach().T for m in models]).contiguous().requires_grad_()
    b = torch.stack([m.linears[i].bias.detach() for m in models]).unsqueeze(1).contiguous().requires_grad_() \
        if has_bias.pop() else None
    return W, b


def _group_history(hist, cols):
    """The History of the members `cols` of an ensemble's History (their loss columns, their first divergence)."""
    loss = hist.loss[:, cols]
    bad = np.flatnonzero(~np.isfinite(loss).all(1))
    return History(list(hist.steps), loss, {}, int(bad[0]) + 1 if len(bad) else None, hist.wall_s)


def train_sweep(groups, X, y, *, steps, lr, batch_size=None, momentum=0.0, seed=0, progress=False):
    """Train the ReLU MLPs (`nbdemo.ml.models.MLP`, no norms) of several settings as one ensemble, each net as
    `nbdemo.papers.mli.experiment.train_mlps` trains it within its own setting.

    groups: one list of nets per setting, the same number n in each, one depth within a setting, settings in order
    of depth; every net has the same input, width and output. Member i of every setting draws its batches from
    seed + i. Returns (states, histories), one per setting: states[s] maps the parameter names to stacked (n, ...)
    tensors (as `train_mlps` returns them), histories[s] is the setting's History.
    """
    nets = [m for g in groups for m in g]
    n, S, N = len(groups[0]), len(groups), len(nets)
    depths = [len(m.linears) for m in nets]
    if any(len(g) != n or len({len(m.linears) for m in g}) != 1 for g in groups) or depths != sorted(depths):
        raise ValueError("give the same number of nets per setting, one depth within a setting, settings in order of "
                         "depth")
    if min(depths) < 2 or not all(isinstance(m.act, nn.ReLU) and all(isinstance(x, nn.Identity) for x in m.norms)
                                  for m in nets):
        raise ValueError("train_sweep trains ReLU MLPs of at least two layers without normalisation only")
    first = [_stack(g, 0) for g in groups]
    # hidden layer j (1-based) exists in the nets of depth >= j + 2: a suffix of `nets`, from `start` on
    hidden = []
    for j in range(1, depths[-1] - 1):
        start = next(i for i, d in enumerate(depths) if d >= j + 2)
        hidden.append((start, *_stack(nets[start:], j)))
    last_W, last_b = _stack(nets, -1)

    def step_loss(idx):  # idx: (n, batch) indices, row i for member i of every setting; or the full batch
        xb, t = X[idx], y[idx]
        if xb.dim() == 2:
            xb, t = xb.expand(n, -1, -1), t.expand(n, -1)
        h = torch.cat([_layer(xb, W, b) for W, b in first]).relu()
        for start, W, b in hidden:
            deeper = _layer(h[start:], W, b).relu()
            h = deeper if start == 0 else torch.cat([h[:start], deeper])
        out = _layer(h, last_W, last_b)
        return F.cross_entropy(out.flatten(0, 1), t.repeat(S, 1).flatten(), reduction="none").view(N, -1).mean(1)

    if batch_size is None or batch_size >= len(X):
        orders = batches(len(X), batch_size, steps, seed, X.device)
    else:
        orders = map(torch.stack, zip(*(batches(len(X), batch_size, steps, seed + i, X.device) for i in range(n))))
    layers = first + [(W, b) for _, W, b in hidden] + [(last_W, last_b)]
    params = [W for W, _ in layers] + [b for _, b in layers if b is not None]
    hist = fit(params, step_loss, orders, steps=steps, lr=lr, momentum=momentum, weight_decay=0.0, lr_milestones=(),
               record=None, record_at=None, progress=progress, shape=(N,))

    def part(s, W, b, lo=0):  # the nets of setting s in a stack that starts at net `lo`
        rows = slice(s * n - lo, (s + 1) * n - lo)
        return W[rows], None if b is None else b[rows]

    states = []
    for s in range(S):
        own = [first[s]] + [part(s, W, b, lo) for lo, W, b in hidden[:depths[s * n] - 2]] + [part(s, last_W, last_b)]
        state = {f"linears.{i}.weight": W.detach().transpose(1, 2) for i, (W, _) in enumerate(own)}
        state.update({f"linears.{i}.bias": b.detach().squeeze(1) for i, (_, b) in enumerate(own) if b is not None})
        states.append(state)
    return states, [_group_history(hist, range(s * n, (s + 1) * n)) for s in range(S)]


@torch.no_grad()
def interpolate_nets(theta0, thetaT, X, y, alphas, *, scheme="normal", batch_size=10_000, alpha_chunk=10):
    """`nbdemo.papers.mli.metrics.interpolate` for n ReLU MLPs of one depth (no norms) at once, all their α together.

    theta0, thetaT: the nets' stacked state dicts ({name: (n, ...)}, `nbdemo.ml.models.MLP`'s names). The weights
    are interpolated linearly in both schemes, so the first layer's output at α is (1−α)·X W(0)ᵀ + α·X W(T)ᵀ plus
    its bias at α: two products per net instead of one per α. Biases follow `scheme` ("normal": linear in α;
    "homogeneous": the bias of the h-th layer as (1−α)^h b(0) + α^h b(T)). Returns one dict(alpha, loss, error,
    delta_max) per net, the curves in float64 and delta_max its trained output bias gap Δ_max (largest output bias
    minus smallest; 0 without an output bias), as `nbdemo.papers.mli.experiment.train_and_interpolate` gives them.
    """
    if scheme not in ("normal", "homogeneous"):
        raise ValueError(f"scheme={scheme!r}: choose 'normal' or 'homogeneous'")
    alphas = torch.as_tensor(alphas, dtype=torch.float64)
    depth = sum(name.endswith(".weight") for name in thetaT)
    n = len(thetaT["linears.0.weight"])
    loss = torch.zeros(n, len(alphas), dtype=torch.float64, device=X.device)
    wrong = torch.zeros(n, len(alphas), dtype=torch.float64, device=X.device)

    def coefficients(a, power, dims):
        """(1−α)^power and α^power at the α of `a`, shaped (1, len(a)) followed by `dims` ones."""
        shape = (1, len(a)) + (1,) * dims
        return tuple((c ** power).float().to(X.device).view(shape) for c in (1 - a, a))

    def at(name, a, power=1):
        """The parameter `name` of every net at every α of `a`: (n, len(a), ...)."""
        c0, cT = coefficients(a, power, thetaT[name].dim() - 1)
        return c0 * theta0[name].unsqueeze(1) + cT * thetaT[name].unsqueeze(1)

    def bias(i, a):  # the bias of linears.i (layer h = i + 1) at α, shaped (n * len(a), 1, out); None without one
        name = f"linears.{i}.bias"
        if name not in thetaT:
            return None
        return at(name, a, i + 1 if scheme == "homogeneous" else 1).flatten(0, 1).unsqueeze(1)

    for lo in range(0, len(X), batch_size):
        xb, t = X[lo:lo + batch_size], y[lo:lo + batch_size]
        # the first layer's output without its bias, at α = 0 and at α = 1: (n, B, width) each
        z0, zT = (torch.matmul(xb, th["linears.0.weight"].transpose(1, 2)) for th in (theta0, thetaT))
        for c in torch.arange(len(alphas)).split(alpha_chunk):
            a, m = alphas[c], len(c)
            c0, cT = coefficients(a, 1, 2)
            h = (c0 * z0.unsqueeze(1) + cT * zT.unsqueeze(1)).flatten(0, 1)  # (n * m, B, width)
            b = bias(0, a)
            h = (h if b is None else h + b).relu()
            for i in range(1, depth):
                h = _layer(h, at(f"linears.{i}.weight", a).flatten(0, 1).transpose(1, 2), bias(i, a))
                if i < depth - 1:
                    h = h.relu()
            logits = h.double()
            loss[:, c] += F.cross_entropy(logits.flatten(0, 1), t.repeat(n * m), reduction="none") \
                .view(n, m, -1).sum(2)
            wrong[:, c] += (logits.argmax(-1) != t).sum(1).view(n, m).double()
    out_bias = thetaT.get(f"linears.{depth - 1}.bias")
    gaps = [0.0] * n if out_bias is None else (out_bias.max(1).values - out_bias.min(1).values).tolist()
    return [dict(alpha=alphas, loss=loss[i].cpu() / len(X), error=wrong[i].cpu() / len(X), delta_max=gaps[i])
            for i in range(n)]


def sweep_experiment(settings, X, y, alphas, *, n_models, scheme="normal", seed=0, progress=False, **train_kwargs):
    """`nbdemo.papers.mli.experiment.fcn_experiment` for the settings of a sweep (MLI-4, MLI-5): the same nets and
    training, as one ensemble (`train_sweep`), each net interpolated on (X, y) by `scheme` (`interpolate_nets`).

    settings: {name: make_model}, in order of depth; train_kwargs go to `train_sweep` (steps, lr, momentum,
    batch_size). Returns (runs, hists): runs[name] is the list of the setting's net curves, hists[name] its History.
    """
    groups = []
    for make in settings.values():
        torch.manual_seed(seed)
        groups.append([make().to(X.device) for _ in range(n_models)])
    theta0 = [{k: torch.stack([m.state_dict()[k] for m in g]) for k in g[0].state_dict()} for g in groups]
    states, hists = train_sweep(groups, X, y, seed=seed, progress=progress, **train_kwargs)
    runs = {name: interpolate_nets(t0, tT, X, y, alphas, scheme=scheme)
            for name, t0, tT in zip(settings, theta0, states)}
    return runs, dict(zip(settings, hists))
