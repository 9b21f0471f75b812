"""The theory side of paper 003 (MLI): the r-homogeneous-weight model of §4, the plateau bounds of
Theorems 1 and 3, and the two functions of appendix A.

Conventions
- Model (§4): f_i(x) = ⟨W_i, x⟩^r + b_i with W ∈ R^{k×d} drawn |N(0, δ²)| and b = 0. Class i's feature is
  the basis vector e_i, so W_ii = W[i, i] is the weight on a class's own feature.
- Bias gaps (Assumption 1): with k* = argmax_i b_i(T), Δ_i = b_{k*}(T) − b_i(T) over i ≠ k*;
  Δ_min, Δ_max are their min and max.
- Constants: the theorems' O(√δ) and O(δ) factors are read with constant 1, i.e. (1 + √δ) and (1 + δ).
- Theorem 1 asks for inputs of norm ≤ 1: the largest input norm is folded into the first layer, which leaves
  the network unchanged. With `rebalance`, layer i of both θ(0) and θ(T) is multiplied by c_i > 0 with
  Π c_i = 1, chosen so that every layer's init norm equals their geometric mean. A ReLU net with only an
  output bias computes the same function, and every point of the interpolation is unchanged, so the
  theorem applies to the rebalanced weights; this choice gives the smallest possible δ.
- Appendix A: f(x, z) = −T(x, x, x) + ‖x‖⁴ + z⁴ (Eq. 2); h(θ, r) = (1 − sin θ / 3)(r⁴ − 2r²) (Eq. 3 in polar
  form, x = r cos θ, y = r sin θ). The paper's own values f(0, 1) = −2/3 and −49/96 fix the factor sin θ / 3.
"""
import math

import torch
from torch import nn


class HomogeneousNet(nn.Module):
    """The r-homogeneous-weight network: f_i(x) = ⟨W_i, x⟩^r + b_i, W ~ |N(0, δ²)|, b = 0."""

    def __init__(self, k, d, *, r=3, delta=0.1):
        super().__init__()
        self.r = r
        self.W = nn.Parameter(torch.randn(k, d).abs() * delta)
        self.b = nn.Parameter(torch.zeros(k))

    def forward(self, x):
        return (x @ self.W.T) ** self.r + self.b


def orthonormal_dataset(k, d, n_per_class, sigma, *, generator=None):
    """(X, y) with x = e_y + ξ, ξ ~ N(0, σ²/d · I_d), n_per_class samples of each of the k classes."""
    y = torch.arange(k).repeat_interleave(n_per_class)
    X = torch.eye(k, d)[y] + sigma / math.sqrt(d) * torch.randn(len(y), d, generator=generator)
    return X, y


def bias_gaps(b):
    """(top, Δ) for a bias vector: top = argmax b and Δ_i = b_top − b_i for the other classes (float64)."""
    b = torch.as_tensor(b, dtype=torch.float64)
    top = int(b.argmax())
    return top, b[top] - b[torch.arange(len(b)) != top]


