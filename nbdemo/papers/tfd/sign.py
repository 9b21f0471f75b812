"""The per-sample sign of Theorem 2 of the Trap-of-Feature-Diversity paper (Liu et al.), as pure functions of tensors.

Along a layer's common direction C (Eq. 5), the change that one sample x makes to the weight, ΔW|x = -lr·g_x F|xᵀ
(g_x = D Ḟ the pre-activation gradient, F|x the layer's input), has the coefficient vector (Lemma 1)
ΔV|x = ΔW|xᵀ C / CᵀC = -lr·(g_xᵀC)·F|x / CᵀC. It is parallel to the sample's own input, so
cos(ΔV|x, F|x) = -sign(g_xᵀC), whatever the signs of F's entries: ±1, or 0 when g_xᵀC = 0 (no gradient along C).
Theorem 2 (app. L) states that within a category c this sign is shared, cos(α_c ΔV|x, F|x) ≥ 0 with one α_c for all
x ∈ X_c, and Fig. 5 plots the average of the cosine over samples, which for ±1 values is 2·(share agreeing) - 1. So
the informative quantity is the share of a category's samples whose sign agrees, not the cosine of one sample.

Lemma 3's o^(l)|x = cos(ΔV|x, F|x)·cos(V, ΔF|x) takes ΔF^(l-1)|x, the change of x's features made by x, as negatively
parallel to its feature gradient Ḟ^(l-1)|x = W^(l)ᵀ g_x (Eq. 2; app. K). With that reading
o|x = sign(g_xᵀC)·cos(WᵀC, Wᵀg_x): +1 for every sample with g_xᵀC ≠ 0 when W has no component off C (ε = 0,
Lemma 2), and positive exactly when the term along C outweighs the noise term ε, Lemma 3's premise.
"""
import torch

from nbdemo.papers.tfd.metrics import cos_rows, decompose


def sample_dV(g, f_prev, C, lr):
    """Per-sample ΔV|x = ΔW|xᵀ C / CᵀC with ΔW|x = -lr·g_x f_xᵀ (Lemma 1), i.e. -lr·(g_x·C)·f_x / CᵀC.

    g: (n, h) pre-activation gradients; f_prev: (n, d) the layer's inputs; C: (h,). Returns (n, d) in float64,
    without materialising the (n, h, d) per-sample changes."""
    g, f, C = g.double(), f_prev.double(), C.double()
    return -lr * (g @ C)[:, None] * f / (C @ C)


def category_agreement(s, y, n_classes):
    """Theorem 2's shared sign per category, from per-sample values s (n,) (e.g. cos(ΔV|x, F|x)).

    α_c is the majority sign of s over the samples of category c (+1 on a tie); a sample agrees when α_c·s_x > 0
    (strictly: a zero, no gradient along C, has no sign; "always positive", Fig. 5). Returns (share (n_classes,),
    alpha (n_classes,)): the share of c's samples that agree (NaN for a category absent from y) and α_c, float64."""
    sign = torch.sign(s.double())
    onehot = torch.nn.functional.one_hot(y, n_classes).double()
    alpha = torch.where(onehot.T @ sign >= 0, 1.0, -1.0).double()
    agree = (alpha[y] * sign > 0).double()
    count = onehot.sum(0)
    share = (onehot.T @ agree) / count
    return torch.where(count > 0, share, torch.nan), alpha


def sample_o(g, f_prev, fdot_prev, W, C, lr):
    """Lemma 3's o^(l) per sample with the paper's ΔF^(l-1)|x ≈ -Ḟ^(l-1)|x (app. K, "negatively parallel"):
    cos(ΔV|x, F^(l-1)|x) · cos(V, -Ḟ^(l-1)|x), with ΔV|x from `sample_dV` and V = WᵀC / CᵀC (Lemma 2).

    g: (n, h) pre-activation gradients g^(l); f_prev: (n, d) inputs F^(l-1); fdot_prev: (n, d) their gradients
    Ḟ^(l-1) (= g Wᵀ's rows, Eq. 2); W: (h, d) the weight W^(l); C: (h,). Returns (n,) in float64."""
    return cos_rows(sample_dV(g, f_prev, C, lr), f_prev) * cos_rows(decompose(W, C)[0], -fdot_prev.double())
