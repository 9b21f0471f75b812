"""Models and solvers for the progressive feedforward collapse (PFC) notebooks (Wang, Gai & Zhang).

- FCResNet: embedding -> `blocks` residual blocks x + ReLU(W x + b) -> linear classifier (MNIST row of Table I).
- ConvResNet: the convolutional ResNets of Table I, built from a dataset's stage list, with batch norm in the blocks
  and global average pooling before the classifier. The FC block carries a bias; §III-C's model block sigma(W x)
  (l.241 of the paper's text) has none.
- block_features: every measured block's features, collected with forward hooks that are removed after use.
- train_fc / train_recorded / require_terminal_phase: the training run of PFC-1..4, recording every layer's metrics
  and the training loss and error, and the verdict rows that say it reached the terminal phase; measure_layers
  gives the per-layer metrics and the effective depth (`effective_depth`, the layers Conjecture 1 covers);
  check_across_depth checks their order; terminal_phase_verdict and depth_order_verdict hold the verdict rows that
  PFC-1..4 share; plot_layers (Fig. 3) and plot_evolution (Fig. 2) draw the metrics.
- The MUFM and UFM of PFC-5/6 are in `nbdemo.mufm`.

Layout: rows are samples. X, H are (N, d); W is (K, d); the logits are H W^T. The paper's D x N matrices are the
transposes.
"""
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .data import DATASETS, load
from .metrics.pfc import layer_metrics, relative_depth
from .train import train
from .verdict import Verdict, ours, paper


class Block(nn.Module):
    """x + ReLU(W x + b): the residual block of §III-C, v_l(x) = sigma(W_l x) (l.241), with a bias added."""

    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return x + F.relu(self.lin(x))


class FCResNet(nn.Module):
    """Linear embedding to `width`, `blocks` residual blocks, linear classifier. Layer 0 is the embedding's output."""

    def __init__(self, in_dim, width, blocks, n_classes):
        super().__init__()
        self.embed = nn.Linear(in_dim, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(blocks)))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x.flatten(1))))


