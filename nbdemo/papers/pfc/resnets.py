"""The ResNets of the PFC paper (Wang, Gai & Zhang), and the features of their blocks.

- FCResNet: embedding -> `blocks` residual blocks x + ReLU(W x + b) -> linear classifier (MNIST row of Table I).
- ConvResNet: the convolutional ResNets of Table I, built from a dataset's stage list, by default with batch norm in
  the blocks and global average pooling before the classifier, which Table I does not specify (either can be turned
  off). The FC block carries a bias; §III-C's model block sigma(W x) has none.
- block_features: every measured block's features, collected with forward hooks that are removed after use; each
  model's `classifier_features` reads them as its classifier reads the last block's (NC's last-layer features are
  the classifier's input, §II).

Layout: rows are samples; features are (N, D).
"""
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn


class Block(nn.Module):
    """x + ReLU(W x + b): the residual block of §III-C, v_l(x) = sigma(W_l x), with a bias added."""

    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)

    def forward(self, x):
        return x + F.relu(self.lin(x))


class FCResNet(nn.Module):
    """Linear embedding to `width`, `blocks` residual blocks, linear classifier. Layer 0 is the embedding's output."""

    def __init__(self, in_dim, width, blocks, n_classes):
        super().__init__()
        self.embed = nn.Linear(in_dim, width)
        self.blocks = nn.Sequential(*(Block(width) for _ in range(blocks)))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x):
        return self.head(self.blocks(self.embed(x.flatten(1))))

    def classifier_features(self, feats):
        """The layers' features (`block_features`) as the classifier reads the last one: as they are."""
        return feats


class ConvBlock(nn.Module):
    """x + ReLU(BN(conv3x3(x))), the convolutional form of the block as standard ResNets build it (batch norm after
    the convolution, which then needs no bias), as in the networks of Papyan et al. [13] whose setting the paper
    follows (§IV-A); with `batch_norm=False`, x + ReLU(conv3x3(x) + b), the convolutional form of §III-C's block."""

    def __init__(self, channels, batch_norm=True):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=not batch_norm)
        self.bn = nn.BatchNorm2d(channels) if batch_norm else nn.Identity()

    def forward(self, x):
        return x + F.relu(self.bn(self.conv(x)))


# Table I: dataset -> (first-stage channels, [(spatial size, blocks) per stage]); channels double at each stage.
TABLE_I = {
    "fashion-mnist": (32, [(14, 5), (7, 4)]),
    "cifar10": (64, [(16, 2), (8, 3), (4, 4)]),
    "stl10": (64, [(48, 5), (24, 5), (12, 5), (6, 5)]),
    "cifar100": (64, [(32, 3), (16, 3), (8, 4), (4, 4)]),
}


class ConvResNet(nn.Module):
    """A conv ResNet of Table I. A strided conv3x3 + ReLU enters each stage (the stem enters the first); the blocks
    (`ConvBlock`, with batch norm if `batch_norm`) of a stage keep its shape. `self.blocks` is the last stage, whose
    features the PFC metrics compare (§IV-A); its input is layer 0. The classifier `self.head` takes the flattened
    last-stage features; with `avg_pool` it averages each channel over its map (global average pooling, as standard
    ResNets do before their classifier) and is linear on the channel means, else it is linear on the flattened maps.
    The layers are measured as the classifier reads them (`classifier_features`).
    Table I gives only the stages' shapes. Without the pooling and the batch norm the last stage did not become NCC
    separable, as the paper's architectures are chosen to be (§IV-A), and its within-class variability grew while
    the training set was fitted (the PFC-4 notebook gives the runs).

    in_shape: (C, H, W) of the images; width: channels of the first stage (Table I's value by default).
    """

    def __init__(self, in_shape, stages, n_classes, width, batch_norm=True, avg_pool=True):
        super().__init__()
        layers, c_in, size = [], in_shape[0], in_shape[1]
        for s, (out_size, n_blocks) in enumerate(stages):
            c_out = width * 2 ** s
            layers += [nn.Conv2d(c_in, c_out, 3, stride=size // out_size, padding=1), nn.ReLU()]
            layers += [ConvBlock(c_out, batch_norm) for _ in range(n_blocks)]
            c_in, size = c_out, out_size
        self.blocks = nn.Sequential(*layers[-stages[-1][1]:])
        self.trunk = nn.Sequential(*layers[:-stages[-1][1]])
        pooled = nn.Sequential(nn.Unflatten(1, (c_in, size, size)), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                               nn.Linear(c_in, n_classes))
        self.head = pooled if avg_pool else nn.Linear(c_in * size * size, n_classes)
        self.channels, self.avg_pool = c_in, avg_pool

    def forward(self, x):
        return self.head(self.blocks(self.trunk(x)).flatten(1))

    def classifier_features(self, feats):
        """The last stage's features (`block_features`, flattened maps) as the classifier reads the last block's:
        with `avg_pool`, each layer's channel means (N, channels); else the flattened maps."""
        if not self.avg_pool:
            return feats
        return [f.reshape(len(f), self.channels, -1).mean(-1) for f in feats]


@torch.no_grad()
def block_features(model, X, batch_size=1000):
    """[input of model.blocks[0], output of each block], each an (N, D) float32 tensor of flattened features.

    Collected by forward hooks on `model.blocks` (removed before returning), in eval mode, in chunks of `batch_size`.
    """
    per_layer = [[] for _ in range(len(model.blocks) + 1)]
    hooks = [model.blocks[0].register_forward_pre_hook(lambda m, inp: per_layer[0].append(inp[0].flatten(1)))]
    for l, block in enumerate(model.blocks, start=1):
        hooks.append(block.register_forward_hook(partial(lambda l, m, inp, out: per_layer[l].append(out.flatten(1)), l)))
    was_training = model.training
    model.eval()
    try:
        for chunk in X.split(batch_size):
            model(chunk)
    finally:
        for h in hooks:
            h.remove()
        model.train(was_training)
    return [torch.cat(chunks) for chunks in per_layer]
