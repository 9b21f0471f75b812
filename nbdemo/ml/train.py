"""One training loop: device-resident data, randperm batches, SGD, recording on a schedule."""
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from nbdemo.ml import catalog
from nbdemo.ml.data import dry_run


@dataclass
class History:
    """What a run recorded. `loss[s]` is the batch loss of update s+1; `records[name][i]` was taken at `steps[i]`
    (the number of updates done). `diverged_at` is the update whose loss was NaN or inf; training stopped there.
    An ensemble's loss has one column per member and `diverged_at` is its first member's divergence; the other
    members train on (see `fit`), and `member(i)` is member i's own History."""
    steps: list = field(default_factory=list)
    loss: np.ndarray = None
    records: dict = field(default_factory=dict)
    diverged_at: int = None
    wall_s: float = 0.0

    def add(self, step, values):
        self.steps.append(step)
        for k, v in values.items():
            self.records.setdefault(k, []).append(v)

    def __getitem__(self, name):
        return np.asarray(self.records[name])

    def member(self, i):
        """Member i of an ensemble's History: its loss column, its entry of every record, its own diverged_at."""
        loss = self.loss[:, i]
        bad = np.flatnonzero(~np.isfinite(loss))
        return History(list(self.steps), loss, {k: [np.asarray(v)[i] for v in vs] for k, vs in self.records.items()},
                       int(bad[0]) + 1 if len(bad) else None, self.wall_s)


def loss_fn(kind):
    """"ce": mean cross-entropy; "mse": mean over samples of the squared error against one-hot targets."""
    if kind == "ce":
        return F.cross_entropy
    if kind == "mse":
        return lambda out, y: ((out - F.one_hot(y, out.shape[-1]).to(out.dtype)) ** 2).sum(-1).mean()
    raise ValueError(f"loss={kind!r}: choose 'ce' or 'mse'")


def batches(n, batch_size, steps, seed, device):
    """Yield `steps` index tensors: consecutive slices of a fresh seeded randperm each epoch. For the full batch
    (batch_size None or >= n) yield slice(None), so that X[batch] is X itself rather than a copy."""
    if batch_size is None or batch_size >= n:
        for _ in range(steps):
            yield slice(None)
        return
    g = torch.Generator().manual_seed(seed)
    per_epoch = n // batch_size
    for s in range(steps):
        if s % per_epoch == 0:
            perm = torch.randperm(n, generator=g).to(device)
        i = s % per_epoch
        yield perm[i * batch_size:(i + 1) * batch_size]


