"""Quantities of the Trap-of-Feature-Diversity paper (Liu et al.), as pure functions of tensors."""
import math
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Phase:
    """The two phases of one run, on the grid of recorded steps (see `first_phase`).

    last: the last recorded step of the first phase; second: the first recorded step of the second phase, or None
    when the loss never dropped (learning sticking: a first phase as long as the budget); drop: the first recorded
    step at which the loss is significantly below its plateau (what detects the second phase), or None.
    """
    last: int
    second: int = None
    drop: int = None

    @property
    def ended(self):
        return self.second is not None


def first_phase(steps, loss, n_classes, drop=0.1):
    """The one definition of the two phases, used by every TFD notebook.

    The paper divides training by the training loss: in the first phase it "does not decrease significantly", in
    the second it "suddenly begins to decrease" (§3; app. A), and the boundary is where the features are least
    diverse (app. A). `loss` is the loss on a fixed evaluation set, recorded at `steps`.

    1. The plateau level is min(loss[0], ln k), the loss of a net that has learned nothing beyond chance. The second
       phase is detected at `drop`, the first record whose loss is below (1 - drop) times that level (a significant
       decrease: 10% by default). That record already lies inside the decrease, so it does not mark its start.
    2. The start of the decrease is the knee of a hinge fit, loss ≈ a + b·max(0, t - τ), least squares over the
       records from the first one within `drop` of the plateau level up to `drop`, with τ on the grid of whole steps.
       The first phase's last step `last` is the last record at or before τ; the second phase's first step
       `second` is the next record. Every record up to `last` lies on the fitted plateau.
    If the loss never drops, the first phase lasts the whole budget: last = steps[-1], second = drop = None.
    """
    steps, loss = np.asarray(steps), np.asarray(loss, dtype=float)
    level = min(loss[0], math.log(n_classes))
    below = np.nonzero(loss < (1 - drop) * level)[0]
    if not len(below):
        return Phase(int(steps[-1]))
    i = int(below[0])
    start = int(np.nonzero(loss[:i + 1] <= (1 + drop) * level)[0][0])
    t, y = steps[start:i + 1].astype(float), loss[start:i + 1]
    if len(t) < 2:
        return Phase(int(steps[i - 1]), int(steps[i]), int(steps[i]))
    tau = np.arange(t[0], t[-1])[:, None]                           # candidate knees, one whole step apart
    x = np.maximum(0.0, t[None, :] - tau)                            # (candidates, records)
    xc, yc = x - x.mean(1, keepdims=True), y - y.mean()
    sxx, sxy = (xc * xc).sum(1), (xc * yc).sum(1)
    sse = (yc * yc).sum() - np.where(sxx > 0, sxy ** 2 / np.where(sxx > 0, sxx, 1), 0.0)
    knee = tau[int(np.argmin(sse)), 0]                              # the first of equally good knees
    j = start + int(np.searchsorted(t, knee, side="right")) - 1      # last record at or before the knee
    return Phase(int(steps[j]), int(steps[j + 1]), int(steps[i]))


def in_first_phase(steps, phase):
    """The indices of the records that lie in the first phase (step <= phase.last)."""
    return [i for i, s in enumerate(steps) if s <= phase.last]


def window(n, share=0.25):
    """How many of n records make the window of `trend` at either end: a share of them (a quarter), at least one."""
    return max(1, int(n * share))


def trend(steps, values, share=0.25):
    """Two statistics of "keeps increasing" over a series, fixed for every TFD notebook.

    rho: Spearman's rank correlation of the values with the step (1 for a monotone rise, about 0 without a trend);
    rise: the mean over the last quarter of the records minus the mean over the first quarter (`window`; `share`
    varies the quarter), so that no single record (a start-up transient, a dip at the boundary) decides it. NaN
    with < 3 records, and rho NaN for a constant series.
    """
    from scipy.stats import spearmanr
    v = np.asarray(values, dtype=float)
    if len(v) < 3:
        return float("nan"), float("nan")
    q = window(len(v), share)
    rho = float("nan") if np.all(v == v[0]) else float(spearmanr(steps, v).statistic)
    return rho, float(v[-q:].mean() - v[:q].mean())


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


# --- Per-sample gradients, weight changes and common directions (TFD-2 … TFD-5) ---------------------------
# Conventions: a linear layer's weight is W^(l) ∈ R^{h×d} (out × in, as nn.Linear.weight); F^(l-1) ∈ R^d is its
# input feature, g^(l) = D^(l) Ḟ^(l) ∈ R^h the gradient of one sample's loss w.r.t. its pre-activation, so the
# weight change made by sample x under SGD with learning rate lr is ΔW^(l)|x = -lr · g^(l) F^(l-1)ᵀ (rank one).
# "Pseudo-neurons" are the d columns w_i ∈ R^h of W^(l) (the rows of W^(l)ᵀ in the backward pass, Eq. 2).


