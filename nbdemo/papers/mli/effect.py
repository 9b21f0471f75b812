"""The verdict of the sweeps of paper 003 (MLI-4, MLI-5), with an effect-size check: the plateau at the sweep's last
setting longer than at its first by more than the plateau metric resolves.

`nbdemo.papers.mli.experiment.check_trend` asks for an order along the sweep (a rank test over all nets), which a
trend of a grid point or two already passes; the paper's figures show longer plateaus (§5, Figs. 6 and 7). So the
difference of the mean plateau lengths between the sweep's two ends must be at least `grid_steps` α grid steps: with
the default 3, the plateau's own hold (fewer than 3 low grid points never end a plateau), below which a difference is
within what one dip of a curve moves.
"""
from nbdemo.claims.verdict import Verdict, ours
from nbdemo.papers.mli.experiment import PLATEAU, check_trend, inner, plateaus, require_trained


def end_difference(summary, names, kind):
    """Mean `kind` plateau length of the last setting minus that of the first; summary as `summarize` returns it."""
    return (summary[names[-1]][f"{kind}_len"].mean() - summary[names[0]][f"{kind}_len"].mean()).item()


def check_longer(v, runs, k, kind, *, where, grid_steps=PLATEAU["hold"]):
    """Check that the `kind` ("error" or "loss") plateau of the sweep's last setting is longer than its first's by at
    least `grid_steps` α grid steps (difference of mean lengths over the nets), the thresholds of ours inside the plateau
    varied (`inner`). where: the paper's place that states the effect."""
    names = list(runs)
    alphas = runs[names[0]][0]["alpha"]
    at_least = grid_steps / (len(alphas) - 1)
    d = end_difference({n: plateaus(c, k) for n, c in runs.items()}, names, kind)
    v.check(f"{kind} plateau longer at {names[-1]} than at {names[0]} by at least {grid_steps} grid steps: "
            "difference of mean lengths", d, ">=", at_least,
            source=ours(f"{grid_steps} α grid steps, the plateau's hold: a smaller difference is within what one dip "
                        f"of a curve moves; the paper ({where}) shows longer plateaus and gives no number"),
            shown=f"{d:.3f} (≥ {at_least:.3f})", inner=inner(runs, k, lambda s: end_difference(s, names, kind), kind))
    return d


def sweep_verdict(claim, runs, hists, k, *, where):
    """The verdict of a sweep (MLI-4, MLI-5): every net trained and fits (`require_trained`); the error plateau longer
    along the sweep (`check_trend`) and longer at its end than at its start by at least the plateau's hold
    (`check_longer`); the loss plateau longer along the sweep. where: the paper's place that states the trend."""
    v = Verdict(claim)
    require_trained(v, runs, hists)
    check_trend(v, runs, k, "error", where=where)
    check_longer(v, runs, k, "error", where=where)
    check_trend(v, runs, k, "loss", where=where)
    v.report()
    return v
