"""`nbdemo bench`: the hot paths against their naive versions, run alternately in one process.

Each pair is warmed up once, then run `repeats` times alternately (A, B, A, B, ...); the table gives
the median times and their ratio. Absolute times on shared machines are noise; the ratios are the result.
"""
import copy
import statistics
import time

import torch
import torch.nn.functional as F

from . import resolve_device
from .data import load
from .ensemble import train_ensemble
from .metrics.tfd import feature_grads, weight_changes
from .models import MLP
from .train import batches, train


def timed(fn, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def pair(fast, slow, repeats, device):
    """Median seconds of `fast` and `slow`, run alternately after one warm-up each."""
    timed(fast, device), timed(slow, device)
    t_fast, t_slow = [], []
    for _ in range(repeats):
        t_fast.append(timed(fast, device))
        t_slow.append(timed(slow, device))
    return statistics.median(t_fast), statistics.median(t_slow)


def data_path(device):
    """One epoch of Fashion-MNIST batches of 100: randperm slices of device tensors vs torchvision's DataLoader.

    Returns (device-resident, DataLoader) functions for the data path alone and for a training epoch of the
    9x512 MLP (the same SGD step either way).
    """
    import torchvision
    from torchvision import transforms
    from .data import data_root
    X, y = load("fashion-mnist", device=device)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,)),
                             transforms.Lambda(torch.flatten)])
    ds = torchvision.datasets.FashionMNIST(str(data_root()), train=True, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=100, shuffle=True, num_workers=0)
    model = MLP(784, 512, 9, 10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(xb, yb):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

    def resident(train_too):
        def run():
            for idx in batches(len(X), 100, len(X) // 100, 0, device):
                xb, yb = X[idx], y[idx]
                if train_too:
                    step(xb, yb)
        return run

    def dataloader(train_too):
        def run():
            for xb, yb in loader:
                xb, yb = xb.to(device), yb.to(device)
                if train_too:
                    step(xb, yb)
        return run

    return resident, dataloader


def ensembles(n, device, depth, activation, width=64, batch_size=None):
    """N nets 784 -> width x depth -> 10 on 2,000 Fashion-MNIST images, 20 SGD steps (full batch by default)."""
    X, y = load("fashion-mnist", n_per_class=200, device=device)
    torch.manual_seed(0)
    models = [MLP(784, width, depth, 10, bias="none", activation=activation).to(device) for _ in range(n)]
    kw = dict(steps=20, lr=0.01, batch_size=batch_size, loss="mse", progress=False)
    vectorised = lambda: train_ensemble([copy.deepcopy(m) for m in models], X, y, **kw)
    loop = lambda: [train(copy.deepcopy(m), X, y, seed=i, **kw) for i, m in enumerate(models)]
    return vectorised, loop


def per_sample(device, layer=3, lr=0.1):
    """Per-sample weight changes ΔW|x of one layer of the 9x512 MLP for a batch of 100."""
    X, y = load("fashion-mnist", n_per_class=10, device=device)
    torch.manual_seed(0)
    model = MLP(784, 512, 9, 10).to(device)

    def vectorised():
        feats, logits = model.features(X)
        g = feature_grads(feats[layer:layer + 1], logits, y)[0]  # gradient w.r.t. F^(layer), post-ReLU
        pre_grad = g * (feats[layer] > 0)  # through the ReLU gate to the pre-activation
        return weight_changes(pre_grad, feats[layer - 1], lr)

    def loop():
        out = []
        for i in range(len(X)):
            model.zero_grad()
            F.cross_entropy(model(X[i:i + 1]), y[i:i + 1], reduction="sum").backward()
            out.append(-lr * model.linears[layer - 1].weight.grad.clone())
        return torch.stack(out)

    torch.testing.assert_close(vectorised(), loop(), rtol=1e-4, atol=1e-7)
    return vectorised, loop


def main(args):
    device = resolve_device(args.device)
    r = args.repeats
    rows = []
    resident, dataloader = data_path(device)
    rows.append(("data path, one epoch of batches", *pair(resident(False), dataloader(False), r, device)))
    rows.append(("one training epoch, 9x512 MLP", *pair(resident(True), dataloader(True), r, device)))
    for n in (10, 100):
        rows.append((f"ensemble N={n}, deep linear 5x64, full batch", *pair(*ensembles(n, device, 5, "identity"), r, device)))
        rows.append((f"ensemble N={n}, ReLU MLP 3x64, full batch", *pair(*ensembles(n, device, 3, "relu"), r, device)))
        rows.append((f"ensemble N={n}, ReLU MLP 10x64, batch 100", *pair(*ensembles(n, device, 10, "relu", batch_size=100), r, device)))
    rows.append(("per-sample weight changes, 1 layer", *pair(*per_sample(device), r, device)))
    print(f"device: {device}, threads: {torch.get_num_threads()}, median of {r} alternating repeats")
    print(f"{'pair':44} {'fast (s)':>10} {'naive (s)':>10} {'ratio':>7}")
    for name, fast, slow in rows:
        print(f"{name:44} {fast:10.4f} {slow:10.4f} {slow / fast:6.1f}x")
    if args.book:
        book_times()


def book_times():
    """Execute every claim notebook with the default profile and print the runner's wall times."""
    from . import runner
    from .claims import CLAIMS
    walls = {c.id: runner.run(c.id, log=lambda *_: None)[1]["wall_s"] for c in CLAIMS.values() if c.notebook.exists()}
    for claim, wall in walls.items():
        print(f"{claim:8} {wall:7.1f} s" + ("  OVER the 60 s budget" if wall > 60 else ""))
    print(f"{'book':8} {sum(walls.values()):7.1f} s for {len(walls)} notebooks")
