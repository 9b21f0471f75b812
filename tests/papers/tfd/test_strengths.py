"""strengths (nbdemo.papers.tfd.strengths): the numbers of metrics.common_directions and metrics.perspective2."""
import torch

from nbdemo.papers.tfd import metrics, strengths


def _planted(h, d, top, seed):
    """A random (h, d) matrix whose singular values start with `top`, the rest well below them."""
    g = torch.Generator().manual_seed(seed)
    U, _ = torch.linalg.qr(torch.randn(h, h, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    r = min(h, d)
    s = torch.cat([torch.tensor(top, dtype=torch.float64), torch.linspace(1, 0.1, r - len(top), dtype=torch.float64)])
    return U[:, :r] @ torch.diag(s) @ V[:, :r].T


def test_common_strengths_are_those_of_the_successive_directions():
    g = torch.Generator().manual_seed(0)
    base = _planted(40, 30, [9.0, 6.0, 4.0, 3.0, 2.0, 1.5], 1)
    dW = base + 0.3 * torch.randn(7, 40, 30, generator=g, dtype=torch.float64)   # 7 iterations around one matrix
    ref = metrics.common_directions(dW, k=5)[1]
    assert torch.allclose(strengths.common_strengths(dW, k=5), ref, rtol=1e-5)
    assert ref[0] / ref[1] > 1.2                                                     # not a degenerate case


def test_common_strengths_of_one_matrix_are_its_singular_values():
    A = _planted(50, 35, [5.0, 3.0, 2.0], 2)
    assert torch.allclose(strengths.common_strengths(A, k=3), torch.tensor([5.0, 3.0, 2.0], dtype=torch.float64),
                          rtol=1e-6)
    assert torch.allclose(strengths.common_strengths(A[None], k=2), torch.linalg.svdvals(A)[:2], rtol=1e-6)


def test_perspective2_is_metrics_perspective2():
    g = torch.Generator().manual_seed(3)
    h2, h, d, n = 24, 32, 20, 15
    W2 = _planted(h2, h, [8.0, 5.0, 3.5, 2.5], 4)
    C = torch.randn(h2, generator=g, dtype=torch.float64)
    g2, f, f_prev = (torch.randn(n, h2, generator=g, dtype=torch.float64), torch.randn(n, h, generator=g).double(),
                     torch.rand(n, d, generator=g).double())
    for k in (1, 3):
        p, noise = strengths.perspective2(W2, 3.0 * C, g2, f, f_prev, 0.1, k=k)     # C need not be a unit vector
        p_ref, noise_ref = metrics.perspective2(W2, C, g2, f, f_prev, 0.1, k=k)
        assert noise.shape == noise_ref.shape == (n, k)
        assert torch.allclose(p, p_ref, rtol=1e-12) and torch.allclose(noise, noise_ref, rtol=1e-4, atol=1e-6 * noise_ref.max())


def test_top_eigenvectors_order_and_shape():
    A = _planted(30, 30, [6.0, 4.0], 5)
    U = strengths.top_eigenvectors(A @ A.T, 2)
    assert U.shape == (30, 2) and U.dtype == torch.float64
    assert torch.allclose((A.T @ U).norm(dim=0), torch.tensor([6.0, 4.0], dtype=torch.float64), rtol=1e-6)
