"""Learning-order quantities of the PC-bias paper (Hacohen & Weinshall), §3.3-§6.

Conventions. Data matrices are rows, X (n, q). `U` (q, q) holds the principal directions as columns,
ordered by decreasing singular value (as `nbdemo.papers.pcb.metrics.principal_coordinates` returns them), so
`X @ U` are the principal coordinates. A "level" is a number of components (or frequencies) used.
The paper defines its two critical levels differently, and so does this module: the *critical principal
component* (§4.2, l.331) is the first level from which an example stays correctly classified at every
level above it ("P principal components or more"), the *critical frequency* (§5.2, l.364) the smallest
level at which it is classified correctly. Examples with no such level get the sentinel m + 1
(m = number of levels). All functions are pure.
"""
import math

import torch
from scipy import stats


def project_top(X, U, P):
    """Project the rows of X onto the span of the first P principal directions (still in R^q)."""
    Up = U[:, :P]
    return X @ Up @ Up.T


def amplify_components(X, U, *, frac=0.015, factor=10.0, which="top", ref=None, rank=None):
    """Multiply the coordinates along the top (or bottom) ceil(frac·rank) of the first `rank` principal directions by
    `factor`, then renormalise to mean 0 and std 1 over all entries (one grey channel, as in app. D.1), with the
    statistics of the amplified `ref` (the training set; default X itself).

    rank: how many principal components carry variance (default q). With n < q training points only the first n
    do; the directions past them have zero variance, so "amplifying" them changes nothing. App. D.1 (l.856) calls
    the factor 10 "significantly smaller than the ratio between the values of the first and last principal
    components", which presumes a last component with a non-zero value: pass rank = the data's rank to take the
    bottom components among those that carry variance.
    """
    if which not in ("top", "bottom"):
        raise ValueError(f"which={which!r}: choose 'top' or 'bottom'")
    q = U.shape[1]
    rank = q if rank is None else rank
    k = math.ceil(frac * rank)
    scale = torch.ones(q, dtype=X.dtype, device=X.device)
    if which == "top":
        scale[:k] = factor
    else:
        scale[rank - k:rank] = factor
    Z = (X @ U) * scale @ U.T
    R = Z if ref is None else (ref @ U) * scale @ U.T
    return (Z - R.mean()) / R.std()


def accessibility(correct):
    """Mean accuracy of each example over networks and epochs: correct (N, E, n) bool -> (n,) float64."""
    return correct.double().mean(dim=(0, 1))


def per_epoch(correct, steps_per_epoch):
    """The records at the end of each epoch, the paper's f_i^e (§4): correct (N, S, n) recorded after every step,
    record s after step s + 1 -> (N, S // steps_per_epoch, n)."""
    return correct[:, steps_per_epoch - 1::steps_per_epoch]


def learning_time(correct):
    """Ceiling-free speed of learning: correct (N, E, n) bool, records e = 1..E -> (n,) float64, the mean over the N
    networks of the first record from which the example stays correctly classified (E + 1 if it is wrong at the
    last record). Accessibility (l.312) averages correctness over the records, so every example learned by the first
    record scores 1 and the order among them is lost; the learning time keeps resolving it down to the spacing of the
    records. It serves Fig. 7's "20% fastest learned" examples (l.340), where accessibility sits at its ceiling."""
    N, E, n = correct.shape
    per_net = critical_level(correct.permute(0, 2, 1).reshape(N * n, E))  # the first level from which all are right
    return per_net.reshape(N, n).double().mean(0)


def critical_level(correct):
    """correct (n, m) bool, column j = example classified correctly using levels 1..j+1.

    Returns (n,) int64: the smallest level P (1..m) such that the example is correct at P and every
    level above it; m + 1 if it is wrong at the last level.
    """
    m = correct.shape[1]
    wrong = ~correct
    # last wrong level (1-based), 0 if never wrong -> critical level is one above it
    idx = torch.arange(1, m + 1, device=correct.device).expand_as(correct)
    last_wrong = torch.where(wrong, idx, torch.zeros_like(idx)).amax(dim=1)
    return last_wrong + 1


