"""The steps that the TFD notebooks share: data, training with weight snapshots, per-sample terms, the phase row.

The quantities themselves are pure functions in `nbdemo.papers.tfd.metrics`; this module only runs them the one way every
TFD notebook needs, so that a notebook holds what is particular to its claim.
"""
import copy
import inspect
import math

import numpy as np
import torch
import torch.nn.functional as F

from nbdemo.claims.verdict import alt, ours
from nbdemo.ml.data import DATASETS, load
from nbdemo.ml.train import train
from nbdemo.papers.tfd.metrics import feature_grads, first_phase, trend


def data(dataset, n_eval, seed, device, shuffle_labels=False):
    """The training split on the device, and a fixed, balanced evaluation subset of it (n_eval // k per class), on
    which every TFD curve is measured so that it shows the network and not batch noise. Returns X, y, Xe, ye, k.

    shuffle_labels (the negative control of TFD-1…5): the training labels are permuted (seeded by `seed`), so that no
    category shares features; the evaluation subset is then a balanced subset of the relabelled training set, each
    sample with the label it is trained on."""
    k = DATASETS[dataset][1]
    X, y = load(dataset, device=device)
    if shuffle_labels:
        g = torch.Generator().manual_seed(seed)
        y = y[torch.randperm(len(y), generator=g).to(y.device)]
        order = torch.randperm(len(y), generator=g).to(y.device)
        keep = torch.cat([order[y[order] == c][:n_eval // k] for c in range(k)])
        Xe, ye = X[keep], y[keep]
    else:
        Xe, ye = load(dataset, n_per_class=n_eval // k, device=device, seed=seed)
    print(f"{dataset}: {len(X)} training samples of dimension {X.shape[1]}, {k} classes"
          f"{' (labels shuffled)' if shuffle_labels else ''}; evaluation subset {len(Xe)}")
    return X, y, Xe, ye, k


def eval_loss(model, Xe, ye):
    with torch.no_grad():
        return F.cross_entropy(model(Xe), ye).item()


def train_with_snapshots(model, X, y, Xe, ye, k, snapshot_every, record_every, **train_kw):
    """Train with SGD, recording the evaluation loss every `record_every` steps and a copy of the weights every
    `snapshot_every` steps. Returns (History, {step: state_dict}, Phase of the evaluation loss, the steps of the
    snapshots inside the first phase as a tuple), and prints the phases and those steps."""
    if snapshot_every % record_every:
        raise ValueError(f"snapshot_every={snapshot_every} must be a multiple of record_every={record_every}")
    snapshots = {}

    def record(model, step):
        if step % snapshot_every == 0:
            snapshots[step] = copy.deepcopy(model.state_dict())
        return {"loss": eval_loss(model, Xe, ye)}

    hist = train(model, X, y, record=record, record_at=record_every, **train_kw)
    phase = first_phase(hist.steps, hist["loss"], k)
    ts = snapshots_in(snapshots, phase)
    print(phase_text(phase) + f"; snapshots in the first phase: {list(ts)}")
    return hist, snapshots, phase, ts


def snapshots_in(snapshots, phase):
    """The steps of the snapshots that lie in the first phase (step <= phase.last), as a tuple."""
    return tuple(t for t in snapshots if t <= phase.last)


def per_sample_terms(probe, state, X, y):
    """Load `state` into `probe` and return, for each sample x, the terms of its own cross-entropy loss:
    feats [F^(0) = x, F^(1), …, F^(L-1)], fdot [Ḟ^(1), …, Ḟ^(L-1)] (gradients w.r.t. the hidden features), g
    [g^(1), …, g^(L)] (pre-activation gradients g^(l) = D^(l)Ḟ^(l); for l = L the logits' gradient), so that x's
    weight change under SGD is ΔW^(l)|x = -lr·g^(l) F^(l-1)ᵀ (list index l-1), and its logits. All detached."""
    probe.load_state_dict(state)
    feats, logits = probe.features(X)
    *fdot, gout = feature_grads(feats[1:], logits, y)
    g = [fd * (f > 0) for fd, f in zip(fdot, feats[1:])] + [gout]
    return {"feats": [f.detach() for f in feats], "fdot": fdot, "g": g, "logits": logits.detach()}


def phase_text(phase):
    if not phase.ended:
        return f"no drop within the budget: the first phase lasts all {phase.last} steps"
    return (f"first phase: steps 0-{phase.last}; second phase from step {phase.second} "
            f"(the loss is 10% below its plateau at step {phase.drop})")


# The size of a "significant" decrease of the loss: first_phase's default `drop` (10% below the plateau level).
DROP = inspect.signature(first_phase).parameters["drop"].default
DROP_SOURCE = ours(f"first_phase's significant decrease, {DROP:.0%} below the plateau min(loss_0, ln k); the paper's "
                   "'does not decrease significantly' / 'suddenly begins to decrease' (Sec. 3) gives no size")
# The windows at the ends of a series (`trend`, the end of the first phase): a quarter of its records.
QUARTER = inspect.signature(trend).parameters["share"].default
DROP_INNER = f"the first phase ends where the loss falls {DROP:.0%} below its plateau (ours)"
QUARTER_INNER = f"windows of {QUARTER:.0%} of the records at either end (ours)"


def inner(stat, drop=True, quarter=False):
    """The `inner=` of a verdict row (`Verdict.check`) whose statistic depends on thresholds of ours inside its metric:
    stat(drop=…, quarter=…) recomputed with the first phase's drop (DROP) and/or the end windows (QUARTER) 10% lower
    and 10% higher, the other at its own value."""
    out = {}
    if drop:
        out[DROP_INNER] = (stat(drop=DROP * 0.9, quarter=QUARTER), stat(drop=DROP * 1.1, quarter=QUARTER))
    if quarter:
        out[QUARTER_INNER] = (stat(drop=DROP, quarter=QUARTER * 0.9), stat(drop=DROP, quarter=QUARTER * 1.1))
    return out


def drop_ratio(loss, n_classes):
    """The lowest recorded loss over the plateau level min(loss[0], ln k) of `first_phase`: the second phase is
    detected exactly when it is below 1 - DROP (0.9). NaN without records, or where a record is not finite."""
    loss = np.asarray(loss, dtype=float)
    if not loss.size:
        return float("nan")
    return float(loss.min() / min(loss[0], math.log(n_classes)))


def require_first_phase(verdict, steps, loss, n_classes, budget, who="", kind="requirement", snapshots=None):
    """The rows of every TFD notebook whose claim is about the first phase (requirements; in TFD-1, whose claim it
    is, checks), from the evaluation loss recorded at `steps` in a training of `budget` steps: the loss drops within
    the budget (the second phase is detected: its lowest record is 10% below the plateau), and the first phase before
    that drop lasts at least 5% of the budget (its last step; NaN when the loss never drops), with its variants for
    the drop of ours (`inner`). With `snapshots` (the steps of weight snapshots inside the first phase), a third
    requirement: at least three of them. `who` prefixes the row names ("the plain MLP: ")."""
    add = verdict.require if kind == "requirement" else verdict.check
    ratio = drop_ratio(loss, n_classes)

    def last(drop=DROP, quarter=QUARTER):
        p = first_phase(steps, loss, n_classes, drop=drop)
        return p.last if p.ended else float("nan")

    phase = first_phase(steps, loss, n_classes)
    add(f"{who}the loss drops within the budget", ratio, "<", 1 - DROP, source=DROP_SOURCE,
        alternatives=drop_alternatives(ratio, "<"), shown=f"lowest loss / plateau = {ratio:.3g}", expected=f"< {1 - DROP:g} (a {DROP:.0%} drop)")
    add(f"{who}the first phase lasts at least 5% of the budget", last(), ">=", budget // 20,
        source=ours("a first phase long enough to measure across (5% of the budget); the paper gives no minimum "
                    "length"), inner=inner(last),
        shown=f"0-{phase.last}, drop from {phase.second}" if phase.ended else f"no drop in {budget} steps",
        expected=f"last step >= {budget // 20}")
    if snapshots is not None:
        verdict.require("snapshots inside the first phase", len(snapshots), ">=", 3,
                        source=ours("at least three snapshots, so that the first phase's weight changes span more "
                                    "than one step", no_alternative="a trend over the first phase needs three "
                                    "points at least; its length is already varied by the drop's variants"))


def drop_alternatives(ratio, op):
    """The `alternatives` of a row that compares `ratio` (`drop_ratio`) with the drop 1 - DROP: the same row with the
    drop 10% lower and higher, under the names of the drop's `inner` variants, so that the book reads every row that
    depends on the drop with the same variant at once."""
    return {f"{DROP_INNER}, {side}": alt(ratio, op, 1 - DROP * f, f"a threshold of ours inside the metric, {side}")
            for side, f in (("10% lower", 0.9), ("10% higher", 1.1))}


def phase_length(history, n_classes, budget, drop=DROP):
    """A run's first-phase length (TFD-6): its last step before the loss drops, or the whole `budget` where the loss
    never drops within the records; a run that diverged before its drop (its records stop at the first NaN) never
    escaped, so it too counts as the budget, not as the last step recorded."""
    p = first_phase(history.steps, history["loss"], n_classes, drop=drop)
    return p.last if p.ended else budget


def diverged_in_first_phase(history, n_classes, drop=DROP):
    """Whether a run's loss became NaN or inf at or before the last step of its first phase (a run that diverged
    before its drop: its first phase never ended)."""
    at = history.diverged_at
    if at is None:
        return False
    p = first_phase(history.steps, history["loss"], n_classes, drop=drop)
    return not p.ended or at <= p.last


def order_statistic(lengths):
    """The statistic of "the first phase is no longer along a sweep, and shorter at its end than at its start"
    (TFD-6): [L(x1) - L(x2), …, L(x_{n-1}) - L(x_n), L(x1) - L(x_n)], checked >= `order_threshold` (lengths are
    whole steps, so "shorter" is a difference of at least 1)."""
    return [a - b for a, b in zip(lengths, lengths[1:])] + [lengths[0] - lengths[-1]]


def order_threshold(lengths):
    return [0] * (len(lengths) - 1) + [1]


def mark_phase(axes, phase, color="k"):
    """Shade the first phase (steps 0 … last) on each of `axes`, and dash the first step of the second phase."""
    for ax in axes:
        ax.axvspan(0, phase.last, color=color, alpha=0.07, lw=0)
        if phase.ended:
            ax.axvline(phase.second, color=color, ls="--", lw=0.8)
