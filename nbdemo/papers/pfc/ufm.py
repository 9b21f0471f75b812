"""The unconstrained feature models of PFC-5 and PFC-6 (Wang, Gai & Zhang, §III-C and §IV-B): the UFM and the
multilayer UFM (Eq. 13; the UFM is its X = 0 case) with the MSE loss. The paper's plain full-batch gradient descent
(a batch of regulariser values at once), a converged reference solve, and the closed-form classifier W*(H).

Layout: rows are samples. X, H are (N, d); W is (K, d); the logits are H W^T. The paper's D x N matrices are the
transposes.
"""
import torch
import torch.nn.functional as F

from nbdemo.ml.data import dry_run


def gaussian_classes(K, d, n, seed=0):
    """§IV-B data: n samples per class from N(mu_k, I_d), mu_k uniform on the unit sphere. Returns X (Kn, d) float64,
    y (Kn,) with the samples grouped by class."""
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(K, d, generator=g, dtype=torch.float64)
    mu /= mu.norm(dim=1, keepdim=True)
    y = torch.arange(K).repeat_interleave(n)
    return mu[y] + torch.randn(K * n, d, generator=g, dtype=torch.float64), y


def mufm_gradients(W, H, X, Y, lam_W, lam, N):
    """Gradients (dW, dH) of the MUFM objective with the MSE loss (Eq. 13, rows layout), batched over a leading dim:

        f(W, H) = ||H W^T - Y||^2 / (2N) + lam_W ||W||^2 / (2K) + lam ||H - X||^2 / (2N),   N = K n samples.

    N is explicit so that the same formulas serve H, X, Y given in coordinates of an orthonormal basis (fewer rows).
    """
    K = Y.shape[-1]
    R = H @ W.transpose(-1, -2) - Y
    return R.transpose(-1, -2) @ H / N + lam_W / K * W, (R @ W + lam * (H - X)) / N


def mufm_objective(W, H, X, Y, lam_W, lam, N):
    """f(W, H) of `mufm_gradients`, per problem of the batch."""
    K = Y.shape[-1]
    return (((H @ W.transpose(-1, -2) - Y) ** 2).sum((-1, -2)) / (2 * N)
            + lam_W / (2 * K) * (W ** 2).sum((-1, -2)) + lam / (2 * N) * ((H - X) ** 2).sum((-1, -2)))


def mufm_h_star(W, X, Y, lam):
    """The features minimising f for a fixed W: H = (Y W + lam X)(W^T W + lam I)^-1."""
    A = W.transpose(-1, -2) @ W + lam * torch.eye(W.shape[-1], dtype=W.dtype, device=W.device)
    return torch.linalg.solve(A, (Y @ W + lam * X).transpose(-1, -2)).transpose(-1, -2)


def grad_norm(W, H, X, Y, lam_W, lam):
    """Norm of the full gradient (W and H together) of the MUFM objective, per problem of the batch."""
    gW, gH = mufm_gradients(W, H, X, Y, lam_W, lam, len(Y))
    return (gW.pow(2).sum((-1, -2)) + gH.pow(2).sum((-1, -2))).sqrt()


def _batch(X, y, lams):
    K = int(y.max()) + 1
    lam = torch.as_tensor(lams, dtype=X.dtype, device=X.device)[:, None, None]
    return F.one_hot(y, K).to(X.dtype), lam, K


