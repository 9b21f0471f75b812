"""Models of the PC-bias paper (Hacohen & Weinshall): ensembles of deep linear networks, the two-layer ReLU model of
§2.5 with only its first layer trained, and a small st-VGG-like CNN with a linear surrogate for its compact
representation. Ensembles are stacked tensors with a leading axis of N members, trained by `nbdemo.ml.train.fit`.
A deep linear net computes x ↦ W x with W its compact weight, so `train_linear` steps through W rather than through
each layer under `torch.func`; its steps are those of `nbdemo.ml.ensemble.train_ensemble` on the same nets (tested).

Losses follow the paper's Eq. 5 per sample: "mse" is ½‖f(x) - y‖² (one-hot y) averaged over the batch, so for
full-batch gradient descent the rate of Eq. 10 uses d / n; "ce" is the mean cross-entropy.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, jacrev, vmap

from nbdemo.ml.data import dry_run
from nbdemo.ml.train import batches, fit, schedule
from nbdemo.papers.pcb.metrics import compact_weight


def half_mse(out, y):
    """½‖out - onehot(y)‖² of each member averaged over its batch (the paper's L2 loss per sample): out (N, B, K),
    y (N, B) -> (N,)."""
    return 0.5 * ((out - F.one_hot(y, out.shape[-1]).to(out.dtype)) ** 2).sum(-1).mean(-1)


def cross_entropy(out, y):
    """The cross-entropy of each member averaged over its batch: out (N, B, K), y (N, B) -> (N,), as one call."""
    return F.cross_entropy(out.flatten(0, 1), y.flatten(), reduction="none").view(y.shape).mean(-1)


LOSSES = {"mse": half_mse, "ce": cross_entropy}  # per member, over a stacked ensemble's outputs


def init_variances(dims, init="glorot"):
    """Per-layer init variances σ_l² for widths dims = [q, m_1, ..., K].

    "glorot": Glorot, 2/(fan_in + fan_out) (the paper's experiments, §3.1). "balanced": Def. 3, which the theory
    assumes: 1/m_1 for the first layer, 1/m_{L-1} for the last, 2/(fan_in + fan_out) in between (so every
    α_l, β_l of Theorem 3 is 1 up to O(1/m)). A single layer (L = 1) is Glorot under both.
    """
    L = len(dims) - 1
    var = [2 / (dims[l] + dims[l + 1]) for l in range(L)]
    if init == "balanced" and L > 1:
        var[0], var[-1] = 1 / dims[1], 1 / dims[-2]
    elif init not in ("glorot", "balanced"):
        raise ValueError(f"init={init!r}: choose 'glorot' or 'balanced'")
    return var


def linear_init(dims, n_models, *, init="glorot", seed=0, device="cpu"):
    """Weights [W_1, ..., W_L] of N deep linear networks, each (N, m_l, m_{l-1}), uniform with `init_variances`."""
    g = torch.Generator().manual_seed(seed)
    return [((torch.rand(n_models, b, a, generator=g) * 2 - 1) * math.sqrt(3 * v)).to(device).requires_grad_()
            for a, b, v in zip(dims[:-1], dims[1:], init_variances(dims, init))]


# Forming W_1 = W_1(0) + Cᵀ X for a record costs about as much as the span form saves in 10 steps (PCB-9's nets on one
# CPU thread), so `train_linear` trains in the span only where records are at least this many steps apart
SPAN_RECORD_GAP = 25


class _FirstLayerSpan(torch.autograd.Function):
    """The outputs X_b Wᵀ (N, B, K) of deep linear nets whose first layer trains in the span of the training rows,
    with that layer's SGD step taken in its backward.

    Every SGD step moves W_1 by -lr Pᵀ δᵀ X_b (P = W_L ⋯ W_2, δ the gradient of the outputs), a combination of the
    rows of X, so W_1(t) = W_1(0) + Cᵀ X with coefficients C (N, n, m) on the n rows (C(0) = 0): X_b W_1ᵀ = Z0_b +
    G_b C with Z0 = X W_1(0)ᵀ and G = X Xᵀ. The outputs are then Z0_b Pᵀ + G_b (C Pᵀ), and P's gradient
    δᵀ Z0_b + (δᵀ G_b) C: neither forms W_1 (N, m, q) nor X_b W_1ᵀ. W_1's SGD step is C[:, idx] -= lr δ P on the
    batch's rows idx (plain SGD: no momentum, no weight decay), which the backward takes in place once P's gradient
    is formed, so C gets no gradient: the same SGD on W_1 in exact arithmetic. Z0_b (N, B, m), G_b (G, B, n) for
    G groups of data (member i in group i // M)."""

    @staticmethod
    def forward(ctx, C, P, Z0b, Gb, idx, lr):
        ctx.save_for_backward(P, Z0b, Gb, idx)
        ctx.C, ctx.lr = C, lr
        return torch.baddbmm(_ungrouped(Gb @ _grouped_cols(C @ P.mT, len(Gb)), len(P)), Z0b, P.mT)

    @staticmethod
    def backward(ctx, delta):  # delta (N, B, K)
        P, Z0b, Gb, idx = ctx.saved_tensors
        dG = _ungrouped(_grouped_cols(delta, len(Gb)).mT @ Gb, len(P), rows=True)  # δᵀ G_b: (N, K, n)
        grad_P = torch.baddbmm(dG @ ctx.C, delta.mT, Z0b)
        ctx.C.index_add_(1, idx, delta @ P, alpha=-ctx.lr)
        return None, grad_P, None, None, None, None


def _grouped_cols(T, n_groups):
    """(N, r, c) -> (G, r, M c): each group's members side by side along the columns."""
    N, r, c = T.shape
    return T.unflatten(0, (n_groups, -1)).transpose(1, 2).reshape(n_groups, r, -1)


def _ungrouped(T, n, rows=False):
    """The inverse of `_grouped_cols` for (G, r, M c) -> (N, r, c); rows=True: (G, M c, r) -> (N, c, r)."""
    if rows:
        return T.reshape(n, -1, T.shape[-1])
    G, r, _ = T.shape
    return T.unflatten(2, (n // G, -1)).transpose(1, 2).reshape(n, r, -1)


def train_linear(weights, X, y, *, steps, lr, batch_size=None, loss="mse", seed=0, record=None, record_at=None,
                 progress=False):
    """Train N deep linear networks (stacked `weights`, in place) with plain SGD on (X, y); return the History.

    A linear net computes x ↦ W x with W the compact weight, so every step forms W (N, K, q) first (cost
    O(L K m²) instead of O(n L m²)), then the outputs X W^T. All members see the same batches (full batch when
    batch_size is None). Full-batch "mse" uses the identity ½ mean‖Wx - y‖² = ½ tr(W S Wᵀ) - tr(W Cᵀ) + ½ with
    S = XᵀX / n, C = YᵀX / n (one-hot Y), which costs O(K q²) instead of O(n K q) per step.
    Groups: X (G, n, q) and y (G, n) give G datasets of the same size, member i (of N = G M) training on dataset
    i // M; every group takes the same batches, so G conditions trained from the same init and seed in one call run
    as G separate calls would, at a fraction of the per-step cost.
    Minibatches of fewer rows than inputs (n < q) train the first layer in the span of the rows (`_FirstLayerSpan`:
    the same SGD in exact arithmetic, float rounding differs), where records are at least `SPAN_RECORD_GAP` steps
    apart: each record forms W_1.
    A layer whose tensor does not require grad is frozen: it enters W but is not trained.
    record(weights, step) -> dict is called on `nbdemo.ml.train.schedule`.
    """
    Xg, yg = (X, y) if X.dim() == 3 else (X[None], y[None])  # (G, n, q), (G, n)
    n_groups, n = len(Xg), len(weights[0])
    if n % n_groups:
        raise ValueError(f"{n} members cannot be split into {n_groups} groups of data")
    criterion, per_group, n_samples = LOSSES[loss], n // n_groups, Xg.shape[1]

    def grouped(W):  # (N, K, q) -> (G, M K, q): each group's members stacked along the outputs
        return W.flatten(0, 1).unflatten(0, (n_groups, -1))

    full = batch_size is None or batch_size >= n_samples
    # minibatches, fewer rows than inputs, a trained first layer below others: W_1 trains in the span of X's rows
    # (`_FirstLayerSpan`), where each record, which forms W_1, comes after enough steps to pay for it
    gap = steps / max(1, len(schedule(steps, record_at)) - 1) if record else steps
    span = (not full and n_samples < Xg.shape[2] and weights[0].requires_grad
            and any(w.requires_grad for w in weights[1:]) and gap >= SPAN_RECORD_GAP)
    if loss == "mse" and full:  # full batch: needs only Σ_XX, Σ_YX
        S = Xg.mT @ Xg / n_samples  # (G, q, q)
        C = F.one_hot(yg, weights[-1].shape[-2]).to(X.dtype).mT @ Xg / n_samples  # (G, K, q)
        C = C.repeat_interleave(per_group, 0)  # (N, K, q)

        def step_loss(idx):
            W = compact_weight(weights)  # (N, K, q)
            return 0.5 * ((grouped(W) @ S).view_as(W) * W).sum((1, 2)) - (W * C).sum((1, 2)) + 0.5
    elif span:
        W1_0 = weights[0].detach().clone()
        span_C = torch.zeros(n, n_samples, W1_0.shape[1], dtype=X.dtype, device=X.device)  # (N, n, m)
        Z0 = _ungrouped(Xg @ _grouped_cols(W1_0.mT, n_groups), n)  # X W_1(0)ᵀ: (N, n, m)
        gram = Xg @ Xg.mT  # (G, n, n)

        def step_loss(idx):
            out = _FirstLayerSpan.apply(span_C, compact_weight(weights[1:]), Z0.index_select(1, idx),
                                        gram.index_select(1, idx), idx, lr)
            return criterion(out, yg.index_select(1, idx).repeat_interleave(per_group, 0))

        @torch.no_grad()
        def first_layer():  # W_1 = W_1(0) + Cᵀ X into weights[0], in place
            weights[0].copy_(W1_0 + _ungrouped(Xg.mT @ _grouped_cols(span_C, n_groups), n).mT)
    else:
        def step_loss(idx):
            out = Xg[:, idx] @ grouped(compact_weight(weights)).mT  # (G, B, M K), one matrix product per group
            out = out.unflatten(-1, (per_group, -1)).transpose(1, 2).flatten(0, 1)  # (N, B, K)
            return criterion(out, yg[:, idx].repeat_interleave(per_group, 0))

    def on_record(s):
        with torch.no_grad():
            if span:
                first_layer()
            return record([w.detach() for w in weights], s)

    trained = [w for w in weights[span:] if w.requires_grad]
    hist = fit(trained, step_loss, batches(n_samples, batch_size, steps, seed, X.device),
               steps=steps, lr=lr, momentum=0.0, weight_decay=0.0, lr_milestones=(), record=record and on_record,
               record_at=record_at, progress=progress, shape=(n,))
    if span:
        first_layer()
    return hist


def relu_init(q, width, n_models, *, seed=0, device="cpu"):
    """The two-layer ReLU model of §2.5 under its Assumption 2: rows w_{2i} = -w_{2i-1} (Glorot-uniform),
    output weights a_{2i} = -a_{2i-1} = 1/√m. Returns (W (N, m, q) trainable, a (m,) fixed)."""
    g = torch.Generator().manual_seed(seed)
    half = (torch.rand(n_models, width // 2, q, generator=g) * 2 - 1) * math.sqrt(6 / (q + width))
    W = torch.stack([half, -half], 2).reshape(n_models, width, q)
    a = torch.tensor([1.0, -1.0]).repeat(width // 2) / math.sqrt(width)
    return W.to(device).requires_grad_(), a.to(device)


def relu_forward(W, a, X):
    """f(x) = aᵀ σ(W x) for every member: (N, n)."""
    return torch.relu(X @ W.transpose(-1, -2)) @ a


def train_relu(W, a, X, t, *, steps, lr, batch_size=None, seed=0, record=None, record_at=None, progress=False):
    """Gradient descent on the first layer W only, loss ½(f(x) - t)² averaged over the batch, t = ±1 (§2.5)."""
    n = len(W)

    def step_loss(idx):
        return 0.5 * ((relu_forward(W, a, X[idx]) - t[idx]) ** 2).mean(-1)

    def on_record(s):
        with torch.no_grad():
            return record(W.detach(), s)

    return fit([W], step_loss, batches(len(X), batch_size, steps, seed, X.device), steps=steps, lr=lr,
               momentum=0.0, weight_decay=0.0, lr_milestones=(), record=record and on_record, record_at=record_at,
               progress=progress, shape=(n,))


class SmallVGG(nn.Module):
    """An st-VGG-like CNN (app. D.2, scaled down): blocks of two 3×3 convs + ReLU, then 2×2 max-pooling, then a
    hidden fully connected layer + ReLU and the output layer. No dropout or batch norm.

    linear=True is its linear surrogate for the compact representation (§3.3): identity activations and average
    pooling instead of max-pooling (the paper's "linear st-VGG").
    """

    def __init__(self, in_shape, channels=(8, 16), hidden=64, n_classes=2, linear=False):
        super().__init__()
        c, h, w = in_shape
        layers = []
        for k in channels:
            layers += [nn.Conv2d(c, k, 3, padding=1), nn.ReLU(), nn.Conv2d(k, k, 3, padding=1), nn.ReLU(),
                       nn.MaxPool2d(2)]
            c, h, w = k, h // 2, w // 2
        self.features = nn.Sequential(*layers)
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, hidden), nn.ReLU(), nn.Linear(hidden, n_classes))
        self.linear = linear

    def forward(self, x):
        for layer in [*self.features, *self.head]:
            if self.linear and isinstance(layer, nn.ReLU):
                continue
            if self.linear and isinstance(layer, nn.MaxPool2d):
                layer = nn.AvgPool2d(2)
            x = layer(x)
        return x


def glorot_(model):
    """Glorot-uniform weights and zero biases for every convolution and linear layer of `model`, in place; returns it.

    The paper's networks are initialised with Glorot uniform (§3.1, l.256; app. D.2, l.866); it says nothing of the
    biases, which we set to 0 (the usual companion of Glorot init). Fan-in and fan-out count the kernel's area.
    """
    for layer in model.modules():
        if isinstance(layer, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
    return model


def cnn_compact_weight(model, params, in_shape):
    """Compact representation (N, K, q) of a stacked CNN ensemble: its linear surrogate's map, biases removed,
    read off by feeding the q standard basis images: W[:, :, j] = f_lin(e_j) - f_lin(0).

    In a dry run (the runner's shape check) the same (N, K, q) map is read off as the Jacobian of f_lin at 0
    (K backward passes instead of q + 1 forward passes: for CIFAR at full resolution the basis batch alone is 3,073
    images per member); it equals the basis read-out up to float rounding, since f_lin is affine.
    """
    surrogate = SmallVGG.__new__(SmallVGG)
    surrogate.__dict__.update(model.__dict__)
    surrogate.linear = True
    q = math.prod(in_shape)
    if dry_run():
        zero = torch.zeros(1, *in_shape, device=next(iter(params.values())).device)
        jac = vmap(lambda p: jacrev(lambda x: functional_call(surrogate, p, (x,)))(zero))(params)  # (N, 1, K, 1, *in_shape)
        return jac.reshape(len(jac), -1, q)
    basis = torch.cat([torch.eye(q), torch.zeros(1, q)]).reshape(q + 1, *in_shape).to(next(iter(params.values())).device)
    out = vmap(lambda p: functional_call(surrogate, p, (basis,)))(params)
    return (out[:, :q] - out[:, q:]).transpose(-1, -2)
