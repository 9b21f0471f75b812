"""Verdict rows that several PCB notebooks share.

The PC-bias is read off a per-PC quantity (a relative distance to the optimum, a relative spread across networks) by
its medians over bands of principal components, from the largest singular value down: the bias is there when the
medians increase strictly from the top band to the bottom one (the top directions have moved furthest). The band
edges are ours (the paper plots every PC, Fig. 4); they are declared as an inner threshold of the row, with the
statistic recomputed at edges 10% lower and 10% higher.
"""
from nbdemo.claims.verdict import alt
from nbdemo.papers.pcb.metrics import band_medians

BANDS = (10, 100)


def _steps(per_pc, edges):
    b = band_medians(per_pc, edges).tolist()
    return [w - u for u, w in zip(b, b[1:])], b


def band_order(v, name, per_pc, *, source, kind="check", edges=BANDS, inner=None, alternatives=None):
    """Add the row "band medians of `per_pc` (q,) increase strictly" to the verdict `v` (a check, or a requirement
    with kind="requirement"): its statistic is the list of differences between consecutive band medians, each > 0.
    `inner`: {threshold of ours: (per_pc with it 10% lower, with it 10% higher)} for thresholds inside the metric
    besides the band edges. `alternatives`: {name: (per_pc read another way, why)}, the row's alternative readings
    (`Verdict.check`). Returns the band medians. A non-finite `per_pc` (a diverged run) gives NaN differences,
    which fail."""
    steps, b = _steps(per_pc, edges)
    lower, higher = (tuple(round(e * f) for e in edges) for f in (0.9, 1.1))
    inner = {f"PC band edges {', '.join(map(str, edges))} (ours)": (_steps(per_pc, lower)[0], _steps(per_pc, higher)[0]),
             **{what: tuple(_steps(p, edges)[0] for p in variants) for what, variants in (inner or {}).items()}}
    labels = [f"1-{edges[0]}", *[f"{a + 1}-{c}" for a, c in zip(edges, edges[1:])], f"{edges[-1] + 1}-q"]
    row = v.require if kind == "requirement" else v.check
    alts = {what: alt(_steps(p, edges)[0], why=why) for what, (p, why) in (alternatives or {}).items()}
    row(name, steps, ">", 0, source=source, inner=inner, shown=" < ".join(f"{x:.3g}" for x in b), alternatives=alts or None,
        expected="band medians " + " < ".join(labels))
    return b
