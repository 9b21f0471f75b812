"""Models and solvers for the progressive feedforward collapse (PFC) notebooks (Wang, Gai & Zhang).

- FCResNet: embedding -> `blocks` residual blocks x + ReLU(W x + b) -> linear classifier (MNIST row of Table I).
- ConvResNet: the convolutional ResNets of Table I, built from a dataset's stage list.
  Both blocks carry a bias; §III-C's model block sigma(W x) (l.241 of the paper's text) has none.
- block_features: every measured block's features, collected with forward hooks that are removed after use.
- train_fc / train_recorded / require_terminal_phase: the training run of PFC-1..4, recording every layer's metrics,
  and the verdict rows that say it reached the terminal phase; measure_layers / plot_layers show the per-layer
  metrics and check_across_depth checks their order (Conjecture 1).
- MUFM / UFM (Eq. 13 and its X = 0 case) with the MSE loss: the paper's plain full-batch gradient descent (a batch
  of regulariser values at once), a converged reference solve, and the closed-form classifier W*(H).

Layout: rows are samples. X, H are (N, d); W is (K, d); the logits are H W^T. The paper's D x N matrices are the
transposes.
"""
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .data import DATASETS, dry_run, load
from .metrics.pfc import layer_metrics, relative_depth
from .train import train
from .verdict import ours, paper


class Block(nn.Module):
    """x + ReLU(W x + b): the residual block of §III-C, v_l(x) = sigma(W_l x) (l.241), with a bias added."""

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


