"""The order in which a net learns its classes against the order of its final output biases (paper 003, MLI-6: §4
Proposition 1, §5 Fig. 8): per net, whether its last-learned class has the largest bias and whether its bias order
follows its learning order (`orders`), and the share of the decided nets in which each holds (`share`), the checks.

Chance, for notes: if a net's final bias order had nothing to do with the order in which it learned its k classes,
its last-learned class would have the largest bias with probability 1/k, and its whole bias order would follow its
learning order with probability 1/k!. A count of nets is tested against these levels (`chance_tail`), with the power
of the test at the alternative the design's number of nets was fixed for (`power`, `LAST_SHARE`, `ORDER_SHARE`).
"""
import math

import torch

LEVEL = 0.05  # the one-sided level of the tests (ours: the conventional one; the paper states no test)
# The alternative at which the design's power was computed, written before any run of it (results/revisions/MLI-6.yml),
# and the checks' thresholds (ours: the paper says 'often', §5, and gives no share): the share of nets whose
# last-learned class has the largest bias, and of 3-class nets whose whole bias order follows the learning order.
LAST_SHARE = 0.75
ORDER_SHARE = 0.5


def crossing_times(steps, loss, threshold):
    """When each curve first reaches `threshold`, linearly interpolated between the last record above it and the first
    at or below it (the first record's step when it starts there); inf when it never does.

    steps: (T,) recorded steps; loss: (T, ...) curves at those steps. Returns (...) float64. Two curves that cross
    between the same two records get different times unless they cross at the same point of that interval.
    """
    steps = torch.as_tensor(steps, dtype=torch.float64)
    loss = torch.as_tensor(loss, dtype=torch.float64)
    below = loss <= threshold
    j = below.double().argmax(0)  # the first record at or below (argmax returns the first maximal index)
    i = (j - 1).clamp(min=0)
    before, after = loss.gather(0, i.unsqueeze(0))[0], loss.gather(0, j.unsqueeze(0))[0]
    frac = torch.where(j > 0, (before - threshold) / (before - after), 0.0)  # before > threshold >= after there
    return torch.where(below.any(0), steps[i] + frac * (steps[j] - steps[i]), math.inf)


def orders(learned, final_bias):
    """Per net, from its classes' learning times (N, k) and final output biases (N, k), three (N,) bool tensors:
    decided (every class learned, no two at the same time, and finite final biases: a net whose training diverged has
    no bias order), last_largest (the class learned last has the largest bias) and follows (the biases, low to high,
    are in the order of learning); the last two are False where undecided.
    """
    learned = torch.as_tensor(learned, dtype=torch.float64)
    bias = torch.as_tensor(final_bias, dtype=torch.float64)
    decided = (torch.isfinite(learned).all(1) & (learned.sort(1).values.diff(dim=1) > 0).all(1)
               & torch.isfinite(bias).all(1))
    last_largest = decided & (learned.argmax(1) == bias.argmax(1))
    follows = decided & (learned.argsort(1) == bias.argsort(1)).all(1)
    return decided, last_largest, follows


def first_smallest(learned, final_bias, decided):
    """Per net, whether the class learned first ends with the smallest output bias (N,) bool, False where undecided:
    the part of Fig. 8's bias order that the last-learned class's place does not decide (on three classes, chance
    1/2 once the last-learned class is on top)."""
    learned = torch.as_tensor(learned, dtype=torch.float64)
    bias = torch.as_tensor(final_bias, dtype=torch.float64)
    return torch.as_tensor(decided) & (learned.argmin(1) == bias.argmin(1))


def share(holds, decided):
    """The share of the decided nets in which a statement holds: `holds` and `decided` are bool tensors of one shape
    (`holds` False where undecided); NaN when no net is decided."""
    n = int(torch.as_tensor(decided).sum())
    return int(torch.as_tensor(holds).sum()) / n if n else math.nan


def _pmf(groups):
    """The distribution of a sum of independent Binomial(n, p), one per (n, p) in groups: a list over 0..sum(n)."""
    pmf = [1.0]
    for n, p in groups:
        b = [math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(n + 1)]
        pmf = [sum(pmf[i] * b[s - i] for i in range(max(0, s - n), min(s, len(pmf) - 1) + 1))
               for s in range(len(pmf) + n)]
    return pmf


def chance_tail(count, groups):
    """The one-sided exact p-value of `count` successes among nets that succeed each at its chance level:
    P(X >= count) for X the sum of independent Binomial(n, p) over groups [(n, p), ...]."""
    return min(1.0, sum(_pmf(groups)[max(0, count):]))


def power(ns, chance, alternative, level=LEVEL):
    """The probability that the test `chance_tail(X, zip(ns, chance)) <= level` rejects when each net succeeds with
    probability `alternative` instead: ns, chance and alternative are one entry per group of nets."""
    null = _pmf(list(zip(ns, chance)))
    tails = [sum(null[c:]) for c in range(len(null))] + [0.0]
    critical = next(c for c, t in enumerate(tails) if t <= level)
    return sum(_pmf(list(zip(ns, alternative)))[critical:])


def premise_inversions(w0, learned, ratio):
    """The learning order checked only where Prop. 1 orders it (MLI-7): over the pairs of classes (i, j) whose initial
    diagonal weights meet Lemma 12's premise w0[i] >= ratio * w0[j], the number in which class i is not learned
    strictly before class j (later, at the same time, or never). Returns (inversions, pairs): NaN inversions when no
    pair meets the premise (nothing to test).

    w0: (k,) initial W_ii; learned: (k,) learning times, inf for a class never learned.
    """
    w0 = torch.as_tensor(w0, dtype=torch.float64)
    at = torch.as_tensor(learned, dtype=torch.float64)
    premise = w0[:, None] >= ratio * w0[None, :]  # (i, j): i's weight at least ratio times j's (never i == j: ratio > 1)
    pairs = int(premise.sum())
    inverted = premise & ~(at[:, None] < at[None, :])
    return (int(inverted.sum()) if pairs else math.nan), pairs
