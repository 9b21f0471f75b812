"""Fig. 4's and Table 1's strengths (TFD-3) from Gram matrices: the numbers of `metrics.common_directions` and
`metrics.perspective2`, at a fraction of their cost, so that they can be taken over every snapshot of the first phase.

Both need only a few leading eigenvectors of a symmetric 512 x 512 matrix for each snapshot, layer and category;
an SVD or a run of successive eigendecompositions per matrix made TFD-3 too slow for snapshots every 50 steps.
The eigenvectors are computed in float32 (on one thread, as `nbdemo.setup` runs torch on the CPU: LAPACK's
eigensolver slows down many times over when its threads compete for the CPU's cores), and every strength is then
computed from them in float64.
"""
import torch


def top_eigenvectors(G, k):
    """The eigenvectors of the k largest eigenvalues of symmetric G (..., n, n), as columns (..., n, k) in float64,
    the largest first. Each is accurate to about 1e-7 ‖G‖ over the gap between its eigenvalue and its neighbours'."""
    vectors = torch.linalg.eigh(G.float()).eigenvectors
    return vectors[..., -k:].flip(-1).double()


def common_strengths(dW, k=5):
    """Fig. 4's strengths s_1…s_k of a stack of weight changes dW (T, h, d) (or one (h, d) matrix): the s of
    `metrics.common_directions(dW, k)`, in float64.

    C_1 is the top eigenvector of M = Σ_t dW_t dW_tᵀ (Eq. 5); removing it from every dW_t projects M onto its
    complement, whose top eigenvector is M's second, and so on: C_1…C_k are M's top k eigenvectors. With C_i
    orthogonal to the directions removed before it, ΔV_{i,t} = dW_tᵀ C_i, so s_i = ‖E_t[ΔV_{i,t}]‖ = ‖(E_t dW_t)ᵀ C_i‖.
    For one matrix (T = 1) these are its singular values."""
    dW = dW.double().reshape(-1, *dW.shape[-2:])
    C = top_eigenvectors(torch.einsum("thd,tkd->hk", dW, dW), k)   # (h, k)
    return (dW.mean(0).T @ C).norm(dim=0)


def perspective2(w_next, c_next, g_next, f, f_prev, lr, k=3):
    """Theorem 1's per-sample strengths S_primary (n,) and S_noise (n, k): those of `metrics.perspective2` (same
    arguments), with the top k singular triplets of ε (Wᵀ = V Cᵀ + ε, Lemma 2) taken from εεᵀ = WᵀW − V Vᵀ.

    For a left singular vector U_k of ε, σ_k 𝒱_k = εᵀ U_k, so ‖ΔW_noise^(k)‖_F = lr |gᵀ εᵀ U_k| ‖D U_k‖ ‖F^(l-1)‖
    (signs drop out). In float64, from U_k (`top_eigenvectors`)."""
    C = c_next.double() / c_next.double().norm()
    W = w_next.double()
    V = W.T @ C                                                      # (h,)
    eps = W.T - V[:, None] * C                                        # (h, h'), ε C = 0
    U = top_eigenvectors(eps @ eps.T, k)                              # (h, k)
    D = (f > 0).double()
    g, fn = g_next.double(), f_prev.double().norm(dim=1)
    primary = lr * (g @ C).abs() * (D * V).norm(dim=1) * fn
    noise = lr * (g @ (eps.T @ U)).abs() * (D[:, :, None] * U[None]).norm(dim=1) * fn[:, None]
    return primary, noise
