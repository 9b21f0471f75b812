"""The training runs of PFC-1..4 (Wang, Gai & Zhang).

- train_fc / train_recorded: the training run, recording every layer's metrics (on the features as the classifier
  reads them, `classifier_features` of the model) and the training loss and error;
- measure_layers gives the per-layer metrics, the relative positions and the effective depth.

The verdict rows are in `.regime` (the regime's requirements, the effective depth), `.orders` (Conjecture 1's order)
and `.prediction` (PFC-3's geodesic); the models in `.resnets`, the figures in `.figures`, the MUFM and UFM of
PFC-5/6 in `.ufm`.
"""

import numpy as np
import torch
import torch.nn.functional as F

from nbdemo.ml.data import DATASETS, load
from nbdemo.ml.train import train
from nbdemo.papers.pfc.metrics import layer_metrics, relative_depth
from nbdemo.papers.pfc.regime import NCC_EPS, effective_depth, ncc_correct
from nbdemo.papers.pfc.resnets import FCResNet, block_features

# The paper's schedule (§IV-A): lr divided by 10 at epochs 117 and 233 of 350, as fractions of the run.
PAPER_MILESTONES = [117 / 350, 233 / 350]


def milestone_steps(steps, fractions):
    """lr milestones given as fractions of a run of `steps` steps -> the steps at which lr is divided by 10."""
    return [round(f * steps) for f in fractions]


def first_epoch_step(n, batch_size):
    """The step that `train_recorded` records as the end of the first epoch on `n` samples in batches of
    `batch_size`: n // batch_size, at least 1."""
    return max(1, n // batch_size)


def early_steps(until, count):
    """`count` steps log-spaced from step 1 to step `until` (rounded, without repeats): records early in training,
    where an order may form before the first of the evenly spaced records."""
    return sorted({int(s) for s in np.rint(np.geomspace(1, until, count))}) if count and until >= 1 else []


def train_recorded(model, X, y, *, steps, lr_milestones, batch_size, record_every=None, record_early=0, **sgd):
    """Train `model` on (X, y) with cross-entropy and SGD (`nbdemo.ml.train.train`; `sgd`: lr,
    momentum, weight_decay, seed, ...), lr divided by 10 at the fractions `lr_milestones` of the run. At step 0, at
    the end of the first epoch, every `record_every` steps (default: about 50 records in all), at `record_early`
    steps log-spaced up to the first of those (`early_steps`) and at the end it
    records every layer's PFC metrics (`layer_metrics` of `block_features`, read as the classifier reads the last
    layer: `model.classifier_features`) and, from the classifier `model.head` applied to the last block's features,
    the training set's mean cross-entropy ("train_loss") and its number of misclassified samples ("train_errors"):
    when the training error first reaches 0 and whether the loss still falls after that tell whether the run reached
    the terminal phase (`nbdemo.papers.pfc.regime.require_terminal_phase`).

    Returns (History, the final `block_features`, training accuracy).
    """
    first_epoch = first_epoch_step(len(X), batch_size)
    every = record_every or max(1, steps // 50)
    record_at = [first_epoch, *range(0, steps + 1, every), *early_steps(min(every, steps), record_early)]
    last = {}

    def head_fit(feats):
        with torch.no_grad():
            logits = model.head(feats[-1])
        return float(F.cross_entropy(logits.double(), y)), int((logits.argmax(1) != y).sum())

    def record(m, s):
        last["feats"] = block_features(m, X)
        loss, errors = head_fit(last["feats"])
        return {**layer_metrics(model.classifier_features(last["feats"]), y), "train_loss": loss,
                "train_errors": errors}

    hist = train(model, X, y, steps=steps, batch_size=batch_size,
                 lr_milestones=milestone_steps(steps, lr_milestones), record=record, record_at=record_at, **sgd)
    feats = block_features(model, X) if hist.diverged_at else last["feats"]  # a diverged run stops before its last record
    acc = 1 - head_fit(feats)[1] / len(y)
    loss = f"final batch loss {hist.loss[-1]:.4f}" if len(hist.loss) else "no training step"
    print(f"{loss}, training accuracy {acc:.4f}")
    return hist, feats, acc


def train_fc(dataset, n_per_class, width, blocks, *, device, seed, **train_kwargs):
    """The run of PFC-1..3: an `FCResNet` of `blocks` blocks, `width` wide, trained by `train_recorded`
    (`train_kwargs`: steps, lr_milestones, batch_size, lr, momentum, weight_decay, record_every, record_early) on a
    balanced sample of `dataset`, `n_per_class` per class. Returns (X, y, History, the final `block_features`, training
    accuracy), having said in a line what it trained on."""
    X, y = load(dataset, n_per_class=n_per_class, device=device, seed=seed)
    k = DATASETS[dataset][1]
    print(f"{dataset}: {len(X)} training samples of dimension {X.shape[1]}, {k} classes")
    model = FCResNet(X.shape[1], width, blocks, k).to(device)
    return X, y, *train_recorded(model, X, y, seed=seed, **train_kwargs)


def measure_layers(feats, y):
    """Every layer's PFC metrics (`layer_metrics`) and relative position (`relative_depth`), printed one line per
    layer, and the effective depth L0 (`nbdemo.papers.pfc.regime.effective_depth`, None where no layer is NCC
    separable), printed after them. Returns (metrics, pos, L0)."""
    metrics, pos = layer_metrics(feats, y), relative_depth(feats)
    print("layer  position     PFC1    PFC2   PFC3")
    for l in range(len(pos)):
        print(f"{l:5d}  {pos[l]:8.3f}  {metrics['PFC1'][l]:7.4f} {metrics['PFC2'][l]:7.4f} {metrics['PFC3'][l]:6.3f}")
    L0 = effective_depth(ncc_correct(metrics, len(y)), len(y))
    print(f"effective depth: {'none' if L0 is None else f'layer {L0}'} of {len(pos) - 1} "
          f"(the first layer with NCC error at most {NCC_EPS:.0%})")
    return metrics, pos, L0
