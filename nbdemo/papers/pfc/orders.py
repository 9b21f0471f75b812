"""Conjecture 1's order across depth (Wang, Gai & Zhang, §III-A) as verdict rows that PFC-1, PFC-2 and PFC-4 share.

check_across_depth checks the order of the layers before the effective depth at the end of training,
check_order_trend (with order_trend) how it emerges over training; depth_order_verdict holds PFC-1's and PFC-4's
verdict. The effective depth and the regime's requirements are in `nbdemo.papers.pfc.regime`.
"""
import numpy as np

from nbdemo.claims.verdict import alt, paper
from nbdemo.papers.pfc.experiment import first_epoch_step
from nbdemo.papers.pfc.regime import ncc_alternatives, ncc_correct, scored_depth, terminal_phase_verdict, zero_error_kept

# Conjecture 1's three orders across depth: metric, row, comparison of each block's change with 0, line of the text.
ORDERS = [("PFC1", "PFC1 decreases across depth", ">", 190), ("PFC2", "PFC2 decreases across depth", ">", 192),
          ("PFC3", "NCC-correct samples never fewer across depth", ">=", 194)]


def depth_changes(metrics, n):
    """Each block's change in the direction Conjecture 1 predicts: the decrease of PFC1 and of PFC2, and the change
    in the number of NCC-correct samples (of `n`). dict name -> (L,) array; the conjecture wants them > 0, > 0, >= 0."""
    changes = {name: -np.diff(np.asarray(metrics[name], dtype=float)) for name in ("PFC1", "PFC2")}
    changes["PFC3"] = np.diff(ncc_correct(metrics, n)).astype(float)
    return changes


def holds_each(x, op):
    """Which numbers of x satisfy `op 0` (op: ">" or ">=")."""
    return np.asarray(x) > 0 if op == ">" else np.asarray(x) >= 0


def check_across_depth(v, metrics, n, prefix=""):
    """Conjecture 1's order across depth (§III-A) as checks of Verdict `v`, on the layers before the effective
    depth L0 (`scored_depth`: layers 0..L0, the blocks 1..L0, every block where no layer is NCC separable): PFC1
    and PFC2 go down at every one of these blocks and the number of NCC-correct samples (PFC3 as a count of the `n`)
    never goes down (statistic: each block's change, `depth_changes`), under each NCC tolerance too
    (`ncc_alternatives`; the effective depth moves with it). With no block before L0 (L0 = 0) the statistic is NaN:
    such a run is INCONCLUSIVE through the coverage floor of `require_regime` under every reading, so the row
    decides nothing. The blocks after L0, outside the conjecture, are notes. `prefix` starts every row's name.
    Returns L0."""
    correct = ncc_correct(metrics, n)
    L0 = scored_depth(correct, n)
    changes = depth_changes(metrics, n)

    def statistic(name, depth):  # each block's change before the effective depth; NaN (fails) without a block
        return changes[name][:depth] if depth else [float("nan")]

    for name, title, op, line in ORDERS:
        before, after = changes[name][:L0], changes[name][L0:]
        ends = (f"{correct[0]} -> {correct[L0]} of {n}" if name == "PFC3"
                else f"{metrics[name][0]:.3g} -> {metrics[name][L0]:.3g}")
        v.check(f"{prefix}{title} (blocks 1..L0)", statistic(name, L0), op, 0,
                expected=f"{'no drop' if name == 'PFC3' else 'down'} at every block before effective depth",
                shown=(f"{int(np.sum(holds_each(before, op)))}/{L0} ({ends})" if L0
                       else "no block before it: not scored (the coverage floor fails)"),
                source=paper(f"Conjecture 1 ({name}), before effective depth", line),
                alternatives=ncc_alternatives(lambda eps: statistic(name, scored_depth(correct, n, eps))))
        if len(after):
            v.note(f"{prefix}{name}: blocks after effective depth in order", int(np.sum(holds_each(after, op))),
                   shown=f"{int(np.sum(holds_each(after, op)))}/{len(after)}")
    return L0


def pairs_in_order(metrics, n, L0):
    """How many of the 3 L0 (metric, block) pairs of blocks 1..L0 are in Conjecture 1's order (`depth_changes`)."""
    changes = depth_changes(metrics, n)
    return sum(int(np.sum(holds_each(changes[name][:L0], op))) for name, _, op, _ in ORDERS)