def feature_grads(features, logits, y):
    """Per-sample gradients [Ḟ for each tensor in `features`] + [∂ℓ/∂logits] of the cross-entropy ℓ(x).

    One backward pass of the *summed* loss: sample x's loss depends only on row x, so row x of each gradient is
    that sample's own gradient (not divided by n). `features` must be in `logits`' autograd graph (e.g. the
    hidden features F1…F_{L-1} returned by `MLP.features`, not the input).
    """
    loss = torch.nn.functional.cross_entropy(logits, y, reduction="sum")
    return list(torch.autograd.grad(loss, [*features, logits]))


def weight_changes(g, f_prev, lr):
    """Per-sample weight changes ΔW|x = -lr · g_x f_prev,xᵀ, shape (n, h, d); this holds n·h·d numbers."""
    return -lr * g[:, :, None] * f_prev[:, None, :]


def mean_weight_change(g, f_prev, lr):
    """E_x ΔW|x = -lr · Gᵀ F_prev / n, shape (h, d), without materialising the per-sample changes."""
    return -lr * g.T @ f_prev / len(g)


def class_weight_changes(g, f_prev, y, lr, n_classes):
    """E_{x ∈ X_c} ΔW|x = -lr · G_cᵀ F_prev,c / n_c for each category c, shape (n_classes, h, d): the change that the
    samples of one category make together (NaN for a category absent from y). One (h × n_c)(n_c × d) product each."""
    out = torch.full((n_classes, g.shape[1], f_prev.shape[1]), float("nan"), dtype=g.dtype, device=g.device)
    for c in range(n_classes):
        mask = y == c
        if mask.any():
            out[c] = -lr * g[mask].T @ f_prev[mask] / mask.sum()
    return out


def _unit(x, dim=-1):
    x = x.double()
    return x / x.norm(dim=dim, keepdim=True).clamp_min(1e-300)


def same_class_cosine(grads, y):
    """E_c E_{x≠x' ∈ X_c} cos(Ḟ|x, Ḟ|x') (Fig. 2b): mean pairwise cosine within each class, then the unweighted
    mean over classes. grads: (n, h); y: (n,). Classes with fewer than two samples are skipped. float64."""
    u = _unit(grads.flatten(1))
    per_class = []
    for c in y.unique():
        uc = u[y == c]
        m = len(uc)
        if m > 1:
            s = uc.sum(0)
            per_class.append(((s @ s) - m) / (m * (m - 1)))  # Σ_{x≠x'} cos = ‖Σ u‖² − Σ ‖u‖²
    return torch.stack(per_class).mean().item()


def pseudo_neuron_cosine(dW):
    """Mean cos(Δw_i, Δw_j) over pairs i ≠ j of the columns of dW (h, d) (Fig. 2c); zero columns are skipped.
    A stack (..., h, d) gives one value per matrix, as a tensor; one matrix gives a float. float64.

    A single sample's change is rank one (all its columns are parallel to g, cos = sign(f_i f_j)), so the paper's
    quantity is informative only for the change of several samples, e.g. `class_weight_changes`.
    """
    cols = dW.double().transpose(-1, -2)                     # (..., d, h): the pseudo-neurons
    norms = cols.norm(dim=-1)
    u = cols / norms.clamp_min(1e-300)[..., None]            # zero columns stay zero and add nothing to s
    m, s = (norms > 0).sum(-1).double(), u.sum(-2)
    out = ((s * s).sum(-1) - m) / (m * (m - 1))
    return out.item() if out.dim() == 0 else out


def common_direction(dW):
    """The unit common direction C of Eq. (5): argmin_C Σ_t ‖dW_t − C ΔV_tᵀ‖²_F over a stack dW (T, h, d) (or one
    (h, d) matrix), i.e. the top eigenvector of Σ_t dW_t dW_tᵀ. Sign convention: its largest entry is positive.

    For per-sample rank-one changes -lr g_x f_xᵀ pass (‖f_x‖ g_x)[:, :, None]: it has the same Σ dW dWᵀ up to lr².
    """
    dW = dW.double().reshape(-1, *dW.shape[-2:])
    M = torch.einsum("thd,tkd->hk", dW, dW)
    C = torch.linalg.eigh(M).eigenvectors[:, -1]
    return C * torch.sign(C[C.abs().argmax()])


