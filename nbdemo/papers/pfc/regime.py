"""The regime of Conjecture 1 (Wang, Gai & Zhang) as verdict rows that PFC-1..4 share.

- the effective depth (§II-A): `effective_depth`, from each layer's NCC-correct count (`ncc_correct`), with the
  paper's fixed epsilon, NCC_EPS (ours), and its +-10% variants (EPS_VARIANTS);
- require_terminal_phase / require_regime: the run reached the terminal phase with an NCC-separable last layer, its
  effective depth is its depth, the paper's test that NC has emerged (§IV-A), and its last layer is collapsed in the
  sense of Fig. 4 (MUFM_RATIO); terminal_phase_verdict opens a Verdict with these rows.
"""
import numpy as np

from nbdemo.claims.verdict import Verdict, ours, paper

# The small error the paper allows in NCC separability (§II-A), which it does not quantify: 1% of the training samples.
NCC_EPS = 0.01
# The variants of NCC_EPS, 10% lower and higher, with which a row whose statistic depends on the effective depth is
# recomputed (the `inner` thresholds of nbdemo.claims.verdict).
EPS_VARIANTS = (0.9 * NCC_EPS, 1.1 * NCC_EPS)
EPS_NAME = "NCC separability error 1% (ours), which decides the effective depth"
# A collapsed last layer in the sense of Fig. 4 (ours): Fig. 4 and its caption call the MUFM optimum not NC ("the
# solution of UFM exhibits NC but MUFM doesn't"; so do the abstract, §I and §VI), though it is more collapsed than its
# data (Theorem 4). PFC-5 reproduces Fig. 4a: over its seeds 0-9 the optimum's PFC1 is 0.254-0.318 of the data's and
# its PFC2 0.283-0.346. A last layer is collapsed only if, relative to its input (layer 0), it is more collapsed than
# that optimum in every one of those seeds: PFC1 and PFC2 of the last layer below these shares of layer 0's (the
# smallest of PFC-5's ratios, rounded down). A necessary condition for NC, not a sufficient one.
MUFM_RATIO = {"PFC1": 0.25, "PFC2": 0.28}


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
    """Add to Verdict `v` the requirements that the run of `train_recorded` (on `n` training samples) is in the regime
    the paper describes, from its last record:
    - its effective depth L0 (`effective_depth`) is its depth. The paper chose its architectures so (§IV-A), 'thus,
      the last-layer features are NCC separable, indicating NC emerges', and Conjecture 1, which orders the layers
      before the effective depth, then covers every block. A net with no NCC separable layer has no effective depth
      (statistic NaN, which fails);
    - its last layer is collapsed in the sense of Fig. 4: its PFC1 and its PFC2, as shares of layer 0's
      (`collapse_ratios`), below the MUFM optimum's shares of its data (MUFM_RATIO, ours). Conjecture 1 assumes NC
      at the last layer (§III-A), Theorems 1-2 a collapsed end point (§III-B).
    The last layer's PFC1 and PFC2 themselves are notes."""
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
        v.require(f"last layer collapsed (Fig. 4): {name} of the last layer / of layer 0", ratio, "<",
                  MUFM_RATIO[name], shown=f"{ratio:.3g} ({last[name][-1]:.3g} / {last[name][0]:.3g})",
                  expected=f"< {MUFM_RATIO[name]} (the MUFM optimum's share of its data)", source=ours(
                      "Fig. 4 (and its caption, the abstract, §I, §VI) calls the MUFM optimum not NC; PFC-5 puts "
                      f"its {name} at {'0.254-0.318' if name == 'PFC1' else '0.283-0.346'} of its data's (seeds "
                      "0-9): a collapsed last layer is more collapsed than that relative to its input"))
    for name in ("PFC1", "PFC2"):
        v.note(f"last layer: {name}", float(last[name][-1]), shown=f"{last[name][-1]:.3g}")


def terminal_phase_verdict(claim, hist, n):
    """A Verdict for `claim` opened with the requirements that every run of PFC-1..4 shares: the training stayed
    finite (`Verdict.require_finite`), reached the terminal phase with an NCC-separable last layer
    (`require_terminal_phase`, on `n` training samples), an effective depth equal to the depth and a collapsed last
    layer (`require_regime`)."""
    v = Verdict(claim)
    v.require_finite(hist)
    require_terminal_phase(v, hist, n)
    require_regime(v, hist, n)
    return v
