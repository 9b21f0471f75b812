"""N copies of one architecture trained as one vectorised ensemble (torch.func).

The members' parameters and buffers are stacked along a new first axis (`stack_module_state`) and the forward
pass is `vmap(functional_call)`. SGD on the stacked tensors is exactly SGD on each member, because
momentum and weight decay act elementwise and the summed loss gives each member its own gradient.
Member i draws its batches from seed `seed + i`, so it matches `train(copy_of_member_i, seed=seed + i)`; with
same_batches=True every member takes those of `seed`. Weight decay may differ between members.

Tested member by member against `train` for the MLP, deep linear networks (the MLP with identity activations),
the FC ResNet and the MLP with BatchNorm: its running statistics are stacked buffers too, which each member's
forward pass updates in place inside vmap, as `train` updates its own. Convolutions vectorise as grouped
convolutions; `nbdemo bench` measures every ensemble it times, the CNN of PCB-5 included, faster than a loop of
`train` on the CPU at N = 10 and N = 100 (README, Performance), so no model falls back to a loop.
"""
import copy

import torch
from torch.func import functional_call, stack_module_state, vmap

from nbdemo.ml.train import batches, fit, loss_fn


def functional(model, *, per_member=False, randomness="error", **kwargs):
    """A function (state, X) -> outputs of every member, X shared (n, ...) or, with per_member=True, one batch
    each (N, n, ...). state maps names to stacked parameters and buffers. The members run in `model`'s mode: in
    training mode BatchNorm uses batch statistics and updates the running ones in `state`, in place.
    randomness is vmap's: "error" refuses random operations, "different" draws them (dropout masks) per member.
    kwargs go to the model's forward (e.g. `features=True` for MLP)."""
    base = copy.deepcopy(model).to("meta")

    def one(p, x):
        return functional_call(base, p, (x,), kwargs)

    return vmap(one, in_dims=(0, 0 if per_member else None), randomness=randomness)


def ensemble_forward(model, state, X, *, per_member=False, **kwargs):
    """Run every member on X; outputs gain a leading N axis (see `functional`; pass `model.eval()` to evaluate a
    BatchNorm net with its running statistics)."""
    return functional(model, per_member=per_member, **kwargs)(state, X)


def train_ensemble(models, X, y, *, steps, lr, batch_size=None, momentum=0.0, weight_decay=0.0, lr_milestones=(),
                   seed=0, batch_seeds=None, same_batches=False, loss="ce", randomness="error", record=None,
                   record_at=None, progress=True):
    """Train the members of `models` (one architecture, their own inits) as one ensemble.

    Returns (state, History): state maps the names of parameters and buffers to stacked (N, ...) tensors (see
    `ensemble_forward`); History.loss has shape (steps, N); `History.member(i)` is member i's. record(state, step)
    -> dict is called on the schedule of `train`. batch_size=None is full-batch gradient descent, the same data
    for every member. weight_decay is one number, or one per member. randomness="different" trains a model with
    dropout, each member with its own masks (see `functional`). y is (n,), the labels of every member, or (N, n),
    one label vector per member (several tasks on the same inputs, as one ensemble); member i's batches come from
    batch_seeds[i] when given (e.g. seed + i within each task), else from seed + i.
    """
    params, buffers = stack_module_state(models)
    params, n = {k: v.detach().requires_grad_() for k, v in params.items()}, len(models)
    state = {**params, **buffers}
    if torch.as_tensor(weight_decay).shape not in ((), (n,)):
        raise ValueError(f"weight_decay={weight_decay!r}: give one number, or one per member ({n})")
    seeds = [seed + i for i in range(n)] if batch_seeds is None else list(batch_seeds)
    if len(seeds) != n or (y.dim() == 2 and len(y) != n):
        raise ValueError(f"{n} members: give one batch seed and one label vector per member, or none")
    model, criterion = models[0], loss_fn(loss)
    per_member_loss = vmap(criterion)
    if same_batches or batch_size is None or batch_size >= len(X):
        orders = batches(len(X), batch_size, steps, seed, X.device)
        forward = functional(model, randomness=randomness)
        labels = (lambda idx: y[:, idx]) if y.dim() == 2 else (lambda idx: y[idx].expand(n, -1))
        step_loss = lambda idx: per_member_loss(forward(state, X[idx]), labels(idx))
    else:  # one (N, batch_size) index tensor a step: member i's batch from its seed
        orders = map(torch.stack, zip(*(batches(len(X), batch_size, steps, s, X.device) for s in seeds)))
        forward = functional(model, per_member=True, randomness=randomness)
        labels = (lambda idx: y.gather(1, idx)) if y.dim() == 2 else (lambda idx: y[idx])
        step_loss = lambda idx: per_member_loss(forward(state, X[idx]), labels(idx))

    def detached():
        return {k: v.detach() for k, v in state.items()}

    def on_record(s):
        with torch.no_grad():
            return record(detached(), s)

    hist = fit(list(params.values()), step_loss, orders, steps=steps, lr=lr, momentum=momentum,
               weight_decay=weight_decay, lr_milestones=lr_milestones, record=record and on_record,
               record_at=record_at, progress=progress, shape=(n,))
    return detached(), hist
