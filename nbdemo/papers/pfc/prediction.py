"""PFC-3's verdict rows (Wang, Gai & Zhang, Assumption 1, Theorems 1-2, Fig. 3): Theorem 1's assumption holds on the
data, and the PFC metrics fall along the straight line from the input features to the last-layer features (Eq. 10).
How closely the measured layers follow that geodesic curve, for which the paper gives a picture (Fig. 3) and no
measure, is a note, as are the comparison with a null model that knows only the two end layers, Theorem 2's premise
and Assumption 1's straightness.
"""
import numpy as np

from nbdemo.claims.verdict import paper
from nbdemo.papers.pfc.metrics import (class_means, curve_error, geodesic_distance, linear_in_position,
                                       straightness, theorem1_inner)
from nbdemo.papers.pfc.regime import ncc_correct

# The metrics whose curve the notes compare with the layers, and whether on a log10 scale (PFC1, as Fig. 3 plots it).
LOG = {"PFC1": True, "PFC2": False}


def curve_errors(metrics, pos, ts, curve):
    """For PFC1 (log10) and PFC2: the inner layers' largest deviation, relative to the endpoint range
    (`curve_error`), from the geodesic `curve` (computed at `ts`, read at the layers' positions `pos`) and from the
    null model linear in relative position (`linear_in_position`). {name: {"geodesic": ..., "linear": ...}}."""
    return {name: {"geodesic": curve_error(metrics[name], np.interp(pos, ts, curve[name]), log=log),
                   "linear": curve_error(metrics[name], linear_in_position(metrics[name], pos, log=log), log=log)}
            for name, log in LOG.items()}


def transport_cost(H0, H1, y):
    """Theorem 2's transport cost ||H~(1) - H~(0)||_F^2 (§III-B) between the class means of two layers, each centred
    at its global mean, and its share of ||H~(0)||_F^2 + ||H~(1)||_F^2: Theorem 1's assumption,
    sum_k <h~_k(0), h~_k(1)> >= 0, holds exactly when that share is at most 1 (the identity below Theorem 1).
    Returns (cost, share)."""
    centred = []
    for H in (H0, H1):
        means, _ = class_means(H, y)
        centred.append(means - H.reshape(len(H), -1).double().mean(0))
    cost = float(((centred[1] - centred[0]) ** 2).sum())
    return cost, cost / float(sum((c ** 2).sum() for c in centred))


def geodesic_rows(v, feats, y, metrics, pos, ts, curve):
    """Add PFC-3's rows to Verdict `v`, from the layers' features `feats`, their `metrics` and positions `pos`, and
    the geodesic `curve` at `ts` (`nbdemo.papers.pfc.metrics.geodesic`):
    - checks: Theorem 1's assumption on the data, sum_k <h~_k(0), h~_k(1)> >= 0 ("Empirical result in Section IV-A
      shows that this assumption is valid", §III-B); PFC1 and PFC2 decrease at every step along the line (Theorems
      1-2; "the PFC1 metric is indeed a monotonic decrease", §III-B; "both observations and predictions are
      monotonic", Fig. 3);
    - notes: how closely the layers follow the curve (the paper gives no measure of it): for PFC1 (log10) and PFC2,
      the geodesic's largest inner-layer deviation relative to the endpoint range (`curve_errors`), and the same for
      the null model linear in position; NCC-correct samples along the line; Theorem 2's transport cost; the
      features' distance to the line and the straightness of their paths (Assumption 1)."""
    n = len(y)
    inner = theorem1_inner(feats[0], feats[-1], y)
    v.check("Theorem 1 assumption", inner, ">=", 0, expected="sum_k <h~_k(0), h~_k(1)> >= 0",
            source=paper("Theorem 1; §III-B ('Empirical result in Section IV-A shows that this assumption is valid')",
                         223))
    along = {"PFC1": -np.diff(curve["PFC1"]), "PFC2": -np.diff(curve["PFC2"]),
             "PFC3": np.diff(ncc_correct(curve, n)).astype(float)}  # each step's change in the predicted direction
    steps = len(ts) - 1
    for name, title, where, line in [
            ("PFC1", "PFC1 decreases along the line (Theorem 1)", "Theorem 1, §III-B ('indeed a monotonic decrease')",
             223),
            ("PFC2", "PFC2 decreases along the line (Theorem 2)", "Theorem 2; Fig. 3 ('predictions are monotonic')",
             352)]:
        down = int(np.sum(along[name] > 0))
        v.check(title, along[name], ">", 0, expected="down at every step of the line",
                shown=f"{down}/{steps} steps", source=paper(where, line))
    errors = curve_errors(metrics, pos, ts, curve)
    for name, log in LOG.items():
        e, scale = errors[name], " (log10)" if log else ""
        v.note(f"{name}{scale}: layers' largest deviation from the curve / endpoint range (no measure in the paper)",
               e["geodesic"], shown=f"{e['geodesic']:.3g} (0 on the curve)")
        v.note(f"{name}{scale}: the same deviation for the linear-in-position null", e["linear"],
               shown=f"{e['linear']:.3g} (geodesic {e['geodesic']:.3g})")
    kept = int(np.sum(along["PFC3"] >= 0))
    ends = ncc_correct(curve, n)
    v.note("NCC-correct samples never fewer along the line (§III-B)", kept,
           shown=f"{kept}/{steps} steps ({ends[0]} -> {ends[-1]} of {n})")
    cost, share = transport_cost(feats[0], feats[-1], y)
    v.note("Theorem 2's transport cost ||H~(1) - H~(0)||_F^2", cost,
           shown=f"{cost:.3g} ({share:.2f} of ||H~(0)||_F^2 + ||H~(1)||_F^2)")
    distance = geodesic_distance(feats, pos)
    v.note("features near the line (Assumption 1)", distance, shown=f"{distance:.3g} (0 on the line)")
    straight = straightness(feats)
    v.note("straightness of the trajectories", straight, shown=f"{straight:.3g} (1 for straight lines)")
    return errors
