"""Times read off learning curves drawn as lines through their records (PCB-6: when a curve peaks, §3.3, Fig. 5a)."""
import math

import numpy as np


def crossing(curve, times, level):
    """The time at which `curve`, drawn as a straight line between consecutive records at `times`, first reaches
    `level`: times[0] if the first record does, the linear interpolation between the records around the first
    crossing otherwise; inf if no record reaches it (NaN records never do)."""
    c, t = np.asarray(curve, dtype=float), np.asarray(times, dtype=float)
    hit = np.flatnonzero(c >= level)
    if not len(hit):
        return math.inf
    i = int(hit[0])
    if i == 0:
        return float(t[0])
    return float(t[i - 1] + (level - c[i - 1]) / (c[i] - c[i - 1]) * (t[i] - t[i - 1]))


def converged_at(curve, times, tol):
    """The first time at which `curve` comes within `tol` of its maximum (a record, not interpolated: the plateau's
    start); inf when the curve has no finite record."""
    c = np.asarray(curve, dtype=float)
    if not np.isfinite(c).any():
        return math.inf
    return float(np.asarray(times, dtype=float)[np.argmax(c >= np.nanmax(c) - tol)])
