"""Ensembles of plain ReLU MLPs (`nbdemo.ml.models.MLP` without norms) trained as batched matrix products, nets of
several settings at once (`train_mlps`): the FCN experiments of paper 003 (MLI) and the MLPs of paper 002 (PCB).

On a 2-core CPU the time of these small nets goes largely into the fixed cost of each operation: a loop per setting
(`nbdemo.ml.ensemble.train_ensemble`, the generic reference, `torch.func` over any module) pays it once per setting
at every step. Here the nets are the same and so is their SGD (`nbdemo.ml.train.fit`), up to rounding: every layer is
one batched matrix product over the nets that have it, so nets of different depths (MLI-5's FCN4…FCN10) train
together when the settings come in order of depth, and nets with and without a layer's bias (MLI-2's all/last/no
bias) train together with a zero bias that stays exactly zero.

With fewer training images P than inputs (the default profiles: 500 images of 784 pixels), the first layer, the
largest, trains in the span of the images. Its weight gradient X_bᵀ δ lies in that span, and so does every SGD step
with momentum, so W(t) = W(0) + Xᵀ C(t) for coefficients C on the images (C(0) = 0), and X_b W(t) = X_b W(0) +
G_b C(t) with G = X Xᵀ. SGD on C, given the gradient step δ scattered to the batch's rows (`_ImageSpan`), is SGD on
W step for step in exact arithmetic; a step then costs one product with the batch's rows of G (P columns) instead of
two with X.
"""
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from nbdemo.ml.train import History, batches, fit


def batched_linear(h, W, b):
    """h W + b for stacked nets: h (N, B, in), W (N, in, out), b (N, 1, out) or None."""
    return torch.bmm(h, W) if b is None else torch.baddbmm(b, h, W)


def _stack(models, i):
    """Layer i of `models` stacked: weights (N, in, out), biases (N, 1, out) with zeros for a net without one, and
    which of those biases are the nets' own (bool, the biases' shape). Bias and mask are None where no net has one."""
    W = torch.stack([m.linears[i].weight.detach().T for m in models])
    own = [m.linears[i].bias is not None for m in models]
    if not any(own):
        return W, None, None
    b = torch.stack([m.linears[i].bias.detach() if o else W.new_zeros(W.shape[2]) for m, o in zip(models, own)])
    return W, b.unsqueeze(1), torch.tensor(own, device=W.device).view(-1, 1, 1).expand(len(models), 1, W.shape[2])


def _leaf(t, keep=None):
    """`t` as a trainable leaf. Where `keep` is False its gradient is zeroed (a hook), so that SGD without weight
    decay, its momentum buffer zero too, leaves those entries exactly as they are: 0.0, a bias the net does not have
    (and adding 0.0 is exact)."""
    t = t.detach().contiguous().requires_grad_()
    if keep is not None and not keep.all():
        keep = keep.contiguous()
        t.register_hook(lambda g: torch.where(keep, g, 0.0))
    return t


class _ImageSpan(torch.autograd.Function):
    """G_b C: the first layer's pre-activation X_b (W(t) − W(0)), with G_b = X_b Xᵀ the batch's rows of the images'
    Gram matrix and W(t) − W(0) = Xᵀ C. The backward hands C the weight gradient X_bᵀ δ in the images' coordinates
    (δ, the gradient of the pre-activation, scattered to the batch's rows idx), not dL/dC = G_bᵀ δ: SGD on C is then
    SGD on W."""

    @staticmethod
    def forward(ctx, C, Gb, idx):
        ctx.save_for_backward(idx)
        ctx.images = C.shape[1]
        return torch.bmm(Gb, C)

    @staticmethod
    def backward(ctx, delta):
        idx, = ctx.saved_tensors
        grad = delta.new_zeros(delta.shape[0], ctx.images, delta.shape[2])
        return grad.scatter_add_(1, idx.unsqueeze(-1).expand_as(delta), delta), None, None


def _group_history(hist, cols):
    """The History of the members `cols` of an ensemble's History (their loss columns, their first divergence, the
    records)."""
    loss = hist.loss[:, cols]
    bad = np.flatnonzero(~np.isfinite(loss).all(1))
    return History(list(hist.steps), loss, hist.records, int(bad[0]) + 1 if len(bad) else None, hist.wall_s)