def schedule(steps, record_at):
    """The steps at which to record: `record_at` (an iterable, or an int = every that many), always with 0 and `steps`."""
    if record_at is None:
        record_at = max(1, steps // 100)
    if isinstance(record_at, int):
        record_at = range(0, steps + 1, record_at)
    return sorted({0, steps, *(s for s in record_at if 0 <= s <= steps)})


PRECISIONS = {name: getattr(torch, name) for name in catalog.PRECISIONS}


def lr_at(step, lr, milestones):
    return lr * 0.1 ** sum(step >= m for m in milestones)


def train(model, X, y, *, steps, lr, batch_size=100, momentum=0.0, weight_decay=0.0, lr_milestones=(), seed=0,
          loss="ce", record=None, record_at=None, progress=True, compile=False, precision="float32"):
    """Train `model` in place with SGD on device-resident (X, y); return its History.

    record(model, step) -> dict of numbers/arrays is called at the steps of `schedule(steps, record_at)`.
    lr is multiplied by 0.1 at each step in `lr_milestones`. A non-finite loss stops training
    (History.diverged_at). In a dry run (the runner's shape check) only two steps are taken.
    Optional speed-ups for the conv nets: compile=True trains through `torch.compile(model)`;
    precision="bfloat16" runs the training forward pass under bf16 autocast. The loss, the weights and
    everything `record` computes stay in float32.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r}: choose one of {', '.join(PRECISIONS)}")
    criterion, forward = loss_fn(loss), torch.compile(model) if compile else model

    def step_loss(idx):
        with torch.autocast(X.device.type, dtype=PRECISIONS[precision], enabled=precision != "float32"):
            out = forward(X[idx])
        return criterion(out.float(), y[idx])

    def on_record(s):
        values = record(model, s)
        model.train()
        return values

    return fit(list(model.parameters()), step_loss, batches(len(X), batch_size, steps, seed, X.device),
               steps=steps, lr=lr, momentum=momentum, weight_decay=weight_decay, lr_milestones=lr_milestones,
               record=record and on_record, record_at=record_at, progress=progress)


def sgd_step(params, momentum, weight_decay):
    """`torch.optim.SGD(params, momentum=momentum, weight_decay=weight_decay, foreach=True).step` as a function of
    the step's lr: the same foreach operations, so the same numbers bit for bit (tested), without the optimizer's
    bookkeeping, which costs a small net's step on the CPU about as much as the update itself. Parameters without a
    gradient are left as they are; a momentum buffer starts as the first gradient."""
    buffers = [None] * len(params)

    @torch.no_grad()
    def step(lr):
        live = [i for i, p in enumerate(params) if p.grad is not None]
        if not live:
            return
        ps, grads = [params[i] for i in live], [params[i].grad for i in live]
        if weight_decay != 0:
            grads = torch._foreach_add(grads, ps, alpha=weight_decay)
        if momentum != 0:
            held = [j for j, i in enumerate(live) if buffers[i] is not None]
            if held:
                bufs = [buffers[live[j]] for j in held]
                torch._foreach_mul_(bufs, momentum)
                torch._foreach_add_(bufs, [grads[j] for j in held], alpha=1.0)
            for j, i in enumerate(live):
                if buffers[i] is None:
                    buffers[i] = grads[j].detach().clone()
            grads = [buffers[i] for i in live]
        torch._foreach_add_(ps, grads, alpha=-lr)

    return step


def fit(params, step_loss, batch_iter, *, steps, lr, momentum, weight_decay, lr_milestones, record, record_at,
        progress, shape=()):
    """The SGD loop behind `train` and `ensemble.train_ensemble`.

    step_loss(batch) returns the loss, of `shape` (one entry per ensemble member; their sum is minimised).
    An ensemble trains on while any member's loss is finite (the members are independent); a single run stops at
    its first non-finite loss, which its History.loss leaves out. weight_decay may be a tensor of `shape`: one
    coefficient per member.
    """
    if steps < 0:
        raise ValueError(f"steps={steps} must be >= 0")
    steps = min(steps, 2) if dry_run() else steps
    decay = torch.as_tensor(weight_decay, dtype=params[0].dtype, device=params[0].device)
    step_sgd = sgd_step(params, momentum, 0.0 if decay.dim() else weight_decay)
    when = set(schedule(steps, record_at))
    hist, losses = History(), torch.zeros(steps, *shape, device=params[0].device)
    t0, done = time.perf_counter(), 0
    if record:
        hist.add(0, record(0))
    bar = tqdm(total=steps, disable=not progress or steps < 2, mininterval=5, desc="train", leave=False)
    for s, batch in zip(range(1, steps + 1), batch_iter):
        batch_loss = step_loss(batch)
        for p in params:
            p.grad = None
        batch_loss.sum().backward()
        if decay.dim():  # per member: what SGD's weight_decay adds to the gradient, decay_i * p_i
            with torch.no_grad():
                for p in params:
                    p.grad.add_(p * decay.view(-1, *[1] * (p.dim() - 1)))
        step_sgd(lr_at(s - 1, lr, lr_milestones))
        losses[s - 1] = batch_loss.detach()
        bar.update()
        done = s
        if s in when or s % 100 == 0:
            bad = ~torch.isfinite(losses[:s].reshape(s, -1))  # (steps so far, members)
            if bad.any():
                hist.diverged_at = int(bad.any(1).nonzero()[0]) + 1
                if bad.any(0).all():
                    break
            if record and s in when:
                hist.add(s, record(s))
    bar.close()
    hist.loss = losses[:hist.diverged_at - 1 if hist.diverged_at and not shape else done].cpu().numpy()
    hist.wall_s = time.perf_counter() - t0
    return hist
