"""The PFC figures: the per-layer metrics against depth (Fig. 3) and over training (Fig. 2)."""
import numpy as np

METRIC_TITLES = {"PFC1": "within-class variability (PFC1)", "PFC2": "distance to a simplex ETF (PFC2)",
                 "PFC3": "NCC accuracy (PFC3)"}
METRIC_LABELS = {"PFC1": r"$\mathrm{tr}(\Sigma_W)\,/\,\mathrm{tr}(\Sigma_B)$",
                 "PFC2": r"$\|\widetilde{H}^{\top}\widetilde{H}\,/\,\|\widetilde{H}^{\top}\widetilde{H}\|_F - E\|_F$",
                 "PFC3": "NCC accuracy"}
# The one number the paper gives for a plotted metric: the last layer is NCC separable, PFC3 "collapses to 1" (§IV-A,
# Fig. 3); PFC1 and PFC2 are shown in its figures only.
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
