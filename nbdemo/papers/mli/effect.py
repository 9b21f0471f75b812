"""The verdict of the sweeps of paper 003 (MLI-4, MLI-5) on the paper's statistic, the mean plateau length of each
setting over its nets (§5: "smaller initialization does create longer plateau in loss and error interpolation",
Fig. 6; "deeper networks do have longer plateau in loss and error interpolation", Fig. 7). Lengths are counted in
whole α grid steps (`nbdemo.papers.mli.gridsteps`), so that a difference equal to a threshold of whole steps compares
as equal.

For the error plateau and for the loss plateau, two checks (`sweep_verdict`):
- the mean plateau never shortens along the sweep (`check_never_shorter`): the smallest difference of the mean
  lengths of neighbouring settings, in the sweep's order, is at least −1 α grid step (ours: the grid's resolution;
  the paper's figures give no number);
- the mean plateau at the sweep's last setting is longer than at its first by at least `grid_steps` α grid steps
  (`check_longer`): with the default 3, the plateau's own hold (fewer than 3 low grid points never end a plateau),
  below which a difference is within what one dip of a curve moves.
The one-sided permutation p-value of Spearman's ρ between a net's place in the sweep and its plateau length
(`nbdemo.papers.mli.metrics.trend_test`) is a note (`note_trend`): a comparison against no order at all, which a
trend of a grid point or two already passes, not the paper's statistic.
"""
import math

import torch

from nbdemo.claims.verdict import Verdict, alt, ours
from nbdemo.papers.mli.experiment import PLATEAU, inner, plateaus, require_trained
from nbdemo.papers.mli import gridsteps
from nbdemo.papers.mli.metrics import trend_test


def mean_lengths(summary, names, kind, n_alphas):
    """The mean `kind` plateau length over the nets of each setting, in the order of `names`, exactly
    (`nbdemo.papers.mli.gridsteps.mean_length`: Fractions of α); summary as `summarize` returns it."""
    return [gridsteps.mean_length(summary[n][f"{kind}_len"], n_alphas) for n in names]


def end_difference(summary, names, kind, n_alphas):
    """Mean `kind` plateau length of the last setting minus that of the first."""
    means = mean_lengths(summary, names, kind, n_alphas)
    return float(means[-1] - means[0])


def smallest_step(summary, names, kind, n_alphas):
    """The smallest difference of mean `kind` plateau lengths between neighbouring settings, in the order of `names`
    (mean of the next setting minus mean of this one): negative where the mean plateau shortens."""
    means = mean_lengths(summary, names, kind, n_alphas)
    steps = [float(b - a) for a, b in zip(means, means[1:])]
    return math.nan if any(math.isnan(s) for s in steps) else min(steps)


def _n_alphas(runs):
    return len(next(iter(runs.values()))[0]["alpha"])


def check_never_shorter(v, runs, k, kind, *, where):
    """Check that the mean `kind` ("error" or "loss") plateau never shortens along the sweep, in the order of `runs`:
    the smallest difference of neighbouring means at least −1 α grid step, the thresholds of ours inside the plateau
    varied (`inner`). The means along the sweep are shown. where: the paper's place that states the effect."""
    names, n_alphas = list(runs), _n_alphas(runs)
    step = 1 / (n_alphas - 1)
    summary = {n: plateaus(c, k) for n, c in runs.items()}
    d, means = smallest_step(summary, names, kind, n_alphas), mean_lengths(summary, names, kind, n_alphas)
    v.check(f"mean {kind} plateau never shortens along {' → '.join(names)}: smallest difference of neighbouring "
            "mean lengths", d, ">=", -step,
            source=ours("one α grid step, the grid's resolution: a smaller reversal is within what the grid "
                        f"resolves; the paper ({where}) gives no number"),
            shown=f"{d:.3f} (≥ {-step:.3f}); means " + " → ".join(f"{float(m):.2f}" for m in means),
            inner=inner(runs, k, lambda s: smallest_step(s, names, kind, n_alphas), kind),
            alternatives={"never shortens: no reversal at all": alt(d, ">=", 0, "'longer plateau' along the sweep "
                                                                    "(§5) read strictly, each mean at least the last"),
                          "never shortens: reversals up to 2 grid steps": alt(d, ">=", -2 * step, "two steps: one dip "
                                                                              "of a single net moves a mean so far")})
    return d


def check_longer(v, runs, k, kind, *, where, grid_steps=PLATEAU["hold"]):
    """Check that the `kind` ("error" or "loss") plateau of the sweep's last setting is longer than its first's by at
    least `grid_steps` α grid steps (difference of mean lengths over the nets), the thresholds of ours inside the plateau
    varied (`inner`). where: the paper's place that states the effect."""
    names, n_alphas = list(runs), _n_alphas(runs)
    at_least = grid_steps / (n_alphas - 1)
    d = end_difference({n: plateaus(c, k) for n, c in runs.items()}, names, kind, n_alphas)
    v.check(f"{kind} plateau longer at {names[-1]} than at {names[0]} by at least {grid_steps} grid steps: "
            "difference of mean lengths", d, ">=", at_least,
            source=ours(f"{grid_steps} α grid steps, the plateau's hold: a smaller difference is within what one dip "
                        f"of a curve moves; the paper ({where}) shows longer plateaus and gives no number"),
            shown=f"{d:.3f} (≥ {at_least:.3f})",
            inner=inner(runs, k, lambda s: end_difference(s, names, kind, n_alphas), kind),
            alternatives={"longer by at least 1 grid step": alt(d, ">=", 1 / (n_alphas - 1), "any difference the grid "
                                                                "resolves counts as longer"),
                          "longer by at least 5 grid steps": alt(d, ">=", 5 / (n_alphas - 1), "a tenth of the path: "
                                                                 "a difference the figures would show plainly")})
    return d


def note_trend(v, runs, k, kind):
    """Note the one-sided permutation p-value of Spearman's ρ between each net's place in the sweep and its `kind`
    plateau length, over all nets (`trend_test`): how unlikely the order is if place and length were unrelated.
    Returns (rho, p)."""
    n_alphas = _n_alphas(runs)  # lengths in whole grid steps, so that equal lengths tie
    rho, p = trend_test([torch.tensor(gridsteps.grid_steps(plateaus(c, k)[f"{kind}_len"], n_alphas),
                                      dtype=torch.float64) for c in runs.values()])
    v.note(f"{kind} plateau: rank trend along the sweep over all nets, one-sided permutation p-value of Spearman's ρ",
           p, shown=f"p = {p:.2g} (ρ = {rho:.2f})")
    return rho, p


def sweep_verdict(claim, runs, hists, k, *, where):
    """The verdict of a sweep (MLI-4, MLI-5): every net trained and fits (`require_trained`); then, for the error and
    the loss plateau, the mean plateau never shortens along the sweep (`check_never_shorter`), is longer at its end
    than at its start by at least the plateau's hold (`check_longer`), and the rank trend's p-value as a note
    (`note_trend`). where: the paper's place that states the effect."""
    v = Verdict(claim)
    require_trained(v, runs, hists)
    for kind in ("error", "loss"):
        check_never_shorter(v, runs, k, kind, where=where)
        check_longer(v, runs, k, kind, where=where)
        note_trend(v, runs, k, kind)
    v.report()
    return v
