"""Quantities of the Trap-of-Feature-Diversity paper (Liu et al.), as pure functions of tensors."""
import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Phase:
    """The first phase: it ends at step `end`; `ended` is False when the loss never dropped (learning sticking)."""
    end: int
    ended: bool


def first_phase(steps, loss, n_classes, drop=0.1):
    """The one definition of the first phase, used by every TFD notebook.

    `loss` is the training loss on a fixed evaluation set, recorded at `steps`. The plateau level is
    min(loss[0], ln k), the loss of a net that has learned nothing beyond chance. The first phase ends at the
    first recorded step whose loss is below (1 - drop) times that level, i.e. the loss has dropped
    significantly (10% by default). If it never does, the phase lasts the whole budget and `ended` is False.
    """
    steps, loss = np.asarray(steps), np.asarray(loss, dtype=float)
    level = min(loss[0], math.log(n_classes))
    below = np.nonzero(loss < (1 - drop) * level)[0]
    return Phase(int(steps[below[0]]), True) if len(below) else Phase(int(steps[-1]), False)


def interclass_cosine(F, y):
    """Mean cosine similarity E[cos(F|x, F|x')] over all pairs of samples from different classes.

    Computed from class sums of the unit-normalised rows in O(n·d), in float64. An all-zero feature row
    (every ReLU off) counts as the zero vector, with cosine 0 to everything.
    """
    U = F.reshape(len(F), -1).double()
    U = U / U.norm(dim=1, keepdim=True).clamp_min(1e-30)
    onehot = torch.nn.functional.one_hot(y).double()
    class_sums = onehot.T @ U
    counts = onehot.sum(0)
    between = U.sum(0).square().sum() - class_sums.square().sum()  # sum of <u_i, u_j> over y_i != y_j
    return float(between / (len(U) ** 2 - counts.square().sum()))
