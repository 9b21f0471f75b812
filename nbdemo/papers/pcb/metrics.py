"""Quantities of the PC-bias paper (Hacohen & Weinshall), §2-§3: principal coordinates, the optimal linear
map, compact representations, the Eq. 10 prediction and the gradient scale matrices of Eq. 7.

Conventions. Data matrices are rows: X (n, q), Y (n, K). The paper's Σ_XX = XᵀX and Σ_YX = YᵀX are
uncentered *sums* over the n samples. A compact weight W maps inputs to outputs, W (..., K, q), with any
leading axes (e.g. N ensemble members). Principal coordinates of W are W @ U; its column j, w_j (K,),
is the weight along the j-th principal direction. Computations that involve inverses, eigenvalues or ratios
are done in float64 and returned in float64. All functions are pure: they never train, load data or plot.
"""
import torch


def gram_eigh(X):
    """Eigendecomposition XᵀX = U diag(d) Uᵀ of the rows X (n, q), float64: (d, U), d (q,) descending and clamped
    at 0, U (q, q) orthogonal. With fewer rows than columns it goes through the SVD of X, whose squared singular
    values are the nonzero eigenvalues (the other q - n are 0): O(n q²) instead of the O(q³) of diagonalising XᵀX,
    10 times faster for 320 rows of CIFAR's 3,072 inputs. The basis of the null space (d_j = 0) is arbitrary either way.
    """
    X = X.double()
    n, q = X.shape
    if n < q:
        _, s, Vh = torch.linalg.svd(X, full_matrices=True)
        return torch.cat([s ** 2, s.new_zeros(q - n)]), Vh.T
    d, U = torch.linalg.eigh(X.T @ X)
    return d.flip(0).clamp_min(0), U.flip(1)


def principal_coordinates(X):
    """Principal coordinate system of Def. 1: Σ_XX = XᵀX = U diag(d) Uᵀ.

    Returns (U, d) in float64: U (q, q) with the principal directions as columns, d (q,) sorted descending
    (eigenvalues of the uncentered sum XᵀX, clamped at 0). With a loss averaged over the n samples, the rate of
    Eq. 10 uses d / n. Each direction's sign is fixed so that its largest-magnitude entry is positive.
    """
    d, U = gram_eigh(X)
    rows = U.abs().argmax(0)
    U = U * torch.sign(U[rows, torch.arange(U.shape[1])])
    return U, d


def w_opt(X, Y, rcond=1e-10):
    """The optimal linear map W_opt = Σ_YX Σ_XX⁺ (K, q), float64: the least-squares solution of W X ≈ Y.

    Y is (n, K) (one-hot or ±1 targets). Σ_XX is pseudo-inverted, dropping eigenvalues below rcond·d_1, so
    W_opt has no component along directions the data does not span.
    """
    d, U = gram_eigh(X)
    U = U[:, d > rcond * d[0]]
    return (Y.double().T @ X.double() @ U) / d[:U.shape[1]] @ U.T


def compact_weight(model_or_params):
    """Compact representation W = W_L ⋯ W_1 (..., K, q) of a stack of linear maps, biases and activations ignored.

    Accepts a list of weight tensors [W_1, ..., W_L] (each (..., out, in), leading axes broadcast), a dict of
    parameters (its 2-D-or-more '...weight' entries in order, e.g. stacked (N, out, in) ensemble parameters),
    or an nn.Module (its nn.Linear layers in order, e.g. nbdemo.ml.models.MLP with ReLU ignored).
    """
    if isinstance(model_or_params, torch.nn.Module):
        weights = [m.weight for m in model_or_params.modules() if isinstance(m, torch.nn.Linear)]
    elif isinstance(model_or_params, dict):
        weights = [v for k, v in model_or_params.items() if k.endswith("weight") and v.dim() >= 2]
    else:
        weights = list(model_or_params)
    W = weights[-1]
    for Wl in reversed(weights[:-1]):
        W = W @ Wl
    return W


def zca_whiten(X, eps=1e-2):
    """ZCA whitening fitted on the training rows X (n, q): x ↦ (x - μ) C_eps^(-1/2), C_eps^(-1/2) = V (Λ + eps)^(-1/2) Vᵀ.

    C = (X - μ)ᵀ(X - μ) / n is the centred covariance with eigenpairs (Λ, V); `eps` is added to every eigenvalue
    (absolute, in the units of the data's variance: with per-channel standardised data the eigenvalues sum to q),
    so directions with variance ≫ eps get unit variance and those with variance ≲ eps are damped instead of blown up.
    Returns (Xw, transform): the whitened X in X's dtype, and a function applying the same map to other rows.
    """
    mu = X.double().mean(0)
    lam, V = gram_eigh((X.double() - mu) / len(X) ** 0.5)
    T = V * (lam + eps).rsqrt() @ V.T

    def transform(Z):
        return ((Z.double() - mu) @ T).to(Z.dtype)

    return transform(X), transform


def pc_prediction(W0, Wopt, d, lr, depth, steps):
    """Eq. 10: w_j^s = λ_j^s w_j^0 + (1 - λ_j^s) w_j,opt with λ_j = 1 - μ L d_j, for every column j.

    W0, Wopt (..., K, q) are in principal coordinates; d (q,) the eigenvalues in the loss's convention (d / n for a
    loss averaged over n samples, the loss being ½‖Wx - y‖²). Exact for L = 1 under full-batch gradient descent.
    """
    lam = (1 - lr * depth * d.double()) ** steps
    return lam * W0.double() + (1 - lam) * Wopt.double()