class ConvBlock(nn.Module):
    """x + ReLU(BN(conv3x3(x))), the convolutional form of the block as standard ResNets build it (batch norm after
    the convolution, which then needs no bias), as in the networks of Papyan et al. [13] whose setting the paper
    follows (l.325)."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(channels)

    def forward(self, x):
        return x + F.relu(self.bn(self.conv(x)))


# Table I: dataset -> (first-stage channels, [(spatial size, blocks) per stage]); channels double at each stage.
TABLE_I = {
    "fashion-mnist": (32, [(14, 5), (7, 4)]),
    "cifar10": (64, [(16, 2), (8, 3), (4, 4)]),
    "stl10": (64, [(48, 5), (24, 5), (12, 5), (6, 5)]),
    "cifar100": (64, [(32, 3), (16, 3), (8, 4), (4, 4)]),
}


class ConvResNet(nn.Module):
    """A conv ResNet of Table I. A strided conv3x3 + ReLU enters each stage (the stem enters the first); the blocks
    (`ConvBlock`) of a stage keep its shape. `self.blocks` is the last stage, whose features the PFC metrics compare
    (§IV-A); its input is layer 0. The classifier `self.head` takes the flattened last-stage features, averages each
    channel over its map (global average pooling, as standard ResNets do before their classifier) and is linear on
    the channel means. Without the pooling and the batch norm the last stage never became NCC separable, as the
    paper's architectures are chosen to be (l.323), and its within-class variability grew while the training set
    was fitted (the PFC-4 notebook gives the runs).

    in_shape: (C, H, W) of the images; width: channels of the first stage (Table I's value by default).
    """

    def __init__(self, in_shape, stages, n_classes, width):
        super().__init__()
        layers, c_in, size = [], in_shape[0], in_shape[1]
        for s, (out_size, n_blocks) in enumerate(stages):
            c_out = width * 2 ** s
            layers += [nn.Conv2d(c_in, c_out, 3, stride=size // out_size, padding=1), nn.ReLU()]
            layers += [ConvBlock(c_out) for _ in range(n_blocks)]
            c_in, size = c_out, out_size
        self.blocks = nn.Sequential(*layers[-stages[-1][1]:])
        self.trunk = nn.Sequential(*layers[:-stages[-1][1]])
        self.head = nn.Sequential(nn.Unflatten(1, (c_in, size, size)), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(c_in, n_classes))

    def forward(self, x):
        return self.head(self.blocks(self.trunk(x)).flatten(1))


@torch.no_grad()
def block_features(model, X, batch_size=1000):
    """[input of model.blocks[0], output of each block], each an (N, D) float32 tensor of flattened features.

    Collected by forward hooks on `model.blocks` (removed before returning), in eval mode, in chunks of `batch_size`.
    """
    per_layer = [[] for _ in range(len(model.blocks) + 1)]
    hooks = [model.blocks[0].register_forward_pre_hook(lambda m, inp: per_layer[0].append(inp[0].flatten(1)))]
    for l, block in enumerate(model.blocks, start=1):
        hooks.append(block.register_forward_hook(partial(lambda l, m, inp, out: per_layer[l].append(out.flatten(1)), l)))
    was_training = model.training
    model.eval()
    try:
        for chunk in X.split(batch_size):
            model(chunk)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    return [torch.cat(chunks) for chunks in per_layer]


# The paper's schedule (l.325): lr divided by 10 at epochs 117 and 233 of 350, as fractions of the run.
PAPER_MILESTONES = [117 / 350, 233 / 350]


def milestone_steps(steps, fractions):
    """lr milestones given as fractions of a run of `steps` steps -> the steps at which lr is divided by 10."""
    return [round(f * steps) for f in fractions]


def train_recorded(model, X, y, *, steps, lr_milestones, batch_size, record_every=None, **sgd):
    """Train `model` on (X, y) with cross-entropy and SGD (`nbdemo.train.train`; `sgd`: lr, momentum, weight_decay,
    seed, ...), lr divided by 10 at the fractions `lr_milestones` of the run. At step 0, at the end of the first
    epoch, every `record_every` steps (default: about 50 records in all) and at the end it records every layer's PFC
    metrics (`layer_metrics` of `block_features`) and, from the classifier `model.head` applied to the last block's
    features, the training set's mean cross-entropy ("train_loss") and its number of misclassified samples
    ("train_errors"): when the training error first reaches 0 and whether the loss still falls after that tell
    whether the run reached the terminal phase (`require_terminal_phase`).

    Returns (History, the final `block_features`, training accuracy).
    """
    first_epoch = max(1, len(X) // batch_size)
    every = record_every or max(1, steps // 50)
    record_at = [first_epoch, *range(0, steps + 1, every)]
    last = {}

    def head_fit(feats):
        with torch.no_grad():
            logits = model.head(feats[-1])
        return float(F.cross_entropy(logits.double(), y)), int((logits.argmax(1) != y).sum())

    def record(m, s):
        last["feats"] = block_features(m, X)
        loss, errors = head_fit(last["feats"])
        return {**layer_metrics(last["feats"], y), "train_loss": loss, "train_errors": errors}

    hist = train(model, X, y, steps=steps, batch_size=batch_size, lr_milestones=milestone_steps(steps, lr_milestones),
                 record=record, record_at=record_at, **sgd)
    feats = block_features(model, X) if hist.diverged_at else last["feats"]  # a diverged run stops before its last record
    acc = 1 - head_fit(feats)[1] / len(y)
    loss = f"final batch loss {hist.loss[-1]:.4f}" if len(hist.loss) else "no training step"
    print(f"{loss}, training accuracy {acc:.4f}")
    return hist, feats, acc


def train_fc(dataset, n_per_class, width, blocks, *, device, seed, **train_kwargs):
    """The run of PFC-1..3: an `FCResNet` of `blocks` blocks, `width` wide, trained by `train_recorded`
    (`train_kwargs`: steps, lr_milestones, batch_size, lr, momentum, weight_decay, record_every) on a balanced
    sample of `dataset`, `n_per_class` per class. Returns (X, y, History, the final `block_features`, training
    accuracy), having said in a line what it trained on."""
    X, y = load(dataset, n_per_class=n_per_class, device=device, seed=seed)
    k = DATASETS[dataset][1]
    print(f"{dataset}: {len(X)} training samples of dimension {X.shape[1]}, {k} classes")
    model = FCResNet(X.shape[1], width, blocks, k).to(device)
    return X, y, *train_recorded(model, X, y, seed=seed, **train_kwargs)


# The small error the paper allows in NCC separability (l.90), for which it gives no value: 1% of the training samples.
NCC_EPS = 0.01


def ncc_correct(metrics, n):
    """Each layer's number of NCC-correct samples out of `n`: PFC3 (a share) as the count it is."""
    return np.rint(np.asarray(metrics["PFC3"], dtype=float) * n).astype(int)


def effective_depth(correct, n):
    """The effective depth (l.90) from each layer's NCC-correct count of the `n` samples: the paper's minimal layer
    whose NCC error is at most a small epsilon, with epsilon the last layer's error, i.e. the first layer whose count
    reaches the last layer's. Where the last layer is not NCC separable (error > NCC_EPS, e.g. the untrained net)
    the net has not reached an effective depth and every layer is before it: the last layer's index."""
    correct = np.asarray(correct)
    if n - correct[-1] > NCC_EPS * n:
        return len(correct) - 1
    return int(np.argmax(correct >= correct[-1]))


def terminal_phase(hist):
    """(step at which the training error first reached 0, or None; training loss there; training loss at the end)
    from the records of `train_recorded`."""
    errors, loss = hist["train_errors"], hist["train_loss"]
    zero = np.flatnonzero(errors == 0)
    if len(zero) == 0:
        return None, float("nan"), float(loss[-1])
    return hist.steps[zero[0]], float(loss[zero[0]]), float(loss[-1])


def require_terminal_phase(v, hist, n):
    """Add to Verdict `v` the requirements that the run of `train_recorded` (on `n` training samples) reached the
    terminal phase of training, the regime of Conjecture 1 (l.188), and that its last layer is NCC separable, as the
    paper's are (l.323):
    - zero training error at the end;
    - the terminal phase: the training error reached 0 at a record before the end, and the training loss fell after
      that (statistic: the loss there minus the loss at the end; NaN, which fails, without such a record);
    - the last layer's NCC error (1 - PFC3) at most NCC_EPS.
    The untrained net (0 steps, the control) fails all three."""
    errors = int(hist["train_errors"][-1])
    start, loss0, loss1 = terminal_phase(hist)
    fall = loss0 - loss1 if start is not None and start < hist.steps[-1] else float("nan")
    wrong = n - int(ncc_correct({"PFC3": hist["PFC3"][-1]}, n)[-1])
    v.require("training error 0", errors, "==", 0, shown=f"{errors} of {n} misclassified",
              expected="0 misclassified", source=ours(
                  "the terminal phase of training (l.188) is the phase after the training error reaches zero, in "
                  "Papyan et al. [13], whose term the paper takes over"))
    v.require("terminal phase: loss still falling after zero error", fall, ">", 0,
              shown=("never at zero error" if start is None else "zero error only at the end" if np.isnan(fall)
                     else f"zero error from step {start}; loss {loss0:.3g} -> {loss1:.3g}"),
              expected="zero error before the end, loss falls after (> 0)", source=ours(
                  "in the terminal phase training goes on after zero error and the loss keeps falling (Papyan et "
                  "al. [13]); any fall counts"))
    v.require("last layer NCC-separable: NCC error", wrong / n, "<=", NCC_EPS, shown=f"{wrong / n:.3f} ({wrong} of {n})",
              source=ours("the paper's last layers are NCC separable (l.323) up to a small error it does not "
                          "quantify (l.90): 1% of the training samples"))


def measure_layers(feats, y):
    """Every layer's PFC metrics (`layer_metrics`) and relative position (`relative_depth`), printed one line per
    layer, and the effective depth L0 (`effective_depth`), printed after them. Returns (metrics, pos, L0)."""
    metrics, pos = layer_metrics(feats, y), relative_depth(feats)
    print("layer  position     PFC1    PFC2   PFC3")
    for l in range(len(pos)):
        print(f"{l:5d}  {pos[l]:8.3f}  {metrics['PFC1'][l]:7.4f} {metrics['PFC2'][l]:7.4f} {metrics['PFC3'][l]:6.3f}")
    L0 = effective_depth(ncc_correct(metrics, len(y)), len(y))
    print(f"effective depth: layer {L0} of {len(pos) - 1} (the first layer as NCC-accurate as the last)")
    return metrics, pos, L0


# Conjecture 1's three orders across depth: metric, row, comparison of each block's change with 0, line (l.190-194).
ORDERS = [("PFC1", "PFC1 decreases across depth", ">", 190), ("PFC2", "PFC2 decreases across depth", ">", 192),
          ("PFC3", "NCC-correct samples never fewer across depth", ">=", 194)]


def depth_changes(metrics, n):
    """Each block's change in the direction Conjecture 1 predicts: the decrease of PFC1 and of PFC2, and the change
    in the number of NCC-correct samples (of `n`). dict name -> (L,) array; the conjecture wants them > 0, > 0, >= 0."""
    changes = {name: -np.diff(np.asarray(metrics[name], dtype=float)) for name in ("PFC1", "PFC2")}
    changes["PFC3"] = np.diff(ncc_correct(metrics, n)).astype(float)
    return changes


def check_across_depth(v, metrics, n, prefix=""):
    """Conjecture 1's order across depth (l.188-194) as checks of Verdict `v`, on the layers before the effective
    depth L0 (`effective_depth`; layers 0..L0, the blocks 1..L0): PFC1 and PFC2 go down at every one of these
    blocks and the number of NCC-correct samples (PFC3 as a count of the `n`) never goes down (statistic: each
    block's change, `depth_changes`). With no block before L0 (L0 = 0) the statistic is NaN, which fails. The
    blocks after L0, outside the conjecture, are notes. `prefix` starts every row's name. Returns L0."""
    correct = ncc_correct(metrics, n)
    blocks, L0 = len(correct) - 1, effective_depth(correct, n)
    separable = n - correct[-1] <= NCC_EPS * n
    v.note(f"{prefix}effective depth L0 (first layer as NCC-accurate as the last)", L0,
           shown=f"layer {L0} of {blocks}" if separable else f"none: last layer not NCC separable, all {blocks} blocks")
    changes = depth_changes(metrics, n)
    for name, title, op, line in ORDERS:
        before, after = changes[name][:L0], changes[name][L0:]
        ends = (f"{correct[0]} -> {correct[L0]} of {n}" if name == "PFC3"
                else f"{metrics[name][0]:.3g} -> {metrics[name][L0]:.3g}")
        v.check(f"{prefix}{title} (blocks 1..L0)", before if L0 else [float("nan")], op, 0,
                expected=f"{'no drop' if name == 'PFC3' else 'down'} at every block before effective depth",
                shown=f"{int(np.sum(holds_each(before, op)))}/{L0} ({ends})" if L0 else "no block before it",
                source=paper(f"Conjecture 1 ({name}), before effective depth", line))
        if len(after):
            v.note(f"{prefix}{name}: blocks after effective depth in order", int(np.sum(holds_each(after, op))),
                   shown=f"{int(np.sum(holds_each(after, op)))}/{len(after)}")
    return L0


def holds_each(x, op):
    """Which numbers of x satisfy `op 0` (op: ">" or ">=")."""
    return np.asarray(x) > 0 if op == ">" else np.asarray(x) >= 0


def pairs_in_order(metrics, n, L0):
    """How many of the 3 L0 (metric, block) pairs of blocks 1..L0 are in Conjecture 1's order (`depth_changes`)."""
    changes = depth_changes(metrics, n)
    return sum(int(np.sum(holds_each(changes[name][:L0], op))) for name, _, op, _ in ORDERS)


def terminal_phase_verdict(claim, hist, n):
    """A Verdict for `claim` opened with the requirements that every run of PFC-1..4 shares: the training stayed
    finite (`Verdict.require_finite`) and reached the terminal phase with an NCC-separable last layer
    (`require_terminal_phase`, on `n` training samples)."""
    v = Verdict(claim)
    v.require_finite(hist)
    require_terminal_phase(v, hist, n)
    return v


def depth_order_verdict(claim, hist, metrics, n):
    """The verdict of PFC-1 and PFC-4, the order across depth at the end of training: `terminal_phase_verdict`,
    Conjecture 1's orders on the layers' final `metrics` (`check_across_depth`), and two notes on the size of the
    collapse, the last layer's PFC1 (0 at full collapse) and its ratio to layer 0's."""
    v = terminal_phase_verdict(claim, hist, n)
    check_across_depth(v, metrics, n)
    v.note("last layer's PFC1 (0 at full collapse)", metrics["PFC1"][-1])
    v.note("PFC1 of the last layer / of layer 0", metrics["PFC1"][-1] / metrics["PFC1"][0])
    return v


METRIC_TITLES = {"PFC1": "within-class variability (PFC1)", "PFC2": "distance to a simplex ETF (PFC2)",
                 "PFC3": "NCC accuracy (PFC3)"}
METRIC_LABELS = {"PFC1": r"$\mathrm{tr}(\Sigma_W)\,/\,\mathrm{tr}(\Sigma_B)$",
                 "PFC2": r"$\|\widetilde{H}^{\top}\widetilde{H}\,/\,\|\widetilde{H}^{\top}\widetilde{H}\|_F - E\|_F$",
                 "PFC3": "NCC accuracy"}
# The one number the paper gives for a plotted metric: the last layer is NCC separable, PFC3 "collapses to 1" (l.323,
# l.347); PFC1 and PFC2 are shown in its figures only.
PAPER_PFC3 = dict(y=1, color="grey", ls="--", lw=0.9, label="paper: PFC3 = 1 (last layer)")
FIGSIZE = (9, 3.2)  # three panels in the book's column (at most ~9 inches wide)


def _log_axis(ax):
    """Log scale for PFC1 with plain numbers at the ticks: every tick within a decade (where a range of less than a
    decade has only minor ticks), else the powers of 10 and the minor ticks at 2 and 5 times them."""
    from matplotlib.ticker import FuncFormatter

    def minor(v, _):
        lo, hi = ax.get_ylim()
        mantissa = round(v / 10 ** np.floor(np.log10(v) + 1e-9))
        return f"{v:.3g}" if hi / lo < 10 or mantissa in (2, 5) else ""

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))


