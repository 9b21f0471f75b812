"""`nbdemo bench`: the hot paths against their naive versions, run alternately in one process.

Each pair is warmed up once, then run `repeats` times alternately (A, B, A, B, ...); the table gives
the median times and their ratio. Absolute times on shared machines are noise; the ratios are the result.
The last columns divide the pair's work by each side's time and compare it with the machine's matmul peak:
a pair whose naive side already runs near the peak cannot gain much from vectorising. The work is the smaller
of the two sides' multiply-adds in matrix products and convolutions (torch's FlopCounterMode); it is the
smaller because the vmapped backward of a convolution counts several times the loop's.

`--quick` keeps one row of each kind at its small size (ensembles of N=10, a tenth of an epoch for the data path)
and times fewer repeats, so that the table fits in about two minutes.
"""
import copy
import functools
import statistics
import time

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from nbdemo.ml.data import load
from nbdemo.ml.ensemble import train_ensemble
from nbdemo.ml.models import MLP
from nbdemo.ml.train import batches, train
from nbdemo.papers.pcb.networks import SmallVGG, train_linear
from nbdemo.papers.pfc.resnets import FCResNet
from nbdemo.papers.tfd.metrics import common_direction, feature_grads, weight_changes


def timed(fn, device):
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - t0


def macs(fn):
    """Multiply-adds that one call of `fn` spends in matrix products and convolutions."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops() / 2


def pair(fast, slow, repeats, device):
    """Median seconds of `fast` and `slow`, run alternately after one warm-up each, and their multiply-adds."""
    timed(fast, device), timed(slow, device)
    t_fast, t_slow = [], []
    for _ in range(repeats):
        t_fast.append(timed(fast, device))
        t_slow.append(timed(slow, device))
    return statistics.median(t_fast), statistics.median(t_slow), macs(fast), macs(slow)


def matmul_peak(device, repeats=20):
    """GMAC/s of one large float32 product, (2000 x 784) @ (784 x 640): what this machine's matmuls can reach."""
    a, b = torch.randn(2000, 784, device=device), torch.randn(784, 640, device=device)
    t = statistics.median(timed(lambda: a @ b, device) for _ in range(repeats))
    return 2000 * 784 * 640 / t / 1e9


