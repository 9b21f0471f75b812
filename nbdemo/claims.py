"""The claim registry (read by the CLI, the tests and the book) and the verdict API of the notebooks."""
import json
import platform
from dataclasses import dataclass
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
VERDICT_KEY, PROVENANCE_KEY = "nbdemo.verdict", "nbdemo.provenance"

PAPERS = {
    "TFD": ("Trap of Feature Diversity in the Learning of MLPs", "liu2022trap"),
    "PCB": ("Convergence Analysis of Over-parameterized Deep Linear Networks, and the Principal Components Bias",
            "hacohen2022principal"),
    "PFC": ("Progressive Feedforward Collapse of ResNet Training", "wang2024progressive"),
    "MLI": ("Plateau in Monotonic Linear Interpolation: a \"Biased\" View of Loss Landscape for Deep Networks",
            "wang2023plateau"),
}


@dataclass(frozen=True)
class Claim:
    id: str
    title: str
    figure: str

    @property
    def paper(self):
        return self.id.split("-")[0]

    @property
    def notebook(self):
        return NOTEBOOKS / f"{self.id}.ipynb"


CLAIMS = {c.id: c for c in [
    Claim("TFD-1", "Two-phase phenomenon", "Fig. 1a-b, 2a"),
    Claim("TFD-2", "Gradient and weight-change similarity", "Fig. 2b-c"),
    Claim("TFD-3", "Primary common direction", "Fig. 4, Table 1"),
    Claim("TFD-4", "Self-enhancement", "Fig. 5-6"),
    Claim("TFD-5", "Few categories first", "Fig. 7"),
    Claim("TFD-6", "Four operations shorten the first phase", "Fig. 8, 28, 29"),
    Claim("TFD-7", "Learning sticking", "Fig. 24"),
    Claim("PCB-1", "Convergence along principal directions", "Eq. 10, Fig. 2, 4a"),
    Claim("PCB-2", "Depth speeds convergence", "Eq. 10"),
    Claim("PCB-3", "Gradient scale matrices", "Fig. 3"),
    Claim("PCB-4", "Whitening removes the bias", "Fig. 4c"),
    Claim("PCB-5", "Non-linear networks early in training", "Fig. 2 right, 4d"),
    Claim("PCB-6", "Projection to the first P components", "Fig. 5"),
    Claim("PCB-7", "Learning-order constancy", "Fig. 6, 7"),
    Claim("PCB-8", "Spectral bias in classification", "Fig. 8, Table 1"),
    Claim("PCB-9", "Early stopping and amplified components", "Fig. 9"),
    Claim("PCB-10", "Random labels converge slower", "Fig. 10-11"),
    Claim("PFC-1", "Monotone collapse across depth", "Fig. 3"),
    Claim("PFC-2", "Evolution during training", "Fig. 2"),
    Claim("PFC-3", "Geodesic prediction", "Fig. 3 (blue curves)"),
    Claim("PFC-4", "Conv ResNets", "Table I, Fig. 2-3 b-e"),
    Claim("PFC-5", "UFM vs MUFM", "Fig. 4"),
    Claim("PFC-6", "MUFM trade-off", "Fig. 5"),
    Claim("MLI-1", "Convex curve vs plateau", "Fig. 1"),
    Claim("MLI-2", "Bias creates the error plateau", "Fig. 4"),
    Claim("MLI-3", "Homogeneous bias interpolation", "Fig. 5"),
    Claim("MLI-4", "Init scale", "Fig. 6"),
    Claim("MLI-5", "Depth", "Fig. 7"),
    Claim("MLI-6", "Last-learned class has the largest bias", "Fig. 8, 17"),
    Claim("MLI-7", "The r-homogeneous-weight model", "Fig. 3"),
    Claim("MLI-8", "Plateau bounds for deep nets", "Theorem 1"),
    Claim("MLI-9", "Interpolation shape says nothing about hardness", "App. A"),
]}