def train_mlps(groups, X, y, *, steps, lr, batch_size=None, momentum=0.0, seed=0, record=None, record_at=None,
               progress=False):
    """Train the ReLU MLPs (`nbdemo.ml.models.MLP`, no norms) of several settings as one ensemble, each net as
    `nbdemo.ml.ensemble.train_ensemble` trains it within its own setting (SGD without weight decay).

    groups: one list of nets per setting, the same number n in each, one architecture (depth, biases) within a
    setting, settings in order of depth; every net has the same input, width and output, and the settings may differ
    in which layers have a bias (see the module's docstring). Member i of every setting draws its batches from
    seed + i. y: the labels (P,) of every setting, or (S, P), one label vector per setting (several tasks on the same
    inputs). Returns (states, histories), one per setting: states[s] maps the names of the setting's MLP state dict
    (no bias where its nets have none) to stacked (n, ...) tensors, histories[s] is the setting's History. The first
    layer trains in the span of the rows of X (see the module's docstring): the same SGD, up to rounding.
    record(states, step) -> dict, with states as returned, is called on `nbdemo.ml.train.schedule`; every setting's
    History holds what it returned.
    """
    nets = [m for g in groups for m in g]
    n, S, N = len(groups[0]), len(groups), len(nets)
    depths = [len(m.linears) for m in nets]
    if any(len(g) != n or len({tuple(m.state_dict()) for m in g}) != 1 for g in groups) or depths != sorted(depths):
        raise ValueError("give the same number of nets per setting, one architecture within a setting, settings in "
                         "order of depth")
    if min(depths) < 2 or not all(isinstance(m.act, nn.ReLU) and all(isinstance(x, nn.Identity) for x in m.norms)
                                  for m in nets):
        raise ValueError("train_mlps trains ReLU MLPs of at least two layers without normalisation only")
    # the first layer of every net, the settings side by side along its outputs: (n, ., S·width)
    W0, b0, keep0 = _stack(nets, 0)
    width = W0.shape[2]

    def side_by_side(t):  # (N, ., width), setting by setting -> (n, ., S·width)
        return t.reshape(S, n, -1, width).permute(1, 2, 0, 3).reshape(n, -1, S * width)

    W0 = side_by_side(W0)
    b0 = None if b0 is None else _leaf(side_by_side(b0), side_by_side(keep0))
    span = len(X) < X.shape[1]  # fewer images than inputs: W(t) = W(0) + Xᵀ C(t), C trained
    if span:
        C = torch.zeros(n, len(X), S * width, device=X.device, requires_grad=True)
        gram, Z0 = X @ X.T, X @ W0  # (P, P), and the pre-activations at W(0) of all images, (n, P, S·width)
        offsets = torch.arange(n, device=X.device).unsqueeze(1) * len(X)  # member i's rows of Z0.flatten(0, 1)
    else:
        C = _leaf(W0)

    def first(idx):  # the first layer's pre-activation without its bias, (n, batch, S·width)
        if not span:
            return torch.bmm(X[idx], C)
        # index_select, not indexing by a tensor: the same gather at a quarter of the time on the CPU
        Gb = gram.index_select(0, idx.flatten()).view(n, -1, len(X))
        Z0b = Z0.flatten(0, 1).index_select(0, (idx + offsets).flatten()).view(n, -1, S * width)
        return _ImageSpan.apply(C, Gb, idx) + Z0b

    def trainable(models, i):
        W, b, keep = _stack(models, i)
        return _leaf(W), None if b is None else _leaf(b, keep)

    # hidden layer j (1-based) exists in the nets of depth >= j + 2: a suffix of `nets`, from `start` on
    hidden = []
    for j in range(1, depths[-1] - 1):
        start = next(i for i, d in enumerate(depths) if d >= j + 2)
        hidden.append((start, *trainable(nets[start:], j)))
    last_W, last_b = trainable(nets, -1)

    def step_loss(idx):  # idx: (n, batch) indices, row i for member i of every setting; or the full batch
        if not torch.is_tensor(idx):
            idx = torch.arange(len(X), device=X.device).expand(n, -1)
        t, z = (y.take(idx).repeat(S, 1) if y.dim() == 1 else y[:, idx].flatten(0, 1)), first(idx)  # t: (N, batch)
        z = z if b0 is None else z + b0
        h = z.view(n, -1, S, width).permute(2, 0, 1, 3).reshape(N, -1, width).relu()  # nets in setting order
        for start, W, b in hidden:
            if start == 0:
                h = batched_linear(h, W, b).relu_()
            else:  # split, not slices: its backward joins the two gradients instead of padding each with zeros
                shallow, deep = h.split([start, N - start])
                h = torch.cat([shallow, batched_linear(deep, W, b).relu_()])
        out = batched_linear(h, last_W, last_b)
        return F.cross_entropy(out.flatten(0, 1), t.flatten(), reduction="none").view(N, -1).mean(1)

    if batch_size is None or batch_size >= len(X):
        orders = batches(len(X), batch_size, steps, seed, X.device)
    else:
        orders = map(torch.stack, zip(*(batches(len(X), batch_size, steps, seed + i, X.device) for i in range(n))))
    layers = [(C, b0)] + [(W, b) for _, W, b in hidden] + [(last_W, last_b)]
    params = [W for W, _ in layers] + [b for _, b in layers if b is not None]

    def part(s, W, b, lo=0):  # the nets of setting s in a stack that starts at net `lo`
        rows = slice(s * n - lo, (s + 1) * n - lo)
        return W[rows], None if b is None else b[rows]

    @torch.no_grad()
    def states():  # every setting's stacked state dict, as it is now
        W_T = (W0 + X.T @ C if span else C).split(width, 2)
        b_T = [None] * S if b0 is None else b0.split(width, 2)
        out = []
        for s, g in enumerate(groups):
            own = [(W_T[s], b_T[s])] + [part(s, W, b, lo) for lo, W, b in hidden[:depths[s * n] - 2]] \
                + [part(s, last_W, last_b)]
            stacks = {f"linears.{i}.weight": W.transpose(1, 2) for i, (W, _) in enumerate(own)}
            stacks.update({f"linears.{i}.bias": b.squeeze(1) for i, (_, b) in enumerate(own) if b is not None})
            out.append({name: stacks[name].detach() for name in g[0].state_dict()})  # the MLP's names, in order
        return out

    hist = fit(params, step_loss, orders, steps=steps, lr=lr, momentum=momentum, weight_decay=0.0, lr_milestones=(),
               record=record and (lambda s: record(states(), s)), record_at=record_at, progress=progress, shape=(N,))
    return states(), [_group_history(hist, range(s * n, (s + 1) * n)) for s in range(S)]


def stacked_state(models):
    """The nets' state dicts stacked: {name: (n, ...)}, copies."""
    return {k: torch.stack([m.state_dict()[k].detach() for m in models]) for k in models[0].state_dict()}


def unstack(state):
    """A stacked state dict {name: (n, ...)} as n state dicts, copies."""
    return [{k: v[i].clone() for k, v in state.items()} for i in range(len(next(iter(state.values()))))]
