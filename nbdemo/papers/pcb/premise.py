"""Settings that meet the premises of the PC-bias paper's statements (Hacohen & Weinshall, §2.3-§3.2), and the numbers
that show a run met them: the directions along which Eq. 10 predicts a measurable decay within a run, and whitened
data whose Σ_XX is a scaled identity on the directions it spans (§3.2, "Whitened data"). Pure functions, float64.
"""
import torch

from nbdemo.papers.pcb.metrics import gram_eigh, zca_whiten


def eq10_decay(d, lr, depth, steps):
    """Eq. 10's predicted drop of the distance to the optimum along each principal direction over `steps` steps:
    1 - λ_j^steps with λ_j = 1 - μ L d_j (d: the singular values in the convention of the loss, e.g. d_j / n for a
    sample-averaged loss). Directions with μ L d_j >= 1 (no contraction) are given 1."""
    lam = (1 - lr * depth * torch.as_tensor(d, dtype=torch.float64)).clamp(0, 1)
    return 1 - lam ** steps


def zca_support(X, eps, keep):
    """ZCA whitening (`metrics.zca_whiten`) restricted to the directions it whitens.

    The whitened variance along the centred covariance's eigenvector i is Λ_i / (Λ_i + eps); the directions where it is
    below `keep` are damped rather than whitened. Returns (Xw, B): the whitened rows projected on the span of the other
    eigenvectors (X's dtype) and B (q, k) an orthonormal basis of that span (float64), so that Xwᵀ Xw / n has
    eigenvalues in [keep, 1) on it and 0 off it.
    """
    mu = X.double().mean(0)
    lam, V = gram_eigh((X.double() - mu) / len(X) ** 0.5)
    B = V[:, lam / (lam + eps) >= keep]
    return (zca_whiten(X, eps)[0].double() @ B @ B.T).to(X.dtype), B


def spectrum_spread(Z, B=None):
    """Largest over smallest eigenvalue of the uncentred Σ_XX = Zᵀ Z of the rows Z (Def. 1), on the span of the
    orthonormal columns B (all of R^q when None): 1 for a scaled identity there."""
    S = Z.double().T @ Z.double()
    if B is not None:
        S = B.T @ S @ B
    ev = torch.linalg.eigvalsh(S)
    return (ev[-1] / ev[0]).item()


def span_share(B, V):
    """‖B Bᵀ v_j‖² for each column v_j of V (q, q): the share of principal direction j inside the span of the
    orthonormal columns B, (q,). Where the data covers only that span, a direction mostly outside it carries no data."""
    return (B.T @ V).pow(2).sum(0)


def band_nanmedians(v, edges=(10, 100)):
    """`metrics.band_medians` ignoring NaN entries (directions left out): (..., n_bands), NaN for a band with none."""
    q = v.shape[-1]
    cuts = [0, *[e for e in edges if e < q], q]
    return torch.stack([v[..., a:b].nanmedian(-1).values for a, b in zip(cuts[:-1], cuts[1:])], -1)