def get(claim_id):
    try:
        return CLAIMS[claim_id.upper()]
    except KeyError:
        raise ValueError(f"unknown claim {claim_id!r}; `nbdemo list` shows them") from None


def _glue(key, value):
    """Store a JSON value in the cell's outputs, hidden in the book (myst-nb's glue format); the runner reads it."""
    from myst_nb import glue
    glue(key, json.dumps(value, sort_keys=True), display=False)


def record_provenance(**extra):
    _glue(PROVENANCE_KEY, {"torch": torch.__version__, "python": platform.python_version(),
                           "threads": torch.get_num_threads(), "cuda": torch.version.cuda,
                           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, **extra})


def fmt(x):
    """Round a measured value for the verdict table (3 significant digits)."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return f"{float(x):.3g}"


REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
KINDS = ("requirement", "check", "note")


def outcome(rows):
    """A run's outcome from its rows: INCONCLUSIVE when a requirement fails, else REPRODUCED when every check holds
    (and there is at least one), else NOT REPRODUCED. Notes are not scored."""
    if any(not r["ok"] for r in rows if r["kind"] == "requirement"):
        return INCONCLUSIVE
    checks = [r["ok"] for r in rows if r["kind"] == "check"]
    return REPRODUCED if checks and all(checks) else NOT_REPRODUCED


def tally(rows, kind):
    """"k/n": of the rows of one kind, how many passed."""
    rows = [r for r in rows if r["kind"] == kind]
    return f"{sum(bool(r['ok']) for r in rows)}/{len(rows)}"


def describe(rows):
    """"NOT REPRODUCED (requirements met 2/2, checks hold 3/4)"."""
    return f"{outcome(rows)} (requirements met {tally(rows, 'requirement')}, checks hold {tally(rows, 'check')})"


class Verdict:
    """The rows of one claim's verdict, stated before the results are seen.

    - `require`: the run reached the regime the claim is about (trained to fit, the first phase exists, the solver
      converged, no divergence). A failed requirement makes the run INCONCLUSIVE: it says nothing of the claim.
    - `check`: what the claim says, with the paper's statistic (and its value beside ours where the paper gives one).
    - `note`: a value reported and not scored (a diagnostic, a sub-claim the paper does not make).

    v = Verdict("TFD-1"); v.require_finite(hist); v.check(name, expected=..., measured=..., ok=...); v.report()
    """

    def __init__(self, claim_id):
        self.claim = get(claim_id).id
        self.rows = []

    def _row(self, kind, name, expected, measured, ok):
        self.rows.append({"kind": kind, "name": name, "expected": str(expected), "measured": fmt(measured),
                          "ok": None if ok is None else bool(ok)})

    def require(self, name, *, expected, measured, ok):
        self._row("requirement", name, expected, measured, ok)

    def check(self, name, *, expected, measured, ok):
        self._row("check", name, expected, measured, ok)

    def note(self, name, *, measured, expected=""):
        self._row("note", name, expected, measured, None)

    def require_finite(self, history, name="training stayed finite"):
        """A failed requirement naming the step where the loss became NaN or inf, if it did."""
        at = history.diverged_at
        self.require(name, expected="no NaN/inf loss", measured="finite" if at is None else f"diverged at step {at}",
                     ok=at is None)

    @property
    def outcome(self):
        return outcome(self.rows)

    def table(self):
        mark = {True: "PASS", False: "FAIL", None: "-"}
        rows = [("kind", "row", "expected", "measured", "")] + [
            (r["kind"], r["name"], r["expected"], r["measured"], mark[r["ok"]]) for r in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        lines.append(f"{self.claim}: {describe(self.rows)}")
        return "\n".join(lines)

    def report(self):
        print(self.table())
        _glue(VERDICT_KEY, {"claim": self.claim, "outcome": self.outcome, "rows": self.rows})