def homogeneous_bounds(WT, bT, *, r, delta, eps):
    """The α's of Theorem 3 for a trained r-homogeneous-weight network (δ: the init scale).

    α1 = δ/Δ_min and α2 = (1+√δ)^(−r/(r−1)) R_min^(1/(r−1)): the error is 1 − 1/k on [α1, α2], non-increasing on [α1, 1].
    α3 = ε^(1/r)/W_max: on [0, α3] the mean loss is within [log k − eε, log k + αΔ_max + eε].
    α4 = (1+δ)^(1/(r−1)) (R_max/r)^(1/(r−1)): the loss decreases strictly on [α4, 1].
    R_i = Δ_i / W_ii(T)^r over the classes other than the top-bias one; W_max = max_i W_ii(T).
    Also returns alpha2_lead = R_min^(1/(r−1)), the leading order of α2 as δ → 0.
    Without a bias gap (Δ_min = 0, e.g. the untrained model) Assumption 1 fails: α1 = inf and α2 = 0, no plateau.
    For r = 1 (a linear model, outside the theorem's r ≥ 3) the exponent 1/(r−1) is undefined: α2, its leading
    order and α4 are NaN.
    """
    k = len(bT)
    top, gaps = bias_gaps(bT)
    w = torch.as_tensor(WT, dtype=torch.float64)[:, :k].diagonal()
    R = gaps / w[torch.arange(k) != top] ** r
    out = dict(top=top, delta_min=float(gaps.min()), delta_max=float(gaps.max()), W_max=float(w.max()),
               R_min=float(R.min()), R_max=float(R.max()),
               alpha1=delta / float(gaps.min()) if gaps.min() > 0 else math.inf,
               alpha3=eps ** (1 / r) / float(w.max()))
    if r == 1:
        return {**out, "alpha2": math.nan, "alpha2_lead": math.nan, "alpha4": math.nan}
    p = 1 / (r - 1)
    return {**out, "alpha2": (1 + math.sqrt(delta)) ** (-r * p) * float(R.min()) ** p,
            "alpha2_lead": float(R.min()) ** p, "alpha4": (1 + delta) ** p * (float(R.max()) / r) ** p}


def loss_band(alpha, k, delta_max, eps, *, c=1):
    """The bounds on the mean loss for α ≤ α3: log k − c·eε and log k + αΔ_max + c·eε (c = 1 in Theorem 3, 2 in Theorem 1)."""
    alpha = torch.as_tensor(alpha, dtype=torch.float64)
    return math.log(k) - c * math.e * eps, math.log(k) + alpha * delta_max + c * math.e * eps


def spectral_norms(weights):
    """Largest singular value of each matrix, float64 (NaN for a matrix with a non-finite entry: a diverged net)."""
    return torch.stack([torch.linalg.matrix_norm(w.detach().double(), ord=2) if torch.isfinite(w).all()
                        else torch.tensor(math.nan, dtype=torch.float64) for w in weights])


def fcn_bounds(V0, VT, bT, *, eps, x_norm=1.0, rebalance=True):
    """Theorem 1 for an r-layer ReLU net with an output bias only.

    V0, VT: the r weight matrices at init and after training; bT: the trained output bias;
    x_norm: the largest input norm (folded into the first layer). δ = max_i ‖V_i(0)‖, V_max = max_i ‖V_i(T)‖, both
    after rebalancing if `rebalance` (see the module's docstring); 'delta_as_trained' is δ before it.
    α1 = δ/Δ_min, α2 = (1+√δ)^(−r/(r−1)) (Δ_min / (2 V_max^r))^(1/(r−1)), α3 = ε^(1/r)/V_max, and the
    theorem's condition δ < delta_limit = min(ε^(1/r)/r, 1/r², (2e)^(−2/(r−2))).
    Without a bias gap (Δ_min = 0) Assumption 1 fails: α1 = inf and α2 = 0, an empty interval.
    """
    r = len(V0)
    s0, sT = spectral_norms(V0), spectral_norms(VT)
    s0[0], sT[0] = s0[0] * x_norm, sT[0] * x_norm
    as_trained = float(s0.max())
    if rebalance:
        c = s0.log().mean().exp() / s0
        s0, sT = s0 * c, sT * c
    delta, vmax = float(s0.max()), float(sT.max())
    _, gaps = bias_gaps(bT)
    dmin, p = float(gaps.min()), 1 / (r - 1)
    return dict(r=r, delta=delta, delta_as_trained=as_trained, V_max=vmax, delta_min=dmin, delta_max=float(gaps.max()),
                alpha1=delta / dmin if dmin > 0 else math.inf,
                alpha2=(1 + math.sqrt(delta)) ** (-r * p) * math.exp(p * (math.log(dmin / 2) - r * math.log(vmax)))
                if dmin > 0 else 0.0,
                alpha3=eps ** (1 / r) / vmax,
                delta_limit=min(eps ** (1 / r) / r, 1 / r ** 2, (2 * math.e) ** (-2 / (r - 2))))


