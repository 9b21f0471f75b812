"""The shared parts of paper 003's (MLI) experiments: the data of MLI-1…5, their plateau summaries and rows with the
thresholds of ours inside them varied, the figure of the interpolation curves, the paper-profile VGG (without
BatchNorm) for CIFAR and a record callback for per-class losses and output biases during training. The FCN nets
train and interpolate in `nbdemo.papers.mli.batched`.
"""
import math

import matplotlib.pyplot as plt
import torch
from torch import nn

from nbdemo.claims.verdict import alt, ours
from nbdemo.ml.data import DATASETS, load
from nbdemo.ml.ensemble import ensemble_forward
from nbdemo.papers.mli.metrics import class_losses, plateau

VGG_CONFIGS = {
    11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    13: [64, 64, "M", 128, 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    19: [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M", 512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    """VGG-11/13/16/19 for 32×32 inputs, no BatchNorm, one linear classifier (paper profile only).

    Kaiming-normal weights, zero biases; out_scale=β multiplies every layer's weights by β^(1/depth),
    depth counting the conv layers and the classifier, as `nbdemo.ml.models.MLP` does.
    """

    def __init__(self, depth=16, in_channels=3, n_classes=10, *, bias="all", out_scale=None):
        super().__init__()
        layers, c = [], in_channels
        for v in VGG_CONFIGS[depth]:
            if v == "M":
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1, bias=bias == "all"), nn.ReLU()]
                c = v
        self.features = nn.Sequential(*layers, nn.Flatten())
        self.classifier = nn.Linear(c, n_classes, bias=bias != "none")
        weighted = [m for m in self.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
        scale = 1.0 if out_scale is None else out_scale ** (1 / len(weighted))
        with torch.no_grad():
            for m in weighted:
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu").mul_(scale)
                if m.bias is not None:
                    m.bias.zero_()

    def forward(self, x):
        return self.classifier(self.features(x))


def class_loss_and_bias(model, X, y, k):
    """A `record(params, step)` of an ensemble's stacked state dict `params` (as `nbdemo.ml.mlps.train_mlps` and
    `nbdemo.ml.ensemble.train_ensemble` hold it): per-class mean loss (N, k), per-class largest sample loss (N, k)
    and output bias (N, k)."""
    bias = f"linears.{len(model.linears) - 1}.bias"

    def record(params, step):
        logits = ensemble_forward(model, params, X)
        return {"class_loss": torch.stack([class_losses(out, y, k) for out in logits]).cpu().numpy(),
                "class_worst": torch.stack([class_losses(out, y, k, "amax") for out in logits]).cpu().numpy(),
                "bias": params[bias].double().cpu().numpy()}

    return record


def fcn_data(dataset, n_per_class, n_alphas, *, device, seed):
    """The data of MLI-1…5: a balanced training sample (X, y) of `dataset`, its number of classes k and the grid of
    `n_alphas` values of α in [0, 1]. Returns (X, y, k, alphas) and says what they are in one line."""
    X, y = load(dataset, n_per_class=n_per_class, device=device, seed=seed)
    k = DATASETS[dataset][1]
    print(f"{dataset}: {len(X)} training images, {k} classes; interpolation evaluated on all of them at {n_alphas} α")
    return X, y, k, torch.linspace(0, 1, n_alphas)


PLATEAU = dict(eps_frac=0.05, tol=0.01, hold=3, widen=1.0)  # the thresholds of ours inside `plateau`, as used here
INNER = {  # each threshold's name on the page, which plateau kinds it acts on, and its values 10% lower and higher
    "tol": ("error tolerance below 1 - 1/k: 0.01 (ours)", ("error",), (0.009, 0.011)),
    "eps_frac": ("loss band half-width eps = 0.05 log k (ours)", ("loss",), (0.045, 0.055)),
    "widen": ("loss band widening alpha*Delta_max (ours; x0.9, x1.1)", ("loss",), (0.9, 1.1)),
    "hold": ("hold: 3 low grid points end a plateau (ours; an integer, varied to 2 and 4)", ("error", "loss"), (2, 4)),
}


def plateaus(curves, k, *, eps_frac=0.05, tol=0.01, hold=3, widen=1.0):
    """plateau() of each member's curve, as {key: (n_members,) float64 tensor}: eps = eps_frac·log k, and the loss
    band widens by widen·α^d·Δ_max, d the degree in α of the output bias on the curve's path (1 on the linear path,
    the depth on the homogeneous one; see `plateau`). A net whose curve is not finite (its training diverged) has
    no plateau: NaN in every key, so that no statistic is computed on it."""
    eps = eps_frac * math.log(k)
    ps = [plateau(c["alpha"], c["error"], c["loss"], k, eps=eps, tol=tol, hold=hold,
                  delta_max=widen * c.get("delta_max", 0.0), bias_degree=c.get("bias_degree", 1)) for c in curves]
    ps = [p if diverged is False else dict.fromkeys(p, math.nan) for p, diverged in zip(ps, map(_diverged, curves))]
    return {key: torch.tensor([p[key] for p in ps], dtype=torch.float64) for key in ps[0]}


def _diverged(curve):
    """Whether a net's interpolation curve, or its output bias gap, is not finite: its training diverged."""
    return not (torch.isfinite(torch.as_tensor(curve["loss"])).all() and math.isfinite(curve.get("delta_max", 0.0)))


def summarize(runs, k, **thresholds):
    """plateaus() of every run, printed as mean ± std with each run's mean trained error; {name: plateaus}.

    thresholds: those of `plateaus` (default `PLATEAU`: eps = 0.05 log k, tol 0.01, hold 3, the full widening).
    """
    summary = {name: plateaus(curves, k, **thresholds) for name, curves in runs.items()}
    for name, p in summary.items():
        fit = torch.tensor([c["error"][-1] for c in runs[name]])
        print(f"{name:>24}: error plateau {p['error_len'].mean():.2f} ± {p['error_len'].std():.2f}, "
              f"loss plateau {p['loss_len'].mean():.2f} ± {p['loss_len'].std():.2f}, trained error {fit.mean():.3f}")
    return summary


def inner(runs, k, statistic, kind):
    """The thresholds of ours inside `plateau` that act on `kind` ("error" or "loss") plateaus, for a row's `inner=`:
    {name: (statistic with it 10% lower, 10% higher)}, each recomputed from the stored curves.

    statistic: summary -> the row's number, where summary is {name: plateaus(...)} as `summarize` returns it.
    """
    out = {}
    for key, (name, kinds, values) in INNER.items():
        if kind in kinds:
            out[name] = tuple(statistic({n: plateaus(c, k, **{**PLATEAU, key: x}) for n, c in runs.items()})
                              for x in values)
    return out


FITS = ("the paper's nets are trained until 'the training succeeds in all the settings' (§6; app. D): "
        "read as at most 5% of the training set misclassified at θ(T)")
LOOSE_FIT = ("30% of the training set: a no-bias net has no bias gap, so its error leaves 1 − 1/k as soon as its signal "
             "does, however well it fits; a bias net that fits less has a smaller gap and so a shorter plateau, which "
             "can only weaken the comparison (the paper's own fit, §6, is not reached within this notebook's budget at "
             "the paper's lr)")


def require_trained(v, runs, hists, max_error=0.05, labels=None, why=FITS):
    """The requirements of MLI-1…5: finite training, and every net fits its training set (error at α = 1 at most
    `max_error`, for the reason `why`).

    labels: the name of each setting in the row names (the keys of `hists` unless given), which must not hold a
    value that the claim's control profile changes (control rows are matched to the default rows by name).
    """
    for label, h in zip(labels or list(hists), hists.values()):
        v.require_finite(h, f"{label}: training stayed finite")
    worst = max(max(c["error"][-1].item() for c in curves) for curves in runs.values())
    v.require("every trained net fits its training set: largest error at α = 1", worst, "<=", max_error,
              source=ours(why), alternatives={
                  "fit: at most 1% training error": alt(worst, "<=", 0.01, "'the training succeeds' (§6) read as the "
                                                        "set fitted up to a few images"),
                  "fit: at most 10% training error": alt(worst, "<=", 0.10, "a looser reading of success: most of "
                                                         "the set fitted, the plateau already formed")})


def plot_interpolation(runs, k, styles=None):
    """Loss (left) and error (right) along α: mean over members, shaded ± one standard deviation; the figure.

    runs: {label: list of member curves}; styles: optional {label: matplotlib kwargs}.
    """
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
    for i, (label, curves) in enumerate(runs.items()):
        style = {"color": f"C{i}", **(styles or {}).get(label, {})}
        a = curves[0]["alpha"]
        for ax, key in zip(axes, ("loss", "error")):
            c = torch.stack([cv[key] for cv in curves])
            m, s = c.mean(0), c.std(0)
            ax.plot(a, m, label=label, **style)
            ax.fill_between(a, m - s, m + s, color=style["color"], alpha=0.2, lw=0)
    axes[0].axhline(math.log(k), color="grey", lw=0.8, ls=":")
    axes[1].axhline(1 - 1 / k, color="grey", lw=0.8, ls=":")
    axes[0].set(xlabel="α", ylabel="training loss", title="loss interpolation")
    axes[1].set(xlabel="α", ylabel="training error", title="error interpolation")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    return fig