class ConvBlock(nn.Module):
    """x + ReLU(conv3x3(x) + b), the convolutional form of the same block (with a bias)."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return x + F.relu(self.conv(x))


# Table I: dataset -> (first-stage channels, [(spatial size, blocks) per stage]); channels double at each stage.
TABLE_I = {
    "fashion-mnist": (32, [(14, 5), (7, 4)]),
    "cifar10": (64, [(16, 2), (8, 3), (4, 4)]),
    "stl10": (64, [(48, 5), (24, 5), (12, 5), (6, 5)]),
    "cifar100": (64, [(32, 3), (16, 3), (8, 4), (4, 4)]),
}


class ConvResNet(nn.Module):
    """A conv ResNet of Table I. A strided conv3x3 + ReLU enters each stage (the stem enters the first); the blocks
    of a stage keep its shape. `self.blocks` is the last stage, whose features the PFC metrics compare (§IV-A);
    its input is layer 0. The classifier is linear on the flattened last-stage features.

    in_shape: (C, H, W) of the images; width: channels of the first stage (Table I's value by default).
    """

    def __init__(self, in_shape, stages, n_classes, width):
        super().__init__()
        layers, c_in, size = [], in_shape[0], in_shape[1]
        for s, (out_size, n_blocks) in enumerate(stages):
            c_out = width * 2 ** s
            layers += [nn.Conv2d(c_in, c_out, 3, stride=size // out_size, padding=1), nn.ReLU()]
            layers += [ConvBlock(c_out) for _ in range(n_blocks)]
            c_in, size = c_out, out_size
        self.blocks = nn.Sequential(*layers[-stages[-1][1]:])
        self.trunk = nn.Sequential(*layers[:-stages[-1][1]])
        self.head = nn.Linear(c_in * size * size, n_classes)

    def forward(self, x):
        return self.head(self.blocks(self.trunk(x)).flatten(1))


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


# The paper's schedule (l.325): lr divided by 10 at epochs 117 and 233 of 350, as fractions of the run.
PAPER_MILESTONES = [117 / 350, 233 / 350]


def milestone_steps(steps, fractions):
    """lr milestones given as fractions of a run of `steps` steps -> the steps at which lr is divided by 10."""
    return [round(f * steps) for f in fractions]


def train_recorded(model, X, y, *, steps, lr_milestones, batch_size, record_every=None, **sgd):
    """Train `model` on (X, y) with cross-entropy and SGD (`nbdemo.train.train`; `sgd`: lr, momentum, weight_decay,
    seed, ...), lr divided by 10 at the fractions `lr_milestones` of the run. Every layer's PFC metrics
    (`layer_metrics` of `block_features`) are recorded at step 0, at the end of the first epoch, every
    `record_every` steps (if given) and at the end.

    Returns (History, the final `block_features`, training accuracy). The accuracy comes from the classifier
    `model.head` applied to the last block's features, so the training set passes through the net once per record.
    """
    first_epoch = max(1, len(X) // batch_size)
    record_at = [first_epoch, *(range(0, steps + 1, record_every) if record_every else [])]
    last = {}

    def record(m, s):
        last["feats"] = block_features(m, X)
        return layer_metrics(last["feats"], y)

    hist = train(model, X, y, steps=steps, batch_size=batch_size, lr_milestones=milestone_steps(steps, lr_milestones),
                 record=record, record_at=record_at, **sgd)
    feats = block_features(model, X) if hist.diverged_at else last["feats"]  # a diverged run stops before its last record
    with torch.no_grad():
        acc = float((model.head(feats[-1]).argmax(1) == y).double().mean())
    loss = f"final batch loss {hist.loss[-1]:.4f}" if len(hist.loss) else "no training step"
    print(f"{loss}, training accuracy {acc:.4f}")
    return hist, feats, acc


def train_fc(dataset, n_per_class, width, blocks, *, device, seed, **train_kwargs):
    """The run of PFC-1..3: an `FCResNet` of `blocks` blocks, `width` wide, trained by `train_recorded`
    (`train_kwargs`: steps, lr_milestones, batch_size, lr, momentum, weight_decay, record_every) on a balanced
    sample of `dataset`, `n_per_class` per class. Returns (X, y, History, the final `block_features`, training
    accuracy), having said in a line what it trained on."""
    X, y = load(dataset, n_per_class=n_per_class, device=device, seed=seed)
    k = DATASETS[dataset][1]
    print(f"{dataset}: {len(X)} training samples of dimension {X.shape[1]}, {k} classes")
    model = FCResNet(X.shape[1], width, blocks, k).to(device)
    return X, y, *train_recorded(model, X, y, seed=seed, **train_kwargs)


def require_terminal_phase(v, hist, train_acc):
    """Add to Verdict `v` the requirements that the run of `train_recorded` reached the terminal phase, the regime of
    Conjecture 1 and Theorem 1 (whose premise is a collapsed last layer): training accuracy 1; the last layer's
    NCC accuracy at least 0.99; its PFC1 at the end at most a quarter of its value at the end of the first epoch
    (the first record after step 0; in a dry run, the last). A run with no record after step 0 (0 steps: the
    control) has no such ratio: NaN, which fails."""
    ncc, end = float(hist["PFC3"][-1, -1]), float(hist["PFC1"][-1, -1])
    early = float(hist["PFC1"][1, -1]) if len(hist.steps) > 1 else float("nan")
    ratio = end / early
    v.require("training accuracy 1", train_acc, "==", 1, shown=f"{train_acc:.4f}",
              source=ours("the terminal phase (Conjecture 1, l.188) begins at zero training error (Papyan et al.); "
                          "the paper states no accuracy"))
    v.require("last layer NCC-separable", ncc, ">=", 0.99, shown=f"{ncc:.3f}", expected="NCC accuracy >= 0.99",
              source=ours("the paper's last layer is NCC separable (l.323), with the small error it allows (l.90) "
                          "taken as 1%"))
    v.require("last layer collapsing", ratio, "<=", 0.25, expected="PFC1 <= 1/4 of its value after epoch 1",
              shown=f"{early:.3g} -> {end:.3g} ({ratio:.2f}x)",
              source=ours("a last layer whose PFC1 fell at least fourfold after the first epoch is collapsing "
                          "(NC emerges, l.188); the paper gives no size"))


def measure_layers(feats, y):
    """Every layer's PFC metrics (`layer_metrics`) and relative position (`relative_depth`), printed one line per
    layer. Returns (metrics, pos)."""
    metrics, pos = layer_metrics(feats, y), relative_depth(feats)
    print("layer  position     PFC1    PFC2   PFC3")
    for l in range(len(pos)):
        print(f"{l:5d}  {pos[l]:8.3f}  {metrics['PFC1'][l]:7.4f} {metrics['PFC2'][l]:7.4f} {metrics['PFC3'][l]:6.3f}")
    return metrics, pos


def check_across_depth(v, metrics):
    """Conjecture 1's order across depth as checks of Verdict `v`: PFC1 and PFC2 go down at every block (statistic:
    each block's decrease, all > 0), and PFC3 (NCC accuracy) never drops by more than 0.005 from one layer to the
    next (statistic: the largest drop)."""
    blocks = len(metrics["PFC1"]) - 1
    for name, line in (("PFC1", 190), ("PFC2", 192)):
        m = np.asarray(metrics[name], dtype=float)
        fall = -np.diff(m)
        v.check(f"{name} decreases across depth", fall, ">", 0, expected=f"down at all {blocks} blocks",
                shown=f"{int(np.sum(fall > 0))}/{blocks} ({m[0]:.3g} -> {m[-1]:.3g})",
                source=paper(f"Conjecture 1 ({name}), Fig. 3", line))
    pfc3 = np.asarray(metrics["PFC3"], dtype=float)
    drop = float(np.max(-np.diff(pfc3)))
    v.check("PFC3 rises across depth", drop, "<=", 0.005, expected="no drop > 0.005 between layers",
            shown=f"max drop {max(0.0, drop):.3f}, last {pfc3[-1]:.3f}",
            source=ours("NCC accuracy 'progressively collapses to 1' (l.194): rises layer by layer, "
                        "up to half a percentage point of noise"))


def plot_layers(axes, pos, metrics, ts=None, curve=None):
    """Fig. 3 on three axes: the layers' metrics (green points) against relative position and, if given, the
    geodesic prediction `curve` at positions `ts` (blue)."""
    for ax, name in zip(axes, ["PFC1", "PFC2", "PFC3"]):
        if curve is not None:
            ax.plot(ts, curve[name], color="C0", label="geodesic prediction")
        ax.plot(pos, metrics[name], "o-", color="C2", ms=4, label="layers")
        ax.set(xlabel="relative position", title=name)
    axes[0].set_yscale("log")
    axes[0].legend()


def gaussian_classes(K, d, n, seed=0):
    """§IV-B data: n samples per class from N(mu_k, I_d), mu_k uniform on the unit sphere. Returns X (Kn, d) float64,
    y (Kn,) with the samples grouped by class."""
    g = torch.Generator().manual_seed(seed)
    mu = torch.randn(K, d, generator=g, dtype=torch.float64)
    mu /= mu.norm(dim=1, keepdim=True)
    y = torch.arange(K).repeat_interleave(n)
    return mu[y] + torch.randn(K * n, d, generator=g, dtype=torch.float64), y


def mufm_gradients(W, H, X, Y, lam_W, lam, N):
    """Gradients (dW, dH) of the MUFM objective with the MSE loss (Eq. 13, rows layout), batched over a leading dim:

        f(W, H) = ||H W^T - Y||^2 / (2N) + lam_W ||W||^2 / (2K) + lam ||H - X||^2 / (2N),   N = K n samples.

    N is explicit so that the same formulas serve H, X, Y given in coordinates of an orthonormal basis (fewer rows).
    """
    K = Y.shape[-1]
    R = H @ W.transpose(-1, -2) - Y
    return R.transpose(-1, -2) @ H / N + lam_W / K * W, (R @ W + lam * (H - X)) / N


def mufm_objective(W, H, X, Y, lam_W, lam, N):
    """f(W, H) of `mufm_gradients`, per problem of the batch."""
    K = Y.shape[-1]
    return (((H @ W.transpose(-1, -2) - Y) ** 2).sum((-1, -2)) / (2 * N)
            + lam_W / (2 * K) * (W ** 2).sum((-1, -2)) + lam / (2 * N) * ((H - X) ** 2).sum((-1, -2)))


def mufm_h_star(W, X, Y, lam):
    """The features minimising f for a fixed W: H = (Y W + lam X)(W^T W + lam I)^-1."""
    A = W.transpose(-1, -2) @ W + lam * torch.eye(W.shape[-1], dtype=W.dtype, device=W.device)
    return torch.linalg.solve(A, (Y @ W + lam * X).transpose(-1, -2)).transpose(-1, -2)


def grad_norm(W, H, X, Y, lam_W, lam):
    """Norm of the full gradient (W and H together) of the MUFM objective, per problem of the batch."""
    gW, gH = mufm_gradients(W, H, X, Y, lam_W, lam, len(Y))
    return (gW.pow(2).sum((-1, -2)) + gH.pow(2).sum((-1, -2))).sqrt()


def _batch(X, y, lams):
    K = int(y.max()) + 1
    lam = torch.as_tensor(lams, dtype=X.dtype, device=X.device)[:, None, None]
    return F.one_hot(y, K).to(X.dtype), lam, K


def solve_mufm_gd(X, y, *, lam_W, lams, steps, lr, seed=0):
    """Plain full-batch gradient descent on MUFM (Eq. 13, MSE loss), the paper's solver, for every value in `lams`.

    X: (N, d) data shared by all problems, or (B, N, d) one per problem; X = 0 gives the UFM in the same setting
    (feature regulariser lam ||H||^2 / (2N)). W (K, d) and H (N, d) start standard normal, the same draw for every
    problem. Returns (W (B, K, d), H (B, N, d), grad_norm (B,)) at the last iterate.

    Each update adds to H only multiples of Y W and X and right-multiplies H, so H stays in the column span of
    [H_0, Y, X]. GD runs in an orthonormal basis U of that span (H = U T): the iterates are exactly those of GD on H,
    at a fraction of the cost. A dry run (the runner's shape check) takes two steps.
    """
    steps = min(steps, 2) if dry_run() else steps
    g = torch.Generator().manual_seed(seed)
    N, d = X.shape[-2:]
    Y, lam, K = _batch(X, y, lams)
    W = torch.randn(K, d, generator=g, dtype=X.dtype).to(X.device).repeat(len(lam), 1, 1)
    H0 = torch.randn(N, d, generator=g, dtype=X.dtype).to(X.device)
    U = torch.linalg.qr(torch.cat([H0, Y, *X.reshape(-1, N, d)], 1)).Q
    T, CY, CX = (U.T @ H0).repeat(len(lam), 1, 1), U.T @ Y, U.T @ X
    for _ in range(steps):
        gW, gT = mufm_gradients(W, T, CX, CY, lam_W, lam, N)
        W -= lr * gW
        T -= lr * gT
    H = U @ T
    return W, H, grad_norm(W, H, X, Y, lam_W, lam)


def solve_mufm_exact(X, y, *, lam_W, lams, seed=0, iters=5000):
    """Converged MUFM (or UFM, X = 0) solutions for every value in `lams`, a reference for the GD solver.

    H is eliminated through mufm_h_star (which lies in the span of [Y, X]); the objective of W alone, K x d numbers,
    is minimised by L-BFGS in float64, in an orthonormal basis of that span. Its gradient is the W-gradient of f at
    H*(W) (the H-gradient vanishes there). Returns (W, H, grad_norm) as solve_mufm_gd does.
    """
    iters = min(iters, 2) if dry_run() else iters
    N, d = X.shape[-2:]
    Y, lam, K = _batch(X, y, lams)
    U = torch.linalg.qr(torch.cat([Y, *X.reshape(-1, N, d)], 1)).Q
    CY, CX = U.T @ Y, (U.T @ X).expand(len(lam), -1, -1)
    W0 = torch.randn(K, d, generator=torch.Generator().manual_seed(seed), dtype=X.dtype).to(X.device)
    Ws = []
    for cx, lm in zip(CX, lam):
        W = W0.clone()
        opt = torch.optim.LBFGS([W], lr=1, max_iter=iters, tolerance_grad=1e-11, tolerance_change=1e-30,
                                history_size=50, line_search_fn="strong_wolfe")

        def closure():
            H = mufm_h_star(W, cx, CY, lm)
            W.grad = mufm_gradients(W, H, cx, CY, lam_W, lm, N)[0]
            return mufm_objective(W, H, cx, CY, lam_W, lm, N)

        opt.step(closure)
        Ws.append(W)
    W = torch.stack(Ws)
    H = U @ mufm_h_star(W, CX, CY, lam)
    return W, H, grad_norm(W, H, X, Y, lam_W, lam)


def w_star(H, y, lam_W):
    """Closed-form MSE classifier of Theorem 4, W*(H) = Y H^T (H H^T + n lam_W I)^-1 in the paper's layout,
    i.e. Y^T H (H^T H + n lam_W I)^-1 with rows; n = samples per class (balanced). H may be batched (B, N, d)."""
    K = int(y.max()) + 1
    n = len(y) / K
    Y = F.one_hot(y, K).to(H.dtype)
    A = H.transpose(-1, -2) @ H + n * lam_W * torch.eye(H.shape[-1], dtype=H.dtype, device=H.device)
    return torch.linalg.solve(A, H.transpose(-1, -2) @ Y).transpose(-1, -2)
