"""The training runs of PFC-1..4 (Wang, Gai & Zhang) and the verdict rows they share.

- train_fc / train_recorded: the training run, recording every layer's metrics and the training loss and error;
  `shuffled` permutes the labels for the negative control;
- require_terminal_phase / require_regime: the verdict rows that say the run reached the regime of Conjecture 1
  (the terminal phase, a collapsed last layer, an effective depth equal to the depth);
- measure_layers gives the per-layer metrics and the effective depth (`effective_depth`, the layers Conjecture 1
  covers); check_across_depth checks their order, check_order_trend (with order_trend) how it emerges over training;
  terminal_phase_verdict and depth_order_verdict hold the verdict rows that PFC-1..4 share.

The models are in `nbdemo.papers.pfc.resnets`, the figures in `.figures`, the MUFM and UFM of PFC-5/6 in `.ufm`.
"""
from contextlib import contextmanager

import numpy as np
import torch
import torch.nn.functional as F

from nbdemo.claims.verdict import Verdict, ours, paper
from nbdemo.ml.data import DATASETS, load
from nbdemo.ml.train import train
from nbdemo.papers.pfc.metrics import layer_metrics, relative_depth
from nbdemo.papers.pfc.resnets import FCResNet, block_features

# The paper's schedule (§IV-A): lr divided by 10 at epochs 117 and 233 of 350, as fractions of the run.
PAPER_MILESTONES = [117 / 350, 233 / 350]


def milestone_steps(steps, fractions):
    """lr milestones given as fractions of a run of `steps` steps -> the steps at which lr is divided by 10."""
    return [round(f * steps) for f in fractions]


@contextmanager
def one_cpu_thread():
    """torch on one CPU thread inside the block (the thread count restored after it). The nets of the default profiles
    are small: their matrix products and convolutions are too small to share between two threads, and with the
    kernels' OpenMP threads sleeping at barriers (the runner's OMP_WAIT_POLICY=PASSIVE) a step of the FC ResNet took
    17.8 ms on two threads against 6.7 ms on one, a step of the conv ResNet 74 ms against 47 ms (2-core machine,
    alone). Work on a GPU is not affected."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def train_recorded(model, X, y, *, steps, lr_milestones, batch_size, record_every=None, **sgd):
    """Train `model` on (X, y) with cross-entropy and SGD (`nbdemo.ml.train.train`, on `one_cpu_thread`; `sgd`: lr,
    momentum, weight_decay, seed, ...), lr divided by 10 at the fractions `lr_milestones` of the run. At step 0, at
    the end of the first epoch, every `record_every` steps (default: about 50 records in all) and at the end it
    records every layer's PFC metrics (`layer_metrics` of `block_features`) and, from the classifier `model.head`
    applied to the last block's features, the training set's mean cross-entropy ("train_loss") and its number of
    misclassified samples ("train_errors"): when the training error first reaches 0 and whether the loss still falls
    after that tell whether the run reached the terminal phase (`require_terminal_phase`).

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

    with one_cpu_thread():
        hist = train(model, X, y, steps=steps, batch_size=batch_size,
                     lr_milestones=milestone_steps(steps, lr_milestones), record=record, record_at=record_at, **sgd)
    feats = block_features(model, X) if hist.diverged_at else last["feats"]  # a diverged run stops before its last record
    acc = 1 - head_fit(feats)[1] / len(y)
    loss = f"final batch loss {hist.loss[-1]:.4f}" if len(hist.loss) else "no training step"
    print(f"{loss}, training accuracy {acc:.4f}")
    return hist, feats, acc


def shuffled(y, seed):
    """The labels `y` permuted across the samples (a generator seeded by `seed`): every class keeps its size, but its
    samples no longer share anything in the data. The negative control of PFC-1..4."""
    return y[torch.randperm(len(y), generator=torch.Generator().manual_seed(seed)).to(y.device)]


