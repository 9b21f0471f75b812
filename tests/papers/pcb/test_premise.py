"""Checks of nbdemo.papers.pcb.premise."""
import torch

from nbdemo.papers.pcb import premise


def test_eq10_decay_matches_lambda_power():
    d = torch.tensor([100.0, 10.0, 1.0])
    got = premise.eq10_decay(d, lr=1e-3, depth=2, steps=30)
    assert torch.allclose(got, 1 - (1 - 2e-3 * d.double()) ** 30)
    assert (got.diff() < 0).all()  # larger d_j, larger predicted decay
    assert premise.eq10_decay(torch.tensor([1e4]), lr=1e-3, depth=1, steps=5).item() == 1  # no contraction: clamped


def test_zca_support_is_a_scaled_identity_on_its_span():
    g = torch.Generator().manual_seed(0)
    scales = torch.cat([torch.ones(20), torch.full((5,), 1e-4), torch.zeros(3)])  # 5 damped, 3 constant columns
    X = torch.randn(400, 28, generator=g, dtype=torch.float64) * scales + 3.0
    Xw, B = premise.zca_support(X, eps=1e-4, keep=0.9)
    assert B.shape == (28, 20)
    assert premise.spectrum_spread(Xw, B) < 1 / 0.9
    assert torch.allclose(Xw @ B @ B.T, Xw, atol=1e-10)  # nothing off the span
    assert premise.spectrum_spread(X[:, :25]) > 100  # the raw data (its non-constant columns) is far from it


def test_span_share_and_band_nanmedians():
    V = torch.eye(4, dtype=torch.float64)
    B = V[:, :2]
    assert premise.span_share(B, V).tolist() == [1, 1, 0, 0]
    v = torch.tensor([1.0, 3.0, float("nan"), 2.0, float("nan")])
    assert premise.band_nanmedians(v, (2,)).tolist() == [1.0, 2.0]