def solve_mufm_gd(X, y, *, lam_W, lams, steps, lr, seed=0):
    """Plain full-batch gradient descent on MUFM (Eq. 13, MSE loss), the paper's solver, for every value in `lams`.

    X: (N, d) data shared by all problems, or (B, N, d) one per problem; X = 0 gives the UFM in the same setting
    (feature regulariser lam ||H||^2 / (2N)). W (K, d) and H (N, d) start standard normal, the same draw for every
    problem. Returns (W (B, K, d), H (B, N, d), grad_norm (B,)) at the last iterate.

    Each update adds to H only multiples of Y W and X and right-multiplies H, so H stays in the column span of
    [H_0, Y, X]. GD runs in an orthonormal basis U of that span (H = U T): the iterates are exactly those of GD on H,
    at a fraction of the cost. A dry run (the runner's shape check) takes two steps.
    """
    steps = min(steps, 2) if dry_run() else steps
    g = torch.Generator().manual_seed(seed)
    N, d = X.shape[-2:]
    Y, lam, K = _batch(X, y, lams)
    W = torch.randn(K, d, generator=g, dtype=X.dtype).to(X.device).repeat(len(lam), 1, 1)
    H0 = torch.randn(N, d, generator=g, dtype=X.dtype).to(X.device)
    U = torch.linalg.qr(torch.cat([H0, Y, *X.reshape(-1, N, d)], 1)).Q
    T, CY, CX = (U.T @ H0).repeat(len(lam), 1, 1), U.T @ Y, U.T @ X
    for _ in range(steps):
        gW, gT = mufm_gradients(W, T, CX, CY, lam_W, lam, N)
        W -= lr * gW
        T -= lr * gT
    H = U @ T
    return W, H, grad_norm(W, H, X, Y, lam_W, lam)


def solve_mufm_exact(X, y, *, lam_W, lams, seed=0, iters=5000):
    """Converged MUFM (or UFM, X = 0) solutions for every value in `lams`, a reference for the GD solver.

    H is eliminated through mufm_h_star (which lies in the span of [Y, X]); the objective of W alone, K x d numbers,
    is minimised by L-BFGS in float64, in an orthonormal basis of that span. Its gradient is the W-gradient of f at
    H*(W) (the H-gradient vanishes there). Returns (W, H, grad_norm) as solve_mufm_gd does.
    """
    iters = min(iters, 2) if dry_run() else iters
    N, d = X.shape[-2:]
    Y, lam, K = _batch(X, y, lams)
    U = torch.linalg.qr(torch.cat([Y, *X.reshape(-1, N, d)], 1)).Q
    CY, CX = U.T @ Y, (U.T @ X).expand(len(lam), -1, -1)
    W0 = torch.randn(K, d, generator=torch.Generator().manual_seed(seed), dtype=X.dtype).to(X.device)
    Ws = []
    for cx, lm in zip(CX, lam):
        W = W0.clone()
        opt = torch.optim.LBFGS([W], lr=1, max_iter=iters, tolerance_grad=1e-11, tolerance_change=1e-30,
                                history_size=50, line_search_fn="strong_wolfe")

        def closure():
            H = mufm_h_star(W, cx, CY, lm)
            W.grad = mufm_gradients(W, H, cx, CY, lam_W, lm, N)[0]
            return mufm_objective(W, H, cx, CY, lam_W, lm, N)

        opt.step(closure)
        Ws.append(W)
    W = torch.stack(Ws)
    H = U @ mufm_h_star(W, CX, CY, lam)
    return W, H, grad_norm(W, H, X, Y, lam_W, lam)


def w_star(H, y, lam_W):
    """Closed-form MSE classifier of Theorem 4, W*(H) = Y H^T (H H^T + n lam_W I)^-1 in the paper's layout,
    i.e. Y^T H (H^T H + n lam_W I)^-1 with rows; n = samples per class (balanced). H may be batched (B, N, d)."""
    K = int(y.max()) + 1
    n = len(y) / K
    Y = F.one_hot(y, K).to(H.dtype)
    A = H.transpose(-1, -2) @ H + n * lam_W * torch.eye(H.shape[-1], dtype=H.dtype, device=H.device)
    return torch.linalg.solve(A, H.transpose(-1, -2) @ Y).transpose(-1, -2)


def tenfold(name, value, op, threshold):
    """A threshold of ours on the solves, an order of magnitude stricter and looser, as the alternatives of its row
    (the paper gives no tolerance): {f"{name} 10x stricter": alt(...), f"{name} 10x looser": alt(...)}."""
    from nbdemo.claims.verdict import alt

    below = op in ("<", "<=")
    return {f"{name} 10x stricter": alt(value, op, threshold / 10 if below else threshold * 10,
                                        "an order of magnitude stricter: the paper gives no tolerance"),
            f"{name} 10x looser": alt(value, op, threshold * 10 if below else threshold / 10,
                                      "an order of magnitude looser: the paper gives no tolerance")}
