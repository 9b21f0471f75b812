"""st-VGG, the "stripped VGG" of the PC-bias paper (Hacohen & Weinshall, app. D.2), as an ensemble of N networks.

App. D.2 (l.862 of the text copy): eight convolutions with 32, 32, 64, 64, 128, 128, 256, 256 filters, the first six
3×3 and the last two 2×2; every other convolution is followed by a 2×2 max-pooling and a 0.25 dropout; then flatten, a
512-unit fully connected layer, a 0.5 dropout, and the output layer (softmax folded into the cross-entropy). Trained
with SGD (no momentum, no L2: §3.1, l.258), cross-entropy, batch 100, learning rate 0.05 (l.862). The paper names
neither the activation (ReLU, VGG's) nor the padding: we pad "same" (the output keeps the input's size; for the even
2×2 kernels one row and column after, as Keras pads), the only padding under which four 2×2 poolings fit a 32×32
image; the flattened map is then 256 × 2 × 2. The init is Glorot uniform with zero biases (`glorot_`: the paper's
networks, §3.1 l.256; also Keras's default). `StVGG()` with no arguments is that network; every number is a
parameter, so a notebook's default profile can build a small stand-in of the same shape on the CPU.

`linear=True` is the surrogate behind the compact representation (§3.3, l.291: activations ignored; "linear
st-VGG", l.864: identity activations, average pooling in place of max-pooling), without dropout.

Dropout draws a mask per member: the ensemble trains with `nbdemo.ml.ensemble.train_ensemble(...,
randomness="different")` (member i's batches from seed + i, its own masks; tested).
"""
import copy
import math

import torch
from torch import nn
from torch.func import functional_call, jacrev, vmap

from nbdemo.ml.data import dry_run
from nbdemo.papers.pcb.networks import glorot_

# App. D.2 (l.862)
CHANNELS = (32, 32, 64, 64, 128, 128, 256, 256)
KERNELS = (3, 3, 3, 3, 3, 3, 2, 2)
HIDDEN = 512
CONV_DROPOUT = 0.25
FC_DROPOUT = 0.5
BATCH_SIZE = 100
LR = 0.05


class StVGG(nn.Module):
    """Convolutions of `channels` filters with `kernels` sizes ("same" padding, ReLU), a 2×2 max-pooling and a
    `conv_dropout` dropout after every `pool_every`-th, then a `hidden`-unit ReLU layer, an `fc_dropout` dropout and
    the `n_classes` outputs. A dropout of 0 is left out. The defaults are app. D.2's st-VGG on 32×32 colour images.

    linear=True: identity activations, average pooling, no dropout (the surrogate of the compact representation).
    """

    def __init__(self, in_shape=(3, 32, 32), n_classes=10, *, channels=CHANNELS, kernels=KERNELS, hidden=HIDDEN,
                 conv_dropout=CONV_DROPOUT, fc_dropout=FC_DROPOUT, pool_every=2, linear=False):
        super().__init__()
        c, h, w = in_shape
        if len(channels) != len(kernels) or not channels:
            raise ValueError(f"channels={list(channels)}, kernels={list(kernels)}: give one kernel size per convolution")
        if len(channels) % pool_every:
            raise ValueError(f"{len(channels)} convolutions: a pooling follows every {pool_every}, so give a multiple")
        for p in (conv_dropout, fc_dropout):
            if not 0 <= p < 1:
                raise ValueError(f"dropout {p}: a probability in [0, 1)")
        if min(h, w) < 2 ** (len(channels) // pool_every):
            raise ValueError(f"a {h}×{w} input cannot be pooled {len(channels) // pool_every} times by 2×2")
        layers = []
        for i, (k, size) in enumerate(zip(channels, kernels)):
            # odd kernels: symmetric padding k // 2; even ones: "same" (PyTorch, like Keras, pads one more after)
            layers += [nn.Conv2d(c, k, size, padding=size // 2 if size % 2 else "same"), nn.ReLU()]
            c = k
            if (i + 1) % pool_every == 0:
                layers.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
                if conv_dropout:
                    layers.append(nn.Dropout(conv_dropout))
        self.features = nn.Sequential(*layers)
        head = [nn.Flatten(), nn.Linear(c * h * w, hidden), nn.ReLU()]
        head += [nn.Dropout(fc_dropout)] if fc_dropout else []
        self.head = nn.Sequential(*head, nn.Linear(hidden, n_classes))
        self.linear = linear

    def forward(self, x):
        for layer in [*self.features, *self.head]:
            if self.linear:
                if isinstance(layer, (nn.ReLU, nn.Dropout)):
                    continue
                if isinstance(layer, nn.MaxPool2d):
                    layer = nn.AvgPool2d(2)
            x = layer(x)
        return x


def ensemble(n_models, in_shape, n_classes, device="cpu", **kwargs):
    """`n_models` st-VGGs (`StVGG(in_shape, n_classes, **kwargs)`), each with its own Glorot-uniform init, zero biases."""
    return [glorot_(StVGG(in_shape, n_classes, **kwargs)).to(device) for _ in range(n_models)]


def predict(model, state, X, *, max_rows=2 ** 16):
    """Outputs (N, n, K) of every member on X in evaluation mode (no dropout), without gradients, in chunks of X
    that keep N × chunk ≤ max_rows (one chunk for small ensembles; N = 100 st-VGGs on 2,500 images need several)."""
    base = copy.deepcopy(model).eval().to("meta")
    one = vmap(lambda p, x: functional_call(base, p, (x,)), in_dims=(0, None))
    n_models = len(next(iter(state.values())))
    chunk = max(1, max_rows // n_models)
    with torch.no_grad():
        return torch.cat([one(state, X[i:i + chunk]) for i in range(0, len(X), chunk)], 1)


def compact_weight(model, state, in_shape, *, max_rows=2 ** 16):
    """Compact representation (N, K, q) of a stacked ensemble: the linear surrogate's map (`linear=True`), biases
    removed, read off by feeding the q standard basis images: W[:, :, j] = f_lin(e_j) - f_lin(0), in chunks of
    basis images that keep N × chunk ≤ max_rows.

    In a dry run (the runner's shape check) the same map is read off as the Jacobian of f_lin at 0 (K backward
    passes instead of q + 1 forward passes; for CIFAR the basis alone is 3,073 images per member); it equals the
    basis read-out up to float rounding, since f_lin is affine. As `nbdemo.papers.pcb.networks.cnn_compact_weight` does for SmallVGG.
    """
    surrogate = copy.deepcopy(model).to("meta")
    surrogate.linear = True
    q, device = math.prod(in_shape), next(iter(state.values())).device
    if dry_run():
        zero = torch.zeros(1, *in_shape, device=device)
        jac = vmap(lambda p: jacrev(lambda x: functional_call(surrogate, p, (x,)))(zero))(state)  # (N, 1, K, 1, ...)
        return jac.reshape(len(jac), -1, q)
    basis = torch.cat([torch.eye(q), torch.zeros(1, q)]).reshape(q + 1, *in_shape).to(device)
    one = vmap(lambda p, x: functional_call(surrogate, p, (x,)), in_dims=(0, None))
    chunk = max(1, max_rows // len(next(iter(state.values()))))
    with torch.no_grad():
        out = torch.cat([one(state, basis[i:i + chunk]) for i in range(0, q + 1, chunk)], 1)
    return (out[:, :q] - out[:, q:]).transpose(-1, -2)
