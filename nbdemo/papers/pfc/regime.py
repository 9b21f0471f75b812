"""The regime of Conjecture 1 (Wang, Gai & Zhang) as verdict rows that PFC-1..4 share.

- the effective depth (§II-A): `effective_depth`, from each layer's NCC-correct count (`ncc_correct`), with the
  tolerance NCC_EPS of NCC separability (ours) and the tolerances of NCC_READINGS, declared as alternatives
  (`ncc_alternatives`) on every row that depends on it;
- require_terminal_phase: zero training error reached and kept to the end, and the training loss not rising after
  it, compared over windows of records (`loss_windows`, ours);
- require_regime: the paper's own test that NC has emerged (§IV-A), a last layer NCC separable within NCC_EPS; and a
  coverage floor (`coverage`, ours): at least half the blocks lie before the effective depth, with "effective depth =
  depth" (§IV-A's choice of architectures) as an alternative. The last layer's collapse relative to layer 0 and to
  the raw input (`collapse_ratios`), beside the MUFM optimum's share of its data (MUFM_RATIO), are notes;
terminal_phase_verdict opens a Verdict with these rows.
"""
import numpy as np

from nbdemo.claims.verdict import Verdict, alt, ours

# The small error eps the paper allows when it measures NCC separability in practice (§II-A), which its empirical
# effective depth uses (§IV-A) and which it does not quantify: 1% of the training samples (2 of 200 in the default).
NCC_EPS = 0.01
# The other tolerances a careful reader could have chosen, each judged on the same nets: {name: (eps, why)}. Every
# row whose statistic depends on the tolerance (the last layer's NCC error, the coverage, the blocks the checks
# score) declares all of them under these names, so that one reading switches them together.
NCC_READINGS = {
    "NCC tolerance 0 errors": (0.0, "NCC separability's exact condition, PFC3 = 1 (§II-A), before the paper allows eps"),
    "NCC tolerance 0.5%": (0.005, "half our 1%: a stricter reading of the small error of §II-A"),
    "NCC tolerance 2%": (0.02, "twice our 1%: a more lenient reading of the small error of §II-A"),
}
# The coverage floor (ours): at least this share of the blocks before the effective depth, so that Conjecture 1's
# order is tested on enough blocks to be progressive; "effective depth = depth" (§IV-A) is its alternative.
COVERAGE_FLOOR = 0.5
# The terminal phase's "effectively zero" training error (Papyan et al., whose term the paper takes over), the
# alternative to exactly zero at every record: at most this share of the training samples at any later record.
EFFECTIVELY_ZERO = 0.01
# The terminal-phase windows (ours): the training loss is averaged over the records of a tenth of the run from the
# first zero-error record on and over those of the last tenth, and may end at most LOSS_TOLERANCE above the first.
LOSS_WINDOW = 0.1
LOSS_TOLERANCE = 0.1
# Other window widths a careful reader could have chosen (the paper states none): {name: width}.
LOSS_WINDOWS = {"terminal-phase loss windows of 5% of the run": 0.05, "terminal-phase loss windows of 20% of the run": 0.2}
# The MUFM optimum's PFC1 and PFC2 as shares of its data's over PFC-5's seeds 0-9 (Fig. 4, whose caption calls the
# optimum not NC): the last layer's ratios are shown beside them, as notes.
MUFM_RATIO = {"PFC1": "0.254-0.318", "PFC2": "0.283-0.346"}


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


def coverage(correct, n, eps=NCC_EPS):
    """The share of the blocks that lie before the effective depth (blocks 1..L0 of L, `scored_depth`): the blocks
    whose order Conjecture 1 predicts and the checks score. 0 where the effective depth is layer 0."""
    return scored_depth(correct, n, eps) / (len(correct) - 1)


def ncc_alternatives(statistic, threshold=lambda eps: None):
    """The alternatives of a row under each NCC tolerance of NCC_READINGS: {name: alt(statistic(eps), row's
    comparison, threshold(eps) or the row's, why)}."""
    return {name: alt(statistic(eps), None, threshold(eps), why) for name, (eps, why) in NCC_READINGS.items()}


def zero_error_kept(hist):
    """(the first recorded step with zero training error, or None; the most training errors at any record from
    there to the end: 0 where zero error was reached and kept, NaN where it was never reached)."""
    errors = np.asarray(hist["train_errors"])
    zero = np.flatnonzero(errors == 0)
    if len(zero) == 0:
        return None, float("nan")
    return hist.steps[zero[0]], float(errors[zero[0]:].max())


def terminal_phase(hist):
    """(step at which the training error first reached 0, or None; training loss there; training loss at the end)
    from the records of `train_recorded`."""
    errors, loss = hist["train_errors"], hist["train_loss"]
    zero = np.flatnonzero(errors == 0)
    if len(zero) == 0:
        return None, float("nan"), float(loss[-1])
    return hist.steps[zero[0]], float(loss[zero[0]]), float(loss[-1])