def decompose(W, C):
    """Lemmas 1-2: Wᵀ = V Cᵀ + ε with V = Wᵀ C / CᵀC and ε = Wᵀ − Wᵀ C Cᵀ / CᵀC (so ε C = 0).

    W: (..., h, d) a weight or a weight change; C: (h,). Returns V (..., d) and ε (..., d, h), in float64.
    """
    W, C = W.double(), C.double()
    V = W.transpose(-1, -2) @ C / (C @ C)
    return V, W.transpose(-1, -2) - V[..., None] * C


def common_directions(dW, k=5):
    """Successive common directions C_1…C_k of a stack of weight changes dW (T, h, d) (app. G, Fig. 4).

    C_i is the common direction (Eq. 5) of what is left after removing C_1…C_{i-1}; ΔV_{i,t} its coefficients.
    The strength is s_i = ‖C_i ΔV̄_iᵀ‖_F with ΔV̄_i = E_t ΔV_{i,t}. Returns C (k, h) and s (k,) in float64.
    """
    R = dW.double().reshape(-1, *dW.shape[-2:]).clone()
    Cs, s = [], []
    for _ in range(k):
        C = common_direction(R)
        V, _ = decompose(R, C)                     # (T, d)
        R -= C[None, :, None] * V[:, None, :]
        Cs.append(C)
        s.append(V.mean(0).norm() * C.norm())
    return torch.stack(Cs), torch.stack(s)


def perspective2(w_next, c_next, g_next, f, f_prev, lr, k=3):
    """Theorem 1: split each sample's ΔW^(l) by the common direction C^(l+1) of the layer above.

    ΔW^(l) = ΔW_primary + Σ_k ΔW_noise^(k), with W^(l+1)ᵀ = V Cᵀ + ε (Lemma 2), ε = Σ_k σ_k U_k 𝒱_kᵀ (SVD) and
    ΔW^(l+1) = -lr g_next Fᵀ = C ΔVᵀ + Δεᵀ (Lemma 1). Since ΔVᵀF/‖F‖² = -lr Cᵀg and ΔεᵀF/‖F‖² = -lr (g − C Cᵀg):
      ‖ΔW_primary‖_F = lr |Cᵀg| ‖D V‖ ‖F^(l-1)‖,  ‖ΔW_noise^(k)‖_F = lr σ_k |𝒱_kᵀ g| ‖D U_k‖ ‖F^(l-1)‖.
    w_next: W^(l+1) (h', h); c_next: C^(l+1) (h',); g_next: (n, h') pre-activation gradients of layer l+1;
    f: F^(l) (n, h) (its gates D = 1[F > 0]); f_prev: F^(l-1) (n, d).
    Returns per-sample strengths S_primary (n,) and S_noise (n, k), in float64 (average them for Table 1).
    """
    C = _unit(c_next)
    V, eps = decompose(w_next, C)                       # (h,), (h, h')
    U, sig, Vh = torch.linalg.svd(eps, full_matrices=False)
    D = (f > 0).double()
    g, fn = g_next.double(), f_prev.double().norm(dim=1)
    primary = lr * (g @ C).abs() * (D * V).norm(dim=1) * fn
    noise = lr * sig[:k] * (g @ Vh[:k].T).abs() * (D[:, :, None] * U[None, :, :k]).norm(dim=1) * fn[:, None]
    return primary, noise


def cos_rows(a, b):
    """Row-wise cosine similarity of (..., m) tensors, broadcasting, in float64."""
    return (_unit(a) * _unit(b)).sum(-1)


def lemma3_o(dV, f_prev, V, dF_prev):
    """o^(l) = cos(ΔV^(l), F^(l-1)) · cos(V^(l), ΔF^(l-1)) of Lemma 3 / Fig. 6, per sample (rows broadcast)."""
    return cos_rows(dV, f_prev) * cos_rows(V, dF_prev)


def per_class_accuracy(logits, y, n_classes):
    """Accuracy of argmax(logits) within each class (its recall), shape (n_classes,); NaN for a class absent from y."""
    hit = (logits.argmax(-1) == y).double()
    count = torch.bincount(y, minlength=n_classes).double()
    return torch.bincount(y, weights=hit, minlength=n_classes) / count


def per_class_scores(logits, y, n_classes):
    """Per category c: recall (= per-class accuracy), precision, and the predicted share P(ŷ = c), each (n_classes,).

    A net that predicts c for a share q of all samples, whatever they show, has recall q and precision P(y = c) for c,
    so high recall alone may mean "predicted", not "learned"; recall − share and precision separate the two.
    Precision is NaN for a category that is never predicted."""
    pred = logits.argmax(-1)
    recall = per_class_accuracy(logits, y, n_classes)
    hits = torch.bincount(pred[pred == y], minlength=n_classes).double()
    predicted = torch.bincount(pred, minlength=n_classes).double()
    return recall, hits / predicted, predicted / len(y)