def first_level(correct):
    """correct (n, m) bool, as for `critical_level`. Returns (n,) int64: the smallest level P (1..m) at which
    the example is correct, whatever the levels above it; m + 1 if it is correct at none."""
    m = correct.shape[1]
    idx = torch.arange(1, m + 1, device=correct.device).expand_as(correct)
    return torch.where(correct, idx, torch.full_like(idx, m + 1)).amin(dim=1)


def critical_principal_component(X, y, W, U):
    """The critical principal component (§4.2) of each row of X for the linear classifier W (K, q).

    The classifier sees x projected onto the first P principal directions; its scores are the cumulative
    sums over j ≤ P of (W u_j)(u_j·x). Returns (n,) in 1..q, or q + 1 if W misclassifies x itself.
    """
    U = U.double()
    Xc, Wc = X.double() @ U, W.double() @ U       # (n, q), (K, q) in principal coordinates
    scores = torch.cumsum(Xc[:, :, None] * Wc.T[None], dim=1)  # (n, q, K)
    return critical_level(scores.argmax(-1) == y[:, None])


def frequency_sums(z, kappa, phi):
    """Partial sums λ_j(z) = Σ_{i≤j} sin(2π κ_i z + φ_i) of Eq. 11 for j = 1..m: z (n,) -> (n, m) float64."""
    z = z.double()[:, None]
    kappa = torch.as_tensor(kappa, dtype=torch.float64, device=z.device)
    phi = torch.as_tensor(phi, dtype=torch.float64, device=z.device)
    return torch.cumsum(torch.sin(2 * math.pi * kappa * z + phi), dim=1)


def frequency_label(z, w, kappa, phi, upto=None):
    """Label of the point (z, w) for the boundary λ_upto: 1 if w > λ_upto(z) else 0 (upto = m by default)."""
    sums = frequency_sums(z, kappa, phi)
    return (w.double() > sums[:, (upto or sums.shape[1]) - 1]).long()


def critical_frequency(z, w, y, kappa, phi):
    """The critical frequency (§5.2, l.364): κ_j for "the smallest j ∈ [m] such that λ_j(z) = Σ_{i≤j} freq_i(z)
    classifies the example correctly". Unlike the critical principal component, a level above j may misclassify it
    again. Returns (n,) float64; NaN if no λ_j classifies it (impossible for points labelled by λ_m itself)."""
    pred = (w.double()[:, None] > frequency_sums(z, kappa, phi)).long()
    level = first_level(pred == y[:, None])
    kappa = torch.as_tensor(kappa, dtype=torch.float64, device=z.device)
    return torch.where(level <= len(kappa), kappa[(level - 1).clamp(max=len(kappa) - 1)],
                       torch.full_like(kappa[:1], float("nan")))


def discriminability(X, y, k=10, chunk=2048):
    """Share of each example's k nearest neighbours (Euclidean, itself excluded) that share its label.

    Returns (n,) float64 in [0, 1]. Distances are computed in chunks of rows to bound memory.
    """
    X = X.double()
    out = []
    for i in range(0, len(X), chunk):
        d = torch.cdist(X[i:i + chunk], X)
        d[torch.arange(d.shape[0]), torch.arange(i, i + d.shape[0])] = float("inf")
        nn = d.topk(k, dim=1, largest=False).indices
        out.append((y[nn] == y[i:i + chunk, None]).double().mean(1))
    return torch.cat(out)


def correlation(a, b):
    """Pearson r and its two-sided p-value between two 1-D tensors (float64), as Python floats."""
    r, p = stats.pearsonr(torch.as_tensor(a).double().cpu().numpy(), torch.as_tensor(b).double().cpu().numpy())
    return float(r), float(p)


def steps_to(curve, steps, level):
    """First entry of `steps` where `curve` reaches `level`; inf if it never does."""
    hit = (torch.as_tensor(curve) >= level).nonzero()
    return float(steps[int(hit[0])]) if len(hit) else math.inf