def train_fc(dataset, n_per_class, width, blocks, *, device, seed, shuffle_labels=False, **train_kwargs):
    """The run of PFC-1..3: an `FCResNet` of `blocks` blocks, `width` wide, trained by `train_recorded`
    (`train_kwargs`: steps, lr_milestones, batch_size, lr, momentum, weight_decay, record_every) on a balanced
    sample of `dataset`, `n_per_class` per class, with its labels `shuffled` if `shuffle_labels`. Returns (X, y,
    History, the final `block_features`, training accuracy), having said in a line what it trained on."""
    X, y = load(dataset, n_per_class=n_per_class, device=device, seed=seed)
    y = shuffled(y, seed) if shuffle_labels else y
    k = DATASETS[dataset][1]
    print(f"{dataset}: {len(X)} training samples of dimension {X.shape[1]}, {k} classes"
          + (", labels shuffled" if shuffle_labels else ""))
    model = FCResNet(X.shape[1], width, blocks, k).to(device)
    return X, y, *train_recorded(model, X, y, seed=seed, **train_kwargs)


# The small error the paper allows in NCC separability (§II-A), which it does not quantify: 1% of the training samples.
NCC_EPS = 0.01


def ncc_correct(metrics, n):
    """Each layer's number of NCC-correct samples out of `n`: PFC3 (a share) as the count it is (none where it is
    NaN, e.g. after a divergence)."""
    return np.rint(np.nan_to_num(np.asarray(metrics["PFC3"], dtype=float)) * n).astype(int)


def effective_depth(correct, n, eps=NCC_EPS):
    """The effective depth (§II-A) from each layer's NCC-correct count of the `n` samples: the paper's minimal layer
    whose NCC error is at most a small epsilon, with epsilon the last layer's error, i.e. the first layer whose count
    reaches the last layer's. Where the last layer is not NCC separable (error > `eps`, e.g. the untrained net) the
    net has not reached an effective depth and every layer is before it: the last layer's index."""
    correct = np.asarray(correct)
    if n - correct[-1] > eps * n:
        return len(correct) - 1
    return int(np.argmax(correct >= correct[-1]))


# The variants of NCC_EPS, 10% lower and higher, with which a row whose statistic depends on the effective depth is
# recomputed (the `inner` thresholds of nbdemo.claims.verdict).
EPS_VARIANTS = (0.9 * NCC_EPS, 1.1 * NCC_EPS)
EPS_NAME = "NCC separability error 1% (ours), which decides the effective depth"


def terminal_phase(hist):
    """(step at which the training error first reached 0, or None; training loss there; training loss at the end)
    from the records of `train_recorded`."""
    errors, loss = hist["train_errors"], hist["train_loss"]
    zero = np.flatnonzero(errors == 0)
    if len(zero) == 0:
        return None, float("nan"), float(loss[-1])
    return hist.steps[zero[0]], float(loss[zero[0]]), float(loss[-1])


def page_numbers(hist, metrics):
    """The numbers that the text of PFC-1 and PFC-4 quotes: the step at which the training error first reached 0
    (`terminal_phase`), and the last layer's PFC1 and PFC2 as shares of layer 0's."""
    return {"zero_error_step": terminal_phase(hist)[0],
            **{f"{name.lower()}_ratio": float(metrics[name][-1] / metrics[name][0]) for name in ("PFC1", "PFC2")}}


def require_terminal_phase(v, hist, n):
    """Add to Verdict `v` the requirements that the run of `train_recorded` (on `n` training samples) reached the
    terminal phase of training, the regime of Conjecture 1 (§III-A), and that its last layer is NCC separable, as the
    paper's are (§IV-A):
    - zero training error at the end;
    - the terminal phase: the training error reached 0 at a record before the end, and the training loss fell after
      that (statistic: the loss there minus the loss at the end; NaN, which fails, without such a record);
    - the last layer's NCC error (1 - PFC3) at most NCC_EPS.
    The untrained net (0 steps) fails all three."""
    errors = int(hist["train_errors"][-1])
    start, loss0, loss1 = terminal_phase(hist)
    fall = loss0 - loss1 if start is not None and start < hist.steps[-1] else float("nan")
    wrong = n - int(ncc_correct({"PFC3": hist["PFC3"][-1]}, n)[-1])
    v.require("training error 0", errors, "==", 0, shown=f"{errors} of {n} misclassified",
              expected="0 misclassified", source=ours(
                  "the terminal phase of training (Conjecture 1) is the phase after the training error reaches zero, "
                  "in Papyan et al. [13], whose term the paper takes over"))
    v.require("terminal phase: loss still falling after zero error", fall, ">", 0,
              shown=("never at zero error" if start is None else "zero error only at the end" if np.isnan(fall)
                     else f"zero error from step {start}; loss {loss0:.3g} -> {loss1:.3g}"),
              expected="zero error before the end, loss falls after (> 0)", source=ours(
                  "in the terminal phase training goes on after zero error and the loss keeps falling (Papyan et "
                  "al. [13]); any fall counts"))
    v.require("last layer NCC-separable: NCC error", wrong / n, "<=", NCC_EPS, shown=f"{wrong / n:.3f} ({wrong} of {n})",
              source=ours("the paper's last layers are NCC separable (§IV-A) up to a small error it does not "
                          "quantify (§II-A): 1% of the training samples"))


