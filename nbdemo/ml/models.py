"""The configurable MLP shared by the TFD, PCB and MLI notebooks."""
import math

import torch
from torch import nn


class Norm1(nn.Module):
    """TFD's simplified normalisation norm_1: standardise each unit over the batch, no affine parameters."""

    def forward(self, x):
        return (x - x.mean(0)) / (x.std(0, unbiased=False) + 1e-5)


class MLP(nn.Module):
    """`depth` linear layers, ReLU (or `activation`) after every layer but the last.

    bias: "all", "last" (output layer only) or "none".
    norm: None, "bn" (BatchNorm1d) or "norm1" (Norm1), after each hidden linear layer, before the activation.
    init: "xavier" draws W ~ N(0, gamma * 2/(fan_in+fan_out)) (TFD's γ); "kaiming" draws N(0, gamma * 2/fan_in).
    out_scale: β; every layer's weights are multiplied by β^(1/depth), so a bias-free ReLU net's output scales by β.
    Biases start at zero.
    """

    def __init__(self, in_dim, width, depth, out_dim, *, bias="all", norm=None, gamma=1.0, init="xavier",
                 out_scale=None, activation="relu"):
        super().__init__()
        if depth < 1:
            raise ValueError(f"depth={depth}: an MLP needs at least one layer")
        if bias not in ("all", "last", "none"):
            raise ValueError(f"bias={bias!r}: choose 'all', 'last' or 'none'")
        if norm not in (None, "bn", "norm1"):
            raise ValueError(f"norm={norm!r}: choose None, 'bn' or 'norm1'")
        if gamma <= 0:
            raise ValueError(f"gamma={gamma}: the init variance factor must be > 0")
        dims = [in_dim] + [width] * (depth - 1) + [out_dim]
        self.linears = nn.ModuleList(
            nn.Linear(a, b, bias=bias == "all" or (bias == "last" and i == depth - 1))
            for i, (a, b) in enumerate(zip(dims[:-1], dims[1:])))
        norms = {None: nn.Identity, "bn": lambda: nn.BatchNorm1d(width), "norm1": Norm1}[norm]
        self.norms = nn.ModuleList(norms() for _ in range(depth - 1))
        self.act = {"relu": nn.ReLU(), "leaky_relu": nn.LeakyReLU(), "identity": nn.Identity()}[activation]
        scale = 1.0 if out_scale is None else out_scale ** (1 / depth)
        with torch.no_grad():
            for lin in self.linears:
                fan_out, fan_in = lin.weight.shape
                var = gamma * (2 / (fan_in + fan_out) if init == "xavier" else 2 / fan_in)
                lin.weight.normal_(0, math.sqrt(var)).mul_(scale)
                if lin.bias is not None:
                    lin.bias.zero_()

    def features(self, x):
        """Return ([F0 = x, F1, …, F_{L-1}], logits): the input and every hidden layer's output after the activation."""
        feats = [x]
        for lin, norm in zip(self.linears[:-1], self.norms):
            x = self.act(norm(lin(x)))
            feats.append(x)
        return feats, self.linears[-1](x)

    def forward(self, x, features=False):
        """Logits; with features=True, what `features` returns (so torch.func can reach it)."""
        return self.features(x) if features else self.features(x)[1]
