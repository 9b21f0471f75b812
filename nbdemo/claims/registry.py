"""The claim registry (read by the CLI, the tests and the book), and how a notebook records its verdict and provenance
in its outputs."""
import json
import platform
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
VERDICT_KEY, PROVENANCE_KEY = "nbdemo.claims.verdict", "nbdemo.provenance"

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
    import torch  # here, not on import: the command line reads the registry without torch
    _glue(PROVENANCE_KEY, {"torch": torch.__version__, "python": platform.python_version(),
                           "threads": torch.get_num_threads(), "cuda": torch.version.cuda,
                           "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, **extra})