# How collapsed the last layer must be, relative to layer 0 (ours): PFC1 and PFC2 of the last layer at most a tenth of
# layer 0's. Conjecture 1 assumes that NC emerges at the last layer, and Theorems 1-2 take it fully collapsed (PFC1 =
# PFC2 = 0). The paper's figures give no number in its text; its Fig. 4 draws the line between a solution that
# "exhibits NC" (the UFM optimum, plotted on a log scale) and one that "doesn't" (the MUFM optimum), and the MUFM
# optimum is 0.26-0.32 of its data in PFC1 and 0.28-0.33 in PFC2 (PFC-5, seeds 0-4). A last layer collapsed no more
# than that, relative to its input, is not NC in the paper's sense; one order of magnitude, the step of the log axes
# on which the paper plots PFC1 (Figs. 2-4), is the bound.
COLLAPSE = 0.1


def require_regime(v, hist, n):
    """Add to Verdict `v` the requirements of the regime the paper describes, from the last record of the run of
    `train_recorded` (on `n` training samples), beyond the terminal phase (`require_terminal_phase`):
    - NC has emerged at the last layer (Conjecture 1; Theorems 1-2 assume it): its PFC1 and its PFC2 each at most
      COLLAPSE times layer 0's;
    - the effective depth L0 (`effective_depth`) is the depth: the paper chose its architectures so (§IV-A), so that
      Conjecture 1, which orders the layers before the effective depth, covers every block. A net whose last layer
      is not NCC separable has no effective depth (statistic NaN, which fails)."""
    last = {name: np.asarray(hist[name][-1], dtype=float) for name in ("PFC1", "PFC2", "PFC3")}
    for name in ("PFC1", "PFC2"):
        ratio = last[name][-1] / last[name][0]
        v.require(f"last layer collapsed: {name} of the last layer / of layer 0", ratio, "<=", COLLAPSE,
                  shown=f"{ratio:.3g} ({last[name][-1]:.3g} / {last[name][0]:.3g})", source=ours(
                      "NC at the last layer (Conjecture 1, Theorems 1-2): an order of magnitude below layer 0; the "
                      "MUFM optimum, which the paper's Fig. 4 says does not exhibit NC, is about 0.3 of its data in "
                      "PFC1 and PFC2 (PFC-5)"))
    correct = ncc_correct(last, n)
    blocks = len(correct) - 1

    def depth(eps):
        return effective_depth(correct, n, eps) if n - correct[-1] <= eps * n else float("nan")

    L0 = depth(NCC_EPS)
    v.require("effective depth L0 equals the depth", L0, "==", blocks, expected=f"L0 = {blocks}",
              shown="none: last layer not NCC separable" if np.isnan(L0) else f"layer {L0} of {blocks}",
              source=paper("§IV-A (architectures chosen so that the effective depth is the depth)", 323),
              inner={EPS_NAME: [depth(eps) for eps in EPS_VARIANTS]})


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


# Conjecture 1's three orders across depth: metric, row, comparison of each block's change with 0, line of the text.
ORDERS = [("PFC1", "PFC1 decreases across depth", ">", 190), ("PFC2", "PFC2 decreases across depth", ">", 192),
          ("PFC3", "NCC-correct samples never fewer across depth", ">=", 194)]


def depth_changes(metrics, n):
    """Each block's change in the direction Conjecture 1 predicts: the decrease of PFC1 and of PFC2, and the change
    in the number of NCC-correct samples (of `n`). dict name -> (L,) array; the conjecture wants them > 0, > 0, >= 0."""
    changes = {name: -np.diff(np.asarray(metrics[name], dtype=float)) for name in ("PFC1", "PFC2")}
    changes["PFC3"] = np.diff(ncc_correct(metrics, n)).astype(float)
    return changes


