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