def pc_distance(W, Wopt):
    """‖w_j - w_j,opt‖ over the K outputs, for every column j: (..., q). Both in principal coordinates."""
    return (W.double() - Wopt.double()).norm(dim=-2)


def pc_std(W):
    """Spread of w_j across the N models of W (N, K, q): sqrt of the mean over K of the (unbiased) variance across N, (q,)."""
    return W.double().var(0).mean(0).sqrt()


def band_medians(v, edges=(10, 100)):
    """Medians of a per-PC quantity v (..., q) over the PC bands [1, e_1], (e_1, e_2], ..., (e_last, q]: (..., n_bands)."""
    q = v.shape[-1]
    cuts = [0, *[e for e in edges if e < q], q]
    return torch.stack([v[..., a:b].median(-1).values for a, b in zip(cuts[:-1], cuts[1:])], -1)


def convergence_rate(v, steps):
    """Per-column exponential rate r_j of v_j(s) ∝ exp(-r_j s): minus the least-squares slope of log v against steps.

    v (S, ..., q) holds a positive quantity (e.g. pc_distance) at the S recorded `steps`. For L = 1 GD the
    distance to the optimum gives r_j = -log(1 - μ d_j) exactly.
    """
    s = torch.as_tensor(steps, dtype=torch.float64)
    s = (s - s.mean()).reshape(-1, *[1] * (v.dim() - 1))
    logv = v.double().log()
    return -(s * (logv - logv.mean(0))).sum(0) / (s ** 2).sum(0)


def scale_expectations(dims, variances):
    """Theorem 3: E[A_l] = α_l I and E[B_l] = β_l I for iid init with per-layer variances σ_l² and widths dims.

    dims = [m_0 = q, m_1, ..., m_L = K]; variances = [σ_1², ..., σ_L²]. β_l = Π_{n<l} m_n σ_n²,
    α_l = Π_{n>l} m_{n-1} σ_n². Returns the lists (α, β), l = 1..L.
    """
    L = len(variances)
    alpha = [torch.tensor([dims[n - 1] * variances[n - 1] for n in range(l + 2, L + 1)]).double().prod().item()
             for l in range(L)]
    beta = [torch.tensor([dims[n] * variances[n - 1] for n in range(1, l + 1)]).double().prod().item()
            for l in range(L)]
    return alpha, beta


def scale_factors(weights, l):
    """Factors of the gradient scale matrices of layer l (1-based) for weights [W_1, ..., W_L], float64:
    A_l = FᵀF with F = (W_L ⋯ W_{l+1})ᵀ (..., m_l, K) and B_l = GᵀG with G = W_{l-1} ⋯ W_1 (..., m_{l-1}, q)
    (Eq. 7; empty products are the identity). Returns (F, G); `gram_stats` reads A_l, B_l off them.
    """
    weights = [W.double() for W in weights]
    eye = lambda k: torch.eye(k, dtype=torch.float64, device=weights[0].device)
    above, below = weights[l:], weights[:l - 1]
    F = compact_weight(above).transpose(-1, -2) if above else eye(weights[-1].shape[-2])
    G = compact_weight(below) if below else eye(weights[0].shape[-1])
    return F, G


def gram_stats(F, scale, full=False):
    """Elementwise statistics of a gradient scale matrix M = FᵀF (..., k, k) against scale·I, as in Fig. 3, read off
    its factor F (..., r, k) without forming M, float64.

    'diag_dev' = mean |M_ii - scale| and 'offdiag_mean' = mean of M_ij (i ≠ j) use diag M = column norms² of F and
    the sum of M's entries, ‖F 1‖², at cost O(r k). With full=True also 'offdiag_rms' = root mean square of M_ij
    (i ≠ j) and 'sq_dev' = mean of (M - scale·I)² over the k² entries, through ‖M‖_F² = ‖F Fᵀ‖_F² = ‖FᵀF‖_F², the
    smaller of the two (cost O(min(r, k)² max(r, k))). Means are over the entries and any leading axes.
    """
    F = F.double()
    k = F.shape[-1]
    diag = F.pow(2).sum(-2)
    total = F.sum(-1).pow(2).sum(-1)
    out = {"diag_dev": (diag - scale).abs().mean().item(),
           "offdiag_mean": ((total - diag.sum(-1)) / (k * (k - 1))).mean().item()}
    if full:
        small = F @ F.transpose(-1, -2) if F.shape[-2] <= k else F.transpose(-1, -2) @ F
        frob2 = small.pow(2).sum((-2, -1))
        out["offdiag_rms"] = ((frob2 - diag.pow(2).sum(-1)) / (k * (k - 1))).mean().sqrt().item()
        out["sq_dev"] = ((frob2 - 2 * scale * diag.sum(-1) + scale ** 2 * k) / k ** 2).mean().item()
    return out


def convergence_rate_before_floor(v, steps, floor):
    """`convergence_rate` per column, fitted over the records before v_j reaches its floor: from the first record up to
    the last one at which v_j is still at least `floor` times its first value (at least two records). A decay that
    levels off at a residual (a deep network's O(1/m) terms) is then read where it is geometric."""
    s = torch.as_tensor(steps, dtype=torch.float64).reshape(-1, *[1] * (v.dim() - 1)).expand(v.shape)
    logv = v.double().log()
    above = (v.double() >= floor * v[:1].double()).double().cumprod(0)  # the records before the first one below
    keep = torch.maximum(above, (torch.arange(len(v)) < 2).double().reshape(-1, *[1] * (v.dim() - 1)))
    n = keep.sum(0)
    sm, lm = (keep * s).sum(0) / n, (keep * logv).sum(0) / n
    return -(keep * (s - sm) * (logv - lm)).sum(0) / (keep * (s - sm) ** 2).sum(0)
