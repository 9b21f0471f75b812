"""One hidden layer's per-sample terms of an MLP, also with a batch normalisation (TFD-2's norm_1 control).

`experiment.per_sample_terms` takes g^(l) = D^(l)Ḟ^(l), the gradient at the activation's input. With a normalisation
between the linear layer and the activation (norm_1 or BN, §4.3, app. M.1) that is the gradient at the norm's output,
not at the linear layer's output z^(l) = W^(l)F^(l-1), so -lr·g Fᵀ is not the weight change. Here g is taken at z^(l)
itself. Without a normalisation the two are the same numbers. With one, the rows are coupled: every row is a sample's
part of the *summed* loss's gradient (the norm's mean and variance carry each sample's feature into every sample's
loss), so Σ_x g_x F_xᵀ is exactly the weight gradient of the evaluation batch, and Ḟ|x is what the batch's loss sends
to x's feature, not the gradient of x's own loss alone.
"""
import torch
import torch.nn.functional as F


def layer_terms(probe, state, X, y, layer):
    """Load `state` into `probe` (an `nbdemo.ml.models.MLP`) and return, for hidden layer `layer` = l and every sample,
    f_prev F^(l-1) (the layer's input), fdot Ḟ^(l) = ∂L/∂F^(l), g = ∂L/∂z^(l) at the linear layer's output, with L the
    summed cross-entropy over X, and the logits. All detached."""
    probe.load_state_dict(state)
    out = {}
    hook = probe.linears[layer - 1].register_forward_hook(lambda module, inputs, z: out.update(z=z))
    try:
        feats, logits = probe.features(X)
    finally:
        hook.remove()
    fdot, g = torch.autograd.grad(F.cross_entropy(logits, y, reduction="sum"), [feats[layer], out["z"]])
    return {"f_prev": feats[layer - 1].detach(), "fdot": fdot, "g": g, "logits": logits.detach()}