def order_trend(hist, n, L0, first_epoch=0, keep=None):
    """How Conjecture 1's order emerges over training: Spearman's rank correlation between the step and the number
    of (metric, block) pairs of blocks 1..L0 in order (`pairs_in_order`), over the records of `train_recorded` after
    step `first_epoch` (the records up to the end of the first epoch, where the features are still about the initial
    ones, are left out, so that a run whose order is there from its first later record on shows no trend). 0 when
    the count is the same at every one of them (no trend). `keep` (a mask over the records) leaves out more of them.
    Returns (rho, the counts at every record)."""
    from scipy.stats import spearmanr

    steps = np.asarray(hist.steps)
    counts = np.array([pairs_in_order({name: hist[name][i] for name in ("PFC1", "PFC2", "PFC3")}, n, L0)
                       for i in range(len(steps))])
    later = (steps > first_epoch) & (True if keep is None else np.asarray(keep))
    if len(set(counts[later])) < 2:
        return 0.0, counts
    return float(spearmanr(steps[later], counts[later]).statistic), counts


def settled_step(steps, counts):
    """The first recorded step from which the count of pairs in order stays at its final value to the end."""
    changed = np.flatnonzero(np.asarray(counts) != counts[-1])
    return steps[changed[-1] + 1] if len(changed) else steps[0]


def regular_records(steps, every, first_epoch):
    """Which of the recorded `steps` are `train_recorded`'s regular records: step 0, every `every` steps, the end of
    the first epoch (`first_epoch`) and the last step, without the log-spaced early records. `every` None: about 50
    records in all, as `train_recorded` spaces them."""
    steps = np.asarray(steps)
    every = every or max(1, int(steps[-1]) // 50)
    return (steps % every == 0) | (steps == first_epoch) | (steps == steps[-1])


def check_order_trend(v, hist, n, batch_size, record_every=None):
    """Conjecture 1's "gradually converge to the final order" (§III-A, Fig. 2) as a check of Verdict `v`: the rank
    correlation `order_trend` over the records of `train_recorded` (on `n` samples, in batches of `batch_size`)
    after the end of the first epoch (`first_epoch_step`), on the blocks before the effective depth of the last
    record (`scored_depth`), must be > 0. A note gives the step from which the count stays at its final value
    (`settled_step`). Alternatives: the same over the regular records only (every `record_every` steps, without the
    early ones, `regular_records`), over the records from the first zero training error on, and the NCC
    tolerances."""
    correct = ncc_correct({"PFC3": hist["PFC3"][-1]}, n)
    L0 = scored_depth(correct, n)
    first = first_epoch_step(n, batch_size)
    rho, counts = order_trend(hist, n, L0, first)
    zero = zero_error_kept(hist)[0]
    v.check("order emerges gradually: rank correlation of step and pairs in order", rho, ">", 0,
            expected="> 0 (more (metric, block) pairs before L0 in order as training goes on)",
            shown=f"{rho:.2f} ({counts[0]} at step 0, {counts[-1]} of {3 * L0} at the end; records after step {first})",
            source=paper("Conjecture 1 ('gradually converge to the final order'), Fig. 2", 196),
            alternatives={
                "trend over the regular records only": alt(order_trend(
                    hist, n, L0, first, regular_records(hist.steps, record_every, first))[0],
                    why="the records evenly spaced, as Fig. 2 plots them, without the early log-spaced ones"),
                "trend over the records after zero training error": alt(
                    float("nan") if zero is None else order_trend(hist, n, L0, max(first, zero - 1))[0],
                    why="the order's build-up within the terminal phase, where Conjecture 1 is stated (§III-A)"),
                **ncc_alternatives(lambda eps: order_trend(hist, n, scored_depth(correct, n, eps), first)[0])})
    settled = settled_step(hist.steps, counts)
    v.note("step from which the pairs in order stay at their final count", settled,
           shown=f"step {settled} of {hist.steps[-1]} ({counts[-1]} of {3 * L0} pairs in order)")


def depth_order_verdict(claim, hist, metrics, n, raw=None):
    """The verdict of PFC-1 and PFC-4, the order across depth at the end of training: `terminal_phase_verdict` (with
    `raw`, the raw input's metrics, for its notes) and Conjecture 1's orders on the layers' final `metrics`
    (`check_across_depth`)."""
    v = terminal_phase_verdict(claim, hist, n, raw)
    check_across_depth(v, metrics, n)
    return v
