"""layer_terms (nbdemo.papers.tfd.batch_terms): the same numbers as per_sample_terms without a norm, and the batch's
exact weight gradient with norm_1."""
import torch
import torch.nn.functional as F

from nbdemo.ml.models import MLP
from nbdemo.papers.tfd.batch_terms import layer_terms
from nbdemo.papers.tfd.experiment import per_sample_terms


def _net(norm):
    torch.manual_seed(0)
    return MLP(6, 8, 5, 3, norm=norm).double(), torch.randn(12, 6, dtype=torch.float64), torch.arange(12) % 3


def test_without_a_norm_it_is_per_sample_terms():
    net, X, y = _net(None)
    t, ref = layer_terms(net, net.state_dict(), X, y, 3), per_sample_terms(net, net.state_dict(), X, y)
    assert torch.equal(t["g"], ref["g"][2]) and torch.equal(t["fdot"], ref["fdot"][2])
    assert torch.equal(t["f_prev"], ref["feats"][2]) and torch.equal(t["logits"], ref["logits"])


def test_with_norm1_the_rows_sum_to_the_batch_weight_gradient():
    net, X, y = _net("norm1")
    t = layer_terms(net, net.state_dict(), X, y, 3)
    W = net.linears[2].weight
    (grad,) = torch.autograd.grad(F.cross_entropy(net(X), y, reduction="sum"), [W])
    assert torch.allclose(t["g"].T @ t["f_prev"], grad)             # Σ_x g_x F_xᵀ = ∂L/∂W^(3)
    ref = per_sample_terms(net, net.state_dict(), X, y)
    assert not torch.allclose(ref["g"][2].T @ ref["feats"][2], grad)  # the gradient after the norm is not
