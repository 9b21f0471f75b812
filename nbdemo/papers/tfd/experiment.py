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

from nbdemo.claims.verdict import ours
from nbdemo.ml.data import DATASETS, load
from nbdemo.ml.train import train
from nbdemo.papers.tfd.metrics import feature_grads, first_phase


def data(dataset, n_eval, seed, device):
    """The training split on the device, and a fixed, balanced evaluation subset of it (n_eval // k per class), on
    which every TFD curve is measured so that it shows the network and not batch noise. Returns X, y, Xe, ye, k."""
    k = DATASETS[dataset][1]
    X, y = load(dataset, device=device)
    Xe, ye = load(dataset, n_per_class=n_eval // k, device=device, seed=seed)
    print(f"{dataset}: {len(X)} training samples of dimension {X.shape[1]}, {k} classes; evaluation subset {len(Xe)}")
    return X, y, Xe, ye, k


def eval_loss(model, Xe, ye):
    with torch.no_grad():
        return F.cross_entropy(model(Xe), ye).item()


def train_with_snapshots(model, X, y, Xe, ye, k, *, snapshot_every, record_every, **train_kw):
    """Train with SGD, recording the evaluation loss every `record_every` steps and a copy of the weights every
    `snapshot_every` steps. Returns (History, {step: state_dict}, Phase of the evaluation loss)."""
    if snapshot_every % record_every:
        raise ValueError(f"snapshot_every={snapshot_every} must be a multiple of record_every={record_every}")
    snapshots = {}

    def record(model, step):
        if step % snapshot_every == 0:
            snapshots[step] = copy.deepcopy(model.state_dict())
        return {"loss": eval_loss(model, Xe, ye)}

    hist = train(model, X, y, record=record, record_at=record_every, **train_kw)
    return hist, snapshots, first_phase(hist.steps, hist["loss"], k)


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
                   "'does not decrease significantly' / 'suddenly begins to decrease' (l.49) gives no size")


def drop_ratio(loss, n_classes):
    """The lowest recorded loss over the plateau level min(loss[0], ln k) of `first_phase`: the second phase is
    detected exactly when it is below 1 - DROP (0.9). NaN without records."""
    loss = np.asarray(loss, dtype=float)
    if not loss.size:
        return float("nan")
    return float(loss.min() / min(loss[0], math.log(n_classes)))


def require_first_phase(verdict, phase, loss, n_classes, steps, who="", kind="requirement"):
    """The two rows of every TFD notebook whose claim is about the first phase (requirements; in TFD-1, whose claim
    it is, checks): the loss drops within the budget (the second phase is detected: its lowest record is 10% below
    the plateau), and the first phase before that drop lasts at least 5% of the budget (its last step; NaN when the
    loss never drops). `who` prefixes the row names ("the plain MLP: ")."""
    add = verdict.require if kind == "requirement" else verdict.check
    ratio = drop_ratio(loss, n_classes)
    add(f"{who}the loss drops within the budget", ratio, "<", 1 - DROP, source=DROP_SOURCE,
        shown=f"lowest loss / plateau = {ratio:.3g}", expected=f"< {1 - DROP:g} (a {DROP:.0%} drop)")
    add(f"{who}the first phase lasts at least 5% of the budget", phase.last if phase.ended else float("nan"), ">=",
        steps // 20, source=ours("a first phase long enough to measure across (5% of the budget); the paper gives "
                                  "no minimum length"),
        shown=f"0-{phase.last}, drop from {phase.second}" if phase.ended else f"no drop in {steps} steps",
        expected=f"last step >= {steps // 20}")


def mark_phase(axes, phase, color="k"):
    """Shade the first phase (steps 0 … last) on each of `axes`, and dash the first step of the second phase."""
    for ax in axes:
        ax.axvspan(0, phase.last, color=color, alpha=0.07, lw=0)
        if phase.ended:
            ax.axvline(phase.second, color=color, ls="--", lw=0.8)
