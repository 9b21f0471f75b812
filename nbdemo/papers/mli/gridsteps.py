"""Plateau lengths in whole steps of the α grid, so that MLI-3's comparisons of lengths are exact.

`nbdemo.papers.mli.metrics.plateau` gives a length as end − start in units of α, read off the grid
`torch.linspace(0, 1, n)` of `nbdemo.papers.mli.experiment.fcn_data`, which is float32: each length carries a rounding
error of about 1e-8, so an exact tie (one arm's plateau exactly half of another's) can read as a difference of either
sign. Here each length is counted in grid steps, an integer (the paper reads its curves at evenly spaced points, §5),
and a comparison of mean lengths is an exact fraction, made a float of α only at the end: a tie is exactly 0.
"""
import math
from fractions import Fraction

import torch

from nbdemo.papers.mli.metrics import LAYERS, layer_index


def grid_steps(lengths, n_alphas):
    """Lengths in α on the evenly spaced grid of `n_alphas` points in [0, 1], as whole grid steps: a list of ints
    (NaN, a float, for a net without a plateau length: one whose training diverged)."""
    steps = []
    for x in torch.as_tensor(lengths, dtype=torch.float64).tolist():
        if math.isnan(x):
            steps.append(math.nan)
            continue
        s = x * (n_alphas - 1)
        if not abs(s - round(s)) < 1e-3:
            raise ValueError(f"a length {x} is not a whole number of steps of a {n_alphas}-point grid")
        steps.append(round(s))
    return steps


def mean_length(lengths, n_alphas):
    """The mean of the lengths in α, exactly: a Fraction (NaN, a float, when a length is NaN)."""
    steps = grid_steps(lengths, n_alphas)
    if any(isinstance(s, float) for s in steps):
        return math.nan
    return Fraction(sum(steps), len(steps) * (n_alphas - 1))


def shortening(arm, normal, n_alphas, factor="1/2"):
    """mean(arm) − factor · mean(normal) of two sets of plateau lengths, exactly, as a float of α (0.0 at a tie).

    factor: a Fraction, or a number or string read as its decimal text (0.45 is 9/20)."""
    return float(mean_length(arm, n_alphas) - Fraction(str(factor)) * mean_length(normal, n_alphas))


def same_as_normal(model, output_degree=None):
    """Whether the homogeneous scheme with the output bias at `output_degree` (`nbdemo.papers.mli.metrics.
    interpolated_state`) interpolates every bias of `model` at degree 1 in α, i.e. is
    the normal interpolation itself (layer h's bias has degree h, the output layer's `output_degree` when given):
    a net whose only bias is the output one at degree 1, or a net without biases. A statistic that compares that arm
    with the normal one is then fixed by construction."""
    degree = layer_index(model)
    n_layers = sum(isinstance(m, LAYERS) for m in model.modules())
    out = {name for name, h in degree.items() if h == n_layers}
    return all((output_degree if name in out and output_degree is not None else h) == 1
               for name, h in degree.items())
