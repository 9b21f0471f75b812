"""The regime of Conjecture 1 (Wang, Gai & Zhang) as verdict rows that PFC-1..4 share.

- the effective depth (§II-A): `effective_depth`, from each layer's NCC-correct count (`ncc_correct`), with the
  paper's fixed epsilon, NCC_EPS (ours), and its +-10% variants (EPS_VARIANTS);
- require_terminal_phase / require_regime: the run reached the terminal phase with an NCC-separable last layer, and
  its effective depth is its depth, the paper's test that NC has emerged (§IV-A); terminal_phase_verdict opens a
  Verdict with these rows. The last layer's collapse relative to layer 0 is a note.
"""
import numpy as np

from nbdemo.claims.verdict import Verdict, ours, paper

# The small error the paper allows in NCC separability (§II-A), which it does not quantify: 1% of the training samples.
NCC_EPS = 0.01
# The variants of NCC_EPS, 10% lower and higher, with which a row whose statistic depends on the effective depth is
# recomputed (the `inner` thresholds of nbdemo.claims.verdict).
EPS_VARIANTS = (0.9 * NCC_EPS, 1.1 * NCC_EPS)
EPS_NAME = "NCC separability error 1% (ours), which decides the effective depth"


def ncc_correct(metrics, n):
    """Each layer's number of NCC-correct samples out of `n`: PFC3 (a share) as the count it is (none where it is
    NaN, e.g. after a divergence)."""
    return np.rint(np.nan_to_num(np.asarray(metrics["PFC3"], dtype=float)) * n).astype(int)


def separable(correct, n, eps=NCC_EPS):
    """Whether a layer with `correct` NCC-correct samples of `n` is NCC separable up to the error `eps` (§II-A)."""
    return n - correct <= eps * n


def effective_depth(correct, n, eps=NCC_EPS):
    """The eps-empirical effective depth (§II-A, after Galanti et al.) from each layer's NCC-correct count of the `n`
    samples: the lowest layer whose NCC error is at most `eps`. None where no layer is NCC separable."""
    within = np.flatnonzero(separable(np.asarray(correct), n, eps))
    return int(within[0]) if len(within) else None


def scored_depth(correct, n, eps=NCC_EPS):
    """The last layer that Conjecture 1's order covers (it orders the layers before the effective depth, §III-A):
    the effective depth, or the last layer where the net has none (every layer is then before it)."""
    L0 = effective_depth(correct, n, eps)
    return len(correct) - 1 if L0 is None else L0


def terminal_phase(hist):
    """(step at which the training error first reached 0, or None; training loss there; training loss at the end)
    from the records of `train_recorded`."""
    errors, loss = hist["train_errors"], hist["train_loss"]
    zero = np.flatnonzero(errors == 0)
    if len(zero) == 0:
        return None, float("nan"), float(loss[-1])
    return hist.steps[zero[0]], float(loss[zero[0]]), float(loss[-1])


def collapse_ratios(metrics):
    """The last layer's PFC1 and PFC2 as shares of layer 0's: {"PFC1": ..., "PFC2": ...}."""
    return {name: float(np.asarray(metrics[name], dtype=float)[-1] / np.asarray(metrics[name], dtype=float)[0])
            for name in ("PFC1", "PFC2")}


def page_numbers(hist, metrics):
    """The numbers that the text of PFC-1 and PFC-4 quotes: the step at which the training error first reached 0
    (`terminal_phase`), and the last layer's PFC1 and PFC2 as shares of layer 0's (`collapse_ratios`)."""
    return {"zero_error_step": terminal_phase(hist)[0],
            **{f"{name.lower()}_ratio": ratio for name, ratio in collapse_ratios(metrics).items()}}


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


def require_regime(v, hist, n):
    """Add to Verdict `v` the requirement that the run of `train_recorded` (on `n` training samples) is in the regime
    the paper describes, from its last record: its effective depth L0 (`effective_depth`) is its depth. The paper
    chose its architectures so (§IV-A), 'thus, the last-layer features are NCC separable, indicating NC emerges', and
    Conjecture 1, which orders the layers before the effective depth, then covers every block. A net with no NCC
    separable layer has no effective depth (statistic NaN, which fails). The last layer's collapse, its PFC1 and PFC2
    as shares of layer 0's, are notes: the paper gives no number for them."""
    last = {name: np.asarray(hist[name][-1], dtype=float) for name in ("PFC1", "PFC2", "PFC3")}
    correct = ncc_correct(last, n)
    blocks = len(correct) - 1

    def depth(eps):
        L0 = effective_depth(correct, n, eps)
        return float("nan") if L0 is None else L0

    L0 = depth(NCC_EPS)
    v.require("effective depth L0 equals the depth", L0, "==", blocks, expected=f"L0 = {blocks}",
              shown="none: no layer NCC separable" if np.isnan(L0) else f"layer {L0} of {blocks}",
              source=paper("§IV-A (architectures chosen so that the effective depth is the depth)", 323),
              inner={EPS_NAME: [depth(eps) for eps in EPS_VARIANTS]})
    for name, ratio in collapse_ratios(last).items():
        v.note(f"collapse of the last layer: {name} of the last layer / of layer 0", ratio,
               shown=f"{ratio:.3g} ({last[name][-1]:.3g} / {last[name][0]:.3g})")


def terminal_phase_verdict(claim, hist, n):
    """A Verdict for `claim` opened with the requirements that every run of PFC-1..4 shares: the training stayed
    finite (`Verdict.require_finite`), reached the terminal phase with an NCC-separable last layer
    (`require_terminal_phase`, on `n` training samples), and an effective depth equal to the depth (`require_regime`,
    with the last layer's collapse as notes)."""
    v = Verdict(claim)
    v.require_finite(hist)
    require_terminal_phase(v, hist, n)
    require_regime(v, hist, n)
    return v
