"""Analytic cases for Theorem 2's per-sample sign (nbdemo.papers.tfd.sign)."""
import math

import torch

from nbdemo.papers.tfd import metrics as tfd
from nbdemo.papers.tfd import sign as tfd_sign


def test_sample_dV_is_lemma1_of_the_rank_one_change():
    gen = torch.Generator().manual_seed(0)
    g, f = torch.randn(6, 5, generator=gen, dtype=torch.float64), torch.randn(6, 4, generator=gen, dtype=torch.float64)
    C, lr = torch.randn(5, generator=gen, dtype=torch.float64), 0.3
    dV = tfd_sign.sample_dV(g, f, C, lr)
    ref = tfd.decompose(tfd.weight_changes(g, f, lr), C)[0]  # V of each sample's own ΔW|x (Lemma 1)
    assert torch.allclose(dV, ref)
    # parallel to the sample's own input, with the sign of -g·C, also for inputs with negative entries
    assert torch.allclose(tfd.cos_rows(dV, f), -torch.sign(g @ C))


def test_sample_dV_is_zero_without_gradient_along_C():
    C = torch.tensor([1.0, 0.0, 0.0], dtype=torch.float64)
    g = torch.tensor([[0.0, 2.0, -1.0]], dtype=torch.float64)  # orthogonal to C
    assert torch.equal(tfd_sign.sample_dV(g, torch.ones(1, 2), C, 0.1), torch.zeros(1, 2, dtype=torch.float64))


def test_category_agreement_counts_the_majority_sign():
    #                  category 0      category 1          category 2 (tie)  category 3 (a zero)
    s = torch.tensor([1.0, 1.0, -1.0, -1.0, -1.0, -1.0, 1.0, 1.0, -1.0, 1.0, 0.0, 1.0])
    y = torch.tensor([0, 0, 0, 1, 1, 1, 1, 2, 2, 3, 3, 3])
    share, alpha = tfd_sign.category_agreement(s, y, 5)
    assert alpha[:4].tolist() == [1.0, -1.0, 1.0, 1.0]
    assert torch.allclose(share[:4], torch.tensor([2 / 3, 3 / 4, 1 / 2, 2 / 3], dtype=torch.float64))
    assert math.isnan(share[4])  # category 4 is absent


def test_category_agreement_is_one_when_every_sign_is_shared():
    y = torch.arange(20) % 4
    s = torch.where(y % 2 == 0, -0.999, 1.0)  # one sign per category, magnitudes irrelevant
    share, alpha = tfd_sign.category_agreement(s, y, 4)
    assert share.tolist() == [1.0] * 4 and alpha.tolist() == [-1.0, 1.0, -1.0, 1.0]


def test_sample_o_is_one_without_noise_off_the_common_direction():
    # W = C vᵀ (ε = 0, Lemma 2): Ḟ = Wᵀg = v (C·g), V = v, so o = (-sign(g·C))·(-sign(g·C)) = 1 for every sample
    gen = torch.Generator().manual_seed(1)
    C, v = torch.randn(5, generator=gen, dtype=torch.float64), torch.randn(4, generator=gen, dtype=torch.float64)
    W = C[:, None] * v[None, :]
    g, f = torch.randn(7, 5, generator=gen, dtype=torch.float64), torch.rand(7, 4, generator=gen, dtype=torch.float64)
    assert torch.allclose(tfd_sign.sample_o(g, f, g @ W, W, C, 0.1), torch.ones(7, dtype=torch.float64))


def test_sample_o_by_hand():
    # h = d = 2, C = e1, Wᵀ = [[1, a], [0, b]] (ε = [[0, a], [0, b]] has ε C = 0), V = (1, 0), Ḟ = Wᵀg
    C, f = torch.tensor([1.0, 0.0], dtype=torch.float64), torch.ones(1, 2, dtype=torch.float64)

    def o(a, b, g):
        W = torch.tensor([[1.0, 0.0], [a, b]], dtype=torch.float64)
        g = torch.tensor([g], dtype=torch.float64)
        return tfd_sign.sample_o(g, f, g @ W, W, C, 0.5).item()

    assert math.isclose(o(0, 0, [1.0, -1.0]), 1.0)                  # no noise: o = 1
    assert math.isclose(o(3, 0, [1.0, -1.0]), -1.0)                 # Ḟ = (1 - 3, 0): the noise term wins, o = -1
    assert math.isclose(o(0, 1, [1.0, 1.0]), 1 / math.sqrt(2))      # Ḟ = (1, 1): o = sign(g·C)·cos(V, Ḟ) = 1/√2
    assert math.isclose(o(0, 1, [-2.0, 1.0]), 2 / math.sqrt(5))     # g·C < 0: Ḟ = (-2, 1), o = (-1)·(-2/√5)


def test_sample_o_uses_the_net_s_own_feature_gradient():
    # in an MLP, per_sample_terms' Ḟ^(l-1) is W^(l)ᵀ g^(l) (Eq. 2), so sample_o's reading holds there
    from nbdemo.ml.models import MLP
    from nbdemo.papers.tfd.experiment import per_sample_terms
    torch.manual_seed(0)
    net = MLP(6, 8, 4, 3).double()
    X, y = torch.randn(10, 6, dtype=torch.float64), torch.arange(10) % 3
    t = per_sample_terms(net, net.state_dict(), X, y)
    W = net.linears[2].weight.detach()                             # W^(3): F^(2) -> layer 3
    assert torch.allclose(t["fdot"][1], t["g"][2] @ W)               # Ḟ^(2) = W^(3)ᵀ g^(3), row-wise