def check_across_depth(v, metrics, n, prefix=""):
    """Conjecture 1's order across depth (§III-A) as checks of Verdict `v`, on the layers before the effective
    depth L0 (`effective_depth`; layers 0..L0, the blocks 1..L0; `require_regime` requires L0 to be the depth): PFC1
    and PFC2 go down at every one of these blocks and the number of NCC-correct samples (PFC3 as a count of the `n`)
    never goes down (statistic: each block's change, `depth_changes`). With no block before L0 (L0 = 0) the statistic
    is NaN, which fails. The blocks after L0, outside the conjecture, are notes. `prefix` starts every row's name.
    Returns L0."""
    correct = ncc_correct(metrics, n)
    L0 = effective_depth(correct, n)
    changes = depth_changes(metrics, n)

    def statistic(name, depth):  # each block's change before the effective depth; NaN (fails) without a block
        return changes[name][:depth] if depth else [float("nan")]

    for name, title, op, line in ORDERS:
        before, after = changes[name][:L0], changes[name][L0:]
        ends = (f"{correct[0]} -> {correct[L0]} of {n}" if name == "PFC3"
                else f"{metrics[name][0]:.3g} -> {metrics[name][L0]:.3g}")
        v.check(f"{prefix}{title} (blocks 1..L0)", statistic(name, L0), op, 0,
                expected=f"{'no drop' if name == 'PFC3' else 'down'} at every block before effective depth",
                shown=f"{int(np.sum(holds_each(before, op)))}/{L0} ({ends})" if L0 else "no block before it",
                source=paper(f"Conjecture 1 ({name}), before effective depth", line),
                inner={EPS_NAME: [statistic(name, effective_depth(correct, n, eps)) for eps in EPS_VARIANTS]})
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


def order_trend(hist, n, L0):
    """How Conjecture 1's order emerges over training: Spearman's rank correlation between the step and the number
    of (metric, block) pairs of blocks 1..L0 in order (`pairs_in_order`), over the records of `train_recorded` after
    step 0 (the initialisation is left out, so that a run whose order is there from its first steps on shows no
    trend). 0 when the count is the same at every one of them (no trend). Returns (rho, the counts)."""
    from scipy.stats import spearmanr

    steps = np.asarray(hist.steps)
    counts = np.array([pairs_in_order({name: hist[name][i] for name in ("PFC1", "PFC2", "PFC3")}, n, L0)
                       for i in range(len(steps))])
    later = steps > 0
    if len(set(counts[later])) < 2:
        return 0.0, counts
    return float(spearmanr(steps[later], counts[later]).statistic), counts


def check_order_trend(v, hist, n):
    """Conjecture 1's "gradually converge to the final order" (§III-A, Fig. 2) as a check of Verdict `v`: the rank
    correlation `order_trend` over the records of `train_recorded` (on `n` samples), on the blocks before the
    effective depth of the last record, must be > 0."""
    correct = ncc_correct({"PFC3": hist["PFC3"][-1]}, n)
    L0 = effective_depth(correct, n)
    rho, counts = order_trend(hist, n, L0)
    v.check("order emerges gradually: rank correlation of step and pairs in order", rho, ">", 0,
            expected="> 0 (more (metric, block) pairs before L0 in order as training goes on)",
            shown=f"{rho:.2f} ({counts[0]} at step 0, {counts[-1]} of {3 * L0} at the end)",
            source=paper("Conjecture 1 ('gradually converge to the final order'), Fig. 2", 196),
            inner={EPS_NAME: [order_trend(hist, n, effective_depth(correct, n, eps))[0] for eps in EPS_VARIANTS]})


def terminal_phase_verdict(claim, hist, n):
    """A Verdict for `claim` opened with the requirements that every run of PFC-1..4 shares: the training stayed
    finite (`Verdict.require_finite`), reached the terminal phase with an NCC-separable last layer
    (`require_terminal_phase`, on `n` training samples), and the regime of the paper (`require_regime`: a collapsed
    last layer, an effective depth equal to the depth)."""
    v = Verdict(claim)
    v.require_finite(hist)
    require_terminal_phase(v, hist, n)
    require_regime(v, hist, n)
    return v


def depth_order_verdict(claim, hist, metrics, n):
    """The verdict of PFC-1 and PFC-4, the order across depth at the end of training: `terminal_phase_verdict` and
    Conjecture 1's orders on the layers' final `metrics` (`check_across_depth`)."""
    v = terminal_phase_verdict(claim, hist, n)
    check_across_depth(v, metrics, n)
    return v