def plot_layers(pos, metrics, ts=None, curve=None, L0=None):
    """Fig. 3 in a figure of three panels, one per metric: the layers' metrics (green points) against relative
    position and, if given, the geodesic prediction `curve` at positions `ts` (blue), the effective depth L0 (a
    dotted line) and the paper's PFC3 of 1 (dashed grey). PFC1 on a log scale, as in the paper. Returns the figure."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=FIGSIZE)
    for ax, name in zip(axes, ["PFC1", "PFC2", "PFC3"]):
        if curve is not None:
            ax.plot(ts, curve[name], color="C0", label="geodesic prediction")
        ax.plot(pos, metrics[name], "o-", color="C2", ms=4, label="layers")
        if L0 is not None:
            ax.axvline(pos[L0], color="gray", ls=":", label="effective depth")
        ax.set(xlabel="relative position", ylabel=METRIC_LABELS[name])
        ax.set_title(METRIC_TITLES[name], fontsize=9)
    _log_axis(axes[0])
    axes[0].legend(fontsize=7)
    paper_line = axes[2].axhline(**PAPER_PFC3)
    axes[2].legend(handles=[paper_line], fontsize=7)
    fig.tight_layout()
    return fig


def plot_evolution(hist):
    """Fig. 2 in a figure of three panels: each layer's metrics, as recorded by `train_recorded`, against the
    training step, coloured from layer 0 (dark) to the last block (light, a colour bar), with the paper's PFC3 of 1
    (dashed grey). PFC1 on a log scale, as in the paper. Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize

    steps = np.array(hist.steps)
    layers = hist["PFC1"].shape[1]
    colour = ScalarMappable(Normalize(0, layers - 1), plt.cm.viridis)
    fig, axes = plt.subplots(1, 3, figsize=FIGSIZE, layout="constrained")
    for ax, name in zip(axes, ["PFC1", "PFC2", "PFC3"]):
        values = hist[name]  # (records, layers)
        for l in range(layers):
            ax.plot(steps, values[:, l], color=colour.to_rgba(l), lw=1.2)
        ax.set(xlabel="step", ylabel=METRIC_LABELS[name])
        ax.set_title(METRIC_TITLES[name], fontsize=9)
    _log_axis(axes[0])
    axes[2].axhline(**PAPER_PFC3)
    axes[2].legend(fontsize=7)
    fig.colorbar(colour, ax=axes, label="layer (0: input features)", fraction=0.03, pad=0.02)
    return fig
