"""Synthetic datasets of the PC-bias paper: the 2-D frequency dataset (§5, app. D.3) and datasets that
are linearly separable in their first P principal components (§6.2)."""
import math

import torch

from nbdemo.ml.data import dry_run
from nbdemo.papers.pcb.learning_order import frequency_label
from nbdemo.papers.pcb.metrics import w_opt

# App. D.3: m = 10 frequencies κ = 0..9 and the listed phases (φ_1 is irrelevant since κ_1 = 0).
KAPPA = list(range(10))
PHI = [0.0, 3.46, 5.08, 0.45, 2.10, 1.4, 5.36, 0.85, 5.9, 5.16]


def frequency_data(n, *, seed=0, kappa=KAPPA, phi=PHI):
    """n points (z, w), z ~ U[-1, 1], w ~ U[-2π, 2π], labelled 1 above the boundary w = λ(z) of Eq. 11, else 0.

    Returns (Z (n, 2) float32 raw coordinates, y (n,) int64). The paper uses 10,000 train and 1,000 test points.
    A dry run (`data.dry_run`) draws at most 320, as `data.load` does.
    """
    n = min(n, 320) if dry_run() else n
    g = torch.Generator().manual_seed(seed)
    z = torch.rand(n, generator=g) * 2 - 1
    w = (torch.rand(n, generator=g) * 2 - 1) * 2 * math.pi
    return torch.stack([z, w], 1), frequency_label(z, w, kappa, phi)


def separable_in_top_components(X, y, U, P, n_classes):
    """Labels made linearly separable in the first P principal components (§6.2): the prediction of the optimal
    linear map W_opt fitted on the projected data, i.e. the labels of the points it misclassifies are switched.

    X (n, q) rows, y (n,) labels (real or shuffled), U (q, q) principal directions. Returns (n,) int64.
    """
    Xp = X.double() @ U[:, :P]
    W = w_opt(Xp, torch.nn.functional.one_hot(y, n_classes))
    return (Xp @ W.T).argmax(1)