# Appendix A.1: hard to minimise, convex interpolation.

def random_symmetric_tensor(d, *, generator=None):
    """A symmetric d×d×d tensor with Gaussian entries, symmetrised and scaled to ‖T‖_F = 1 (float64)."""
    G = torch.randn(d, d, d, dtype=torch.float64, generator=generator)
    T = sum(G.permute(*p) for p in [(0, 1, 2), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)])
    return T / T.norm()


def cubic_form(T, x):
    """T(x, x, x) for a batch of vectors x (..., d)."""
    return torch.einsum("ijk,...i,...j,...k->...", T, x, x, x)


def hard_function(T, x, z):
    """Eq. 2: f(x, z) = −T(x, x, x) + ‖x‖⁴ + z⁴, batched over the leading axes of x (..., d) and z (...)."""
    return -cubic_form(T, x) + (x * x).sum(-1) ** 2 + z ** 4


def tensor_max(T, *, n_starts=1000, steps=300, generator=None):
    """(p, v): the best max_{‖v‖=1} T(v, v, v) found by shifted power iterations (SS-HOPM) from random starts.

    The problem is NP-hard in general; for small d many starts find the global maximum in practice.
    The shift 6‖T‖_F bounds the Hessian of T(v, v, v), which makes every iteration an ascent step.
    """
    v = torch.randn(n_starts, T.shape[0], dtype=T.dtype, generator=generator)
    v = v / v.norm(dim=-1, keepdim=True)
    shift = 6 * T.norm()
    for _ in range(steps):
        v = torch.einsum("ijk,nj,nk->ni", T, v, v) + shift * v
        v = v / v.norm(dim=-1, keepdim=True)
    vals = cubic_form(T, v)
    best = int(vals.argmax())
    return float(vals[best]), v[best]


def hard_minimiser(T, **kwargs):
    """(x*, z*) = ((3p/4) v*, 0) with (p, v*) from `tensor_max`: −‖x‖³p + ‖x‖⁴ is smallest at ‖x‖ = 3p/4."""
    p, v = tensor_max(T, **kwargs)
    return 0.75 * p * v, torch.zeros((), dtype=T.dtype)


# Appendix A.2: easy to minimise, non-monotone interpolation.

def h_polar(theta, r):
    """Eq. 3 in polar form: h(θ, r) = (1 − sin θ / 3)(r⁴ − 2r²); its minimum −4/3 is at θ = −π/2, r = 1."""
    return (1 - torch.sin(theta) / 3) * (r ** 4 - 2 * r ** 2)


def easy_function(x, y):
    """Eq. 3: f(x, y) = (1 − y / (3ρ))(ρ⁴ − 2ρ²) with ρ = √(x² + y²), and f(0, 0) = 0."""
    rho2 = x * x + y * y
    rho = rho2.sqrt()
    return torch.where(rho2 > 0, (1 - y / (3 * rho.clamp_min(1e-300))) * (rho2 ** 2 - 2 * rho2), 0.0)


def easy_line(r, beta, alphas):
    """Prop. 5's interpolation curve of Eq. 3 (app. A.2): γ(α) = f((1−α) x0, (1−α) y0 − α), from
    (x0, y0) = (r sin β, r cos β) to the minimiser (0, −1). r and β broadcast together; α runs along a new leading
    axis: (len(alphas), *shape)."""
    r = torch.as_tensor(r, dtype=alphas.dtype, device=alphas.device)
    beta = torch.as_tensor(beta, dtype=alphas.dtype, device=alphas.device)
    r, beta = torch.broadcast_tensors(r, beta)
    a = alphas.reshape(-1, *[1] * r.dim())
    return easy_function((1 - a) * r * beta.sin(), (1 - a) * r * beta.cos() - a)


def rise(curves, dim=0):
    """Prop. 5's statistic along `dim`: the largest γ(α2) − γ(α1) over α1 < α2, i.e. the largest increase over the
    running minimum; 0 exactly when the curve never increases on the grid."""
    return (curves - curves.cummin(dim).values).amax(dim)