def loss_windows(hist, width=LOSS_WINDOW):
    """The training loss at the start and at the end of the terminal phase: its mean over the records within
    `width` of the run from the first zero-error record on, and over the records of the last `width` of the run.
    (NaN, NaN) where the training error never reached 0 or the two windows overlap (a terminal phase shorter than
    twice `width` of the run)."""
    start, T = terminal_phase(hist)[0], hist.steps[-1]
    if start is None or start + width * T >= T - width * T:
        return float("nan"), float("nan")
    steps, loss = np.asarray(hist.steps), np.asarray(hist["train_loss"], dtype=float)
    return (float(loss[(steps >= start) & (steps <= start + width * T)].mean()),
            float(loss[steps >= T - width * T].mean()))


def loss_rise(hist, width=LOSS_WINDOW):
    """The terminal phase's relative change of the training loss, end window over start window (`loss_windows`)
    minus 1: negative where the loss fell; NaN without a terminal phase."""
    first, last = loss_windows(hist, width)
    return last / first - 1


def collapse_ratios(metrics, raw=None):
    """The last layer's PFC1 and PFC2 as shares of layer 0's, {"PFC1": ..., "PFC2": ...}, or of `raw`'s (the
    metrics of the raw input, one number each) where given."""
    ref = {name: np.asarray(metrics[name], dtype=float)[0] for name in ("PFC1", "PFC2")} if raw is None else raw
    return {name: float(np.asarray(metrics[name], dtype=float)[-1] / float(np.ravel(ref[name])[0]))
            for name in ("PFC1", "PFC2")}


def page_numbers(hist, metrics, n, raw=None):
    """The numbers that the text of PFC-1..4 quotes, from the layers' final `metrics` on `n` samples: the step at
    which the training error first reached 0 (`terminal_phase`), the last layer's PFC1 and PFC2 as shares of layer
    0's (`collapse_ratios`) and, where `raw` (the raw input's metrics) is given, of the raw input's ("raw_..."), its
    number of NCC errors and the coverage of the blocks before the effective depth (`coverage`)."""
    correct = ncc_correct(metrics, n)
    ratios = {f"{name.lower()}_ratio": ratio for name, ratio in collapse_ratios(metrics).items()}
    if raw is not None:
        ratios.update({f"raw_{name.lower()}_ratio": ratio for name, ratio in collapse_ratios(metrics, raw).items()})
    return {"zero_error_step": terminal_phase(hist)[0], "ncc_errors": n - int(correct[-1]),
            "coverage": coverage(correct, n), **ratios}


def require_terminal_phase(v, hist, n):
    """Add to Verdict `v` the requirements that the run of `train_recorded` (on `n` training samples) reached the
    terminal phase of training, the regime of Conjecture 1 (§III-A), the term the paper takes over from Papyan et al.:
    - zero training error reached and kept: no training error at any record from the first zero-error record to the
      end (statistic: the most errors there, NaN, which fails, where it was never 0); "effectively zero", at most
      EFFECTIVELY_ZERO of the `n` samples there, and zero at the end only are its alternatives;
    - the loss after zero error: the mean training loss over the last tenth of the run at most 10% above its mean
      over the tenth of the run from the first zero-error record on (`loss_rise`; NaN, which fails, without a
      terminal phase twice that long). The untrained net (0 steps) fails both."""
    start, kept = zero_error_kept(hist)
    final = int(hist["train_errors"][-1])
    v.require("training error 0, reached and kept", kept, "==", 0,
              shown="never 0" if start is None else f"0 from step {start}; at most {kept:.0f} of {n} after",
              expected="0 misclassified at every record from the first 0 on", source=ours(
                  "the terminal phase of training (Conjecture 1) is the phase in which the training error, once "
                  "zero, stays zero (Papyan et al. [13], whose term the paper takes over)"),
              alternatives={"training error 0 at the end only": alt(
                  final, why="the previous reading: only the last record is zero error, a blip before it allowed"),
                  "terminal phase: zero error reached, then at most 1% errors after": alt(
                      kept, "<=", EFFECTIVELY_ZERO * n,
                      why="Papyan et al.'s training error that first vanishes and then stays 'effectively zero'")})
    rise = loss_rise(hist)
    first, last = loss_windows(hist)
    _, loss0, loss1 = terminal_phase(hist)
    fall = loss0 - loss1 if start is not None and start < hist.steps[-1] else float("nan")
    v.require("terminal phase: training loss after zero error, end window / start window - 1", rise, "<=",
              LOSS_TOLERANCE, expected=f"<= {LOSS_TOLERANCE} (not rising beyond record noise)",
              shown=("no terminal phase two windows long" if np.isnan(rise)
                     else f"{rise:+.2f} ({first:.3g} -> {last:.3g}; zero error from step {start})"),
              source=ours(f"in the terminal phase the loss is pushed towards zero (Papyan et al. [13]); with weight "
                          f"decay it settles, so it may not rise: means over {LOSS_WINDOW:.0%} of the run after the "
                          f"first zero error and at the end, within {LOSS_TOLERANCE:.0%} for the noise between "
                          f"records"),
              alternatives={
                  "terminal-phase loss falls over the windows (no tolerance)": alt(
                      rise, "<", 0, "Papyan et al.'s loss 'pushed towards zero' read as a fall, without tolerance"),
                  "terminal-phase loss at two records, any fall (the previous reading)": alt(
                      fall, ">", 0, "the loss at the first zero-error record against the last record"),
                  **{name: alt(loss_rise(hist, width), why=f"windows of {width:.0%} of the run: the paper states no "
                                                              f"width") for name, width in LOSS_WINDOWS.items()}})