def data_path(device, n_batches=None):
    """One epoch of Fashion-MNIST batches of 100 (or its first n_batches): randperm slices of device tensors vs
    torchvision's DataLoader.

    Returns (device-resident, DataLoader) functions for the data path alone and for a training epoch of the
    9x512 MLP (the same SGD step either way).
    """
    import itertools

    import torchvision
    from torchvision import transforms

    from nbdemo.ml.datacheck import data_root
    X, y = load("fashion-mnist", device=device)
    tf = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,)),
                             transforms.Lambda(torch.flatten)])
    ds = torchvision.datasets.FashionMNIST(str(data_root()), train=True, transform=tf)
    loader = torch.utils.data.DataLoader(ds, batch_size=100, shuffle=True, num_workers=0)
    model = MLP(784, 512, 9, 10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n_batches = n_batches or len(X) // 100

    def step(xb, yb):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

    def resident(train_too):
        def run():
            for idx in batches(len(X), 100, n_batches, 0, device):
                xb, yb = X[idx], y[idx]
                if train_too:
                    step(xb, yb)
        return run

    def dataloader(train_too):
        def run():
            for xb, yb in itertools.islice(loader, n_batches):
                xb, yb = xb.to(device), yb.to(device)
                if train_too:
                    step(xb, yb)
        return run

    return resident, dataloader


def finished(hist):
    """A bench run that diverged would time nothing worth comparing."""
    if hist.diverged_at is not None:
        raise RuntimeError(f"a bench run diverged at step {hist.diverged_at}; its times would mean nothing")


def members(n, device, setting):
    """The N seeded initial nets of one `ENSEMBLES` setting, its data, and the kwargs of 10 SGD steps."""
    make, data, batch_size, lr, loss = ENSEMBLES[setting]
    X, y = data(device)
    torch.manual_seed(0)
    return [make().to(device) for _ in range(n)], X, y, dict(steps=10, lr=lr, batch_size=batch_size, loss=loss,
                                                              progress=False)


def looped(models, X, y, kw):
    """The naive side of every ensemble pair: `train` each member in turn."""
    def loop():
        for i, m in enumerate(models):
            finished(train(copy.deepcopy(m), X, y, seed=i, **kw))
    return loop


def ensembles(n, device, setting):
    """N members of one `ENSEMBLES` setting: `train_ensemble` (vmap) against a loop of `train`."""
    models, X, y, kw = members(n, device, setting)

    def vectorised():
        finished(train_ensemble([copy.deepcopy(m) for m in models], X, y, **kw)[1])

    return vectorised, looped(models, X, y, kw)


def deep_linear_compact(n, device):
    """The book's trainer of deep linear ensembles, `pcb.train_linear`, against the loop of `ensembles` on the
    same nets. It stacks the members and steps through each compact weight W with the full-batch loss written with
    Σ_XX and Σ_YX, so it runs a cheaper algorithm as well as vectorising: its ratio is not vmap's."""
    models, X, y, kw = members(n, device, DEEP_LINEAR)
    weights = [torch.stack([m.linears[i].weight.detach() for m in models]) for i in range(len(models[0].linears))]

    def compact():  # its "mse" is half of train's, hence twice the learning rate for the same steps
        finished(train_linear([w.clone().requires_grad_() for w in weights], X, y, steps=kw["steps"], lr=2 * kw["lr"]))

    return compact, looped(models, X, y, kw)


def _fmnist(device):
    return load("fashion-mnist", n_per_class=200, device=device)


def _tshirt_shirt(device):  # PCB-5's data: T-shirt vs shirt, 500 each, 14x14
    X, y = load("fashion-mnist", classes=[0, 6], n_per_class=500, flatten=False, device=device)
    return F.avg_pool2d(X, 2), y


# setting -> (model factory, data(device), batch size (None: full batch), lr, loss)
DEEP_LINEAR = "deep linear 5x64, full batch"
ENSEMBLES = {
    DEEP_LINEAR: (lambda: MLP(784, 64, 5, 10, bias="none", activation="identity"), _fmnist, None, 1e-4, "mse"),
    "ReLU MLP 3x64, full batch": (lambda: MLP(784, 64, 3, 10, bias="none"), _fmnist, None, 0.01, "mse"),
    "ReLU MLP 10x64, batch 100": (lambda: MLP(784, 64, 10, 10, bias="none"), _fmnist, 100, 0.01, "mse"),
    "FC ResNet 10x128, batch 128": (lambda: FCResNet(784, 128, 10, 10), _fmnist, 128, 0.01, "ce"),
    "small CNN 8/16 channels, batch 100": (lambda: SmallVGG((1, 14, 14), (8, 16), 32, 2), _tshirt_shirt, 100, 0.1, "ce"),
    "MLP 9x128 + BatchNorm, batch 100": (lambda: MLP(784, 128, 9, 10, norm="bn"), _fmnist, 100, 0.1, "ce"),
}


def per_sample(device, layer=3, lr=0.1, n_per_class=10):
    """Per-sample weight changes ΔW|x = -lr g_x F_xᵀ of one layer of the 9x512 MLP for a batch of 100 (n_per_class
    of each class).

    Vectorised: one backward pass of the summed loss gives every g_x (`feature_grads`), the factored form the TFD
    notebooks use. The loop takes one backward pass per sample and reads each dense ΔW|x off `.grad`. Returns
    (fast, slow) for the factors, for the materialised (n, h, d) changes, and for their common direction (Eq. 5), in
    the order of PER_SAMPLE's names.
    """
    X, y = load("fashion-mnist", n_per_class=n_per_class, device=device)
    torch.manual_seed(0)
    model = MLP(784, 512, 9, 10).to(device)

    def factors():
        feats, logits = model.features(X)
        g = feature_grads(feats[layer:layer + 1], logits, y)[0]  # gradient w.r.t. F^(layer), post-ReLU
        return g * (feats[layer] > 0), feats[layer - 1].detach()  # pre-activation gradient g_x, layer input F_x

    def materialised():
        return weight_changes(*factors(), lr)

    def direction():
        g, f = factors()
        return common_direction((f.norm(dim=1, keepdim=True) * g)[:, :, None])

    def loop():
        out = []
        for i in range(len(X)):
            model.zero_grad()
            F.cross_entropy(model(X[i:i + 1]), y[i:i + 1], reduction="sum").backward()
            out.append(-lr * model.linears[layer - 1].weight.grad.clone())
        return torch.stack(out)

    torch.testing.assert_close(materialised(), loop(), rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(direction(), common_direction(loop()), rtol=1e-4, atol=1e-6)
    return [(factors, loop), (materialised, loop), (direction, lambda: common_direction(loop()))]


PER_SAMPLE = ["per-sample weight changes, factors g_x, F_x", "per-sample weight changes, (n, h, d) tensor",
              "their common direction (Eq. 5)"]
REPEATS, QUICK_REPEATS = 5, 3
NS, QUICK_NS = (10, 100), (10,)
QUICK_BATCHES = 60  # a tenth of an epoch of Fashion-MNIST at batch 100


def plan(device, quick=False):
    """The bench's rows in order, as (name, make, same_work): make() builds the pair's (fast, slow) functions, only
    when the row is timed; same_work is False where the two sides run different algorithms (no common work to rate).
    quick: one row of each kind, at its small size (N=10 members, QUICK_BATCHES batches of the data path)."""
    n_batches = QUICK_BATCHES if quick else None
    data = functools.cache(lambda: data_path(device, n_batches))
    samples = functools.cache(lambda: per_sample(device))
    rows = [(f"data path, {f'{n_batches} batches' if quick else 'one epoch of batches'}",
             lambda: (data()[0](False), data()[1](False)), True),
            (f"{f'{n_batches} training steps' if quick else 'one training epoch'}, 9x512 MLP",
             lambda: (data()[0](True), data()[1](True)), True)]
    for n in QUICK_NS if quick else NS:
        rows += [(f"ensemble N={n}, {setting}", functools.partial(ensembles, n, device, setting), True)
                 for setting in ENSEMBLES]
        rows.append((f"N={n}, {DEEP_LINEAR}, pcb.train_linear", functools.partial(deep_linear_compact, n, device), False))
    rows += [(name, lambda i=i: samples()[i], True) for i, name in enumerate(PER_SAMPLE)]
    return rows


def main(args):
    """Print the table, a row as soon as it is timed (a call cut short keeps the rows it finished)."""
    device, quick = args.device, args.quick
    r = args.repeats or (QUICK_REPEATS if quick else REPEATS)
    print(f"device: {device}, threads: {torch.get_num_threads()}, median of {r} alternating repeats; "
          f"matmul peak {matmul_peak(device):.0f} GMAC/s")
    print(f"{'pair':52} {'fast (s)':>10} {'naive (s)':>10} {'ratio':>7}   GMAC/s fast, naive", flush=True)
    for name, make, same_work in plan(device, quick):
        fast, slow, m_fast, m_slow = pair(*make(), r, device)
        work = min(m_fast, m_slow) if same_work else 0
        rate = lambda t: f"{work / t / 1e9:6.0f}" if work else "     -"
        print(f"{name:52} {fast:10.4f} {slow:10.4f} {slow / fast:6.1f}x   {rate(fast)} {rate(slow)}", flush=True)
    if args.book:
        book_times()


def book_times():
    """Execute every claim notebook with the default profile and print the runner's wall times."""
    from nbdemo.claims.registry import CLAIMS
    from nbdemo.runs import runner
    walls = {c.id: runner.run(c, log=lambda *_: None)[1]["wall_s"] for c in CLAIMS.values() if c.notebook.exists()}
    for claim, wall in walls.items():
        print(f"{claim:8} {wall:7.1f} s" + ("  OVER the 60 s budget" if wall > 60 else ""))
    print(f"{'book':8} {sum(walls.values()):7.1f} s for {len(walls)} notebooks")