def require_regime(v, hist, n, raw=None, blocks_scored=True):
    """Add to Verdict `v` the requirements that the run of `train_recorded` (on `n` training samples) is in the regime
    the paper describes, from its last record:
    - its last layer is NCC separable: NCC error (1 - PFC3) at most NCC_EPS, the paper's own test that NC has
      emerged ('thus, the last-layer features are NCC separable, indicating NC emerges', §IV-A), which Conjecture 1
      assumes (§III-A); the tolerances of NCC_READINGS are its alternatives;
    - coverage: at least COVERAGE_FLOOR of the blocks lie before the effective depth (`coverage`, ours), so that the
      order is tested on enough blocks; "effective depth = depth", the paper's choice of architectures (§IV-A), is
      an alternative (coverage 1), and so are the NCC tolerances (the effective depth moves with them).
    `blocks_scored=False` (PFC-3, whose checks read only the two end layers) makes the coverage a note.
    Notes: the effective depth; the last layer's PFC1 and PFC2, and their shares of layer 0's and of the raw input's
    (`raw`: the raw input's metrics, where given) beside the MUFM optimum's share of its data (Fig. 4, MUFM_RATIO)."""
    last = {name: np.asarray(hist[name][-1], dtype=float) for name in ("PFC1", "PFC2", "PFC3")}
    correct = ncc_correct(last, n)
    blocks = len(correct) - 1
    wrong = n - int(correct[-1])
    v.require("last layer NCC-separable: NCC error", wrong / n, "<=", NCC_EPS,
              shown=f"{wrong / n:.3f} ({wrong} of {n})", expected=f"<= {NCC_EPS} ({NCC_EPS * n:g} of {n})",
              source=ours("the paper's last layers are NCC separable (§IV-A), its test that NC has emerged, up to a "
                          "small error it does not quantify (§II-A): 1% of the training samples"),
              alternatives=ncc_alternatives(lambda eps: wrong / n, lambda eps: eps))
    L0 = effective_depth(correct, n)
    cover = coverage(correct, n)
    shown = f"{cover:.2f} ({'no layer NCC separable' if L0 is None else f'layer {L0} of {blocks}'})"
    if not blocks_scored:
        v.note("coverage: share of the blocks before the effective depth", cover, shown=shown)
    else:
        v.require("coverage: share of the blocks before the effective depth", cover, ">=", COVERAGE_FLOOR,
                  expected=f">= {COVERAGE_FLOOR} of the {blocks} blocks", shown=shown,
                  source=ours("Conjecture 1 orders the blocks before the effective depth (§III-A); a progressive order "
                              "tested on fewer than half the blocks, or on none, tests too little of it"),
                  alternatives={"effective depth = depth (§IV-A)": alt(
                      cover, ">=", 1.0, "the paper chose its architectures so that the effective depth is the depth "
                                        "(§IV-A)"),
                      "at least two blocks before the effective depth": alt(
                          cover, ">=", 2 / blocks, "enough blocks to see a progression (§III-A), not half of them"),
                      **ncc_alternatives(lambda eps: coverage(correct, n, eps))})
    v.note("effective depth L0", float("nan") if L0 is None else L0,
           shown="none: no layer NCC separable" if L0 is None else f"layer {L0} of {blocks}")
    for name in ("PFC1", "PFC2"):
        v.note(f"last layer: {name}", float(last[name][-1]), shown=f"{last[name][-1]:.3g}")
    for ref, ratios in [("layer 0", collapse_ratios(last)), ("the raw input", raw and collapse_ratios(last, raw))]:
        for name, ratio in (ratios or {}).items():
            v.note(f"last layer {name} / {ref}'s", ratio,
                   shown=f"{ratio:.3g} (the MUFM optimum's of its data, Fig. 4: {MUFM_RATIO[name]})")


def terminal_phase_verdict(claim, hist, n, raw=None, blocks_scored=True):
    """A Verdict for `claim` opened with the requirements that every run of PFC-1..4 shares: the training stayed
    finite (`Verdict.require_finite`), reached the terminal phase (`require_terminal_phase`, on `n` training
    samples), and NC at an NCC-separable last layer with enough blocks before the effective depth (`require_regime`,
    with the notes on `raw`, the raw input's metrics, where given; the coverage a note where not `blocks_scored`)."""
    v = Verdict(claim)
    v.require_finite(hist)
    require_terminal_phase(v, hist, n)
    require_regime(v, hist, n, raw, blocks_scored)
    return v
