"""Datasets as tensors on the device, loaded once.

`load(name)` returns `(X, y)`: X float32, standardised per channel with the training split's
statistics, y int64 relabelled 0..k-1 in the order of `classes`. Files are cached under
`root`, else `$NBDEMO_DATA`, else `~/.cache/nbdemo`.

Fashion-MNIST comes from Debian's `dataset-fashion-mnist` package when it is installed
(decompressed into the cache, read through torchvision), else from torchvision's download; its raw files are
checked before they are read (`nbdemo.ml.datacheck`), so a notebook run in Jupyter or by plain papermill refuses a
damaged copy as `nbdemo run` does.
MNIST, CIFAR-10/100 and STL-10 are torchvision downloads. MNIST-1D is procedural and offline.
"""
import functools
import os

import numpy as np
import torch

from nbdemo.ml.catalog import DATASETS
from nbdemo.ml.datacheck import DataUnavailable, data_root, ensure_fashion_mnist

SMALL_MAMMALS = [36, 50, 65, 74, 80]  # CIFAR-100 fine labels of coarse class 16 (hamster, mouse, rabbit, shrew, squirrel)
CATS_AND_DOGS = [3, 5]  # CIFAR-10


def dry_run():
    """True when the runner checks a profile "in shape": data is random, training takes two steps."""
    return os.environ.get("NBDEMO_DRY_RUN") == "1"


def load(name, *, split="train", classes=None, n_per_class=None, flatten=True, device="cpu", root=None, seed=0):
    """Load a dataset split as `(X, y)` tensors on `device`.

    classes: labels to keep, relabelled 0..len(classes)-1 in this order (default: all).
    n_per_class: balanced subset, the first n of each class after a permutation seeded by `seed`.
    flatten: (N, D) rows for MLPs; else (N, C, H, W) images ((N, 1, 40) for MNIST-1D).
    """
    if name not in DATASETS:
        raise ValueError(f"dataset={name!r} is unknown; choose one of {sorted(DATASETS)}")
    if split not in ("train", "test"):
        raise ValueError(f"split={split!r}: choose 'train' or 'test'")
    shape, k = DATASETS[name]
    classes = list(range(k)) if classes is None else list(classes)
    if not classes or len(set(classes)) != len(classes) or not all(0 <= c < k for c in classes):
        raise ValueError(f"classes={classes}: {name} has classes 0..{k - 1}; give distinct labels from that range")
    if dry_run():  # 32 samples per class; fewer for many classes (at most 320 in all, CIFAR-100: 3 per class) and
        # for large inputs (STL-10: 4 of 27,648 values), so that a dry run of the paper's conv nets takes seconds
        # while every tensor keeps the paper's sample shape
        n = len(classes) * min(n_per_class or 32, 32, max(3, 320 // len(classes)),
                               max(4, 2 ** 17 // int(np.prod(shape))))
        X, y = torch.randn(n, *shape), torch.arange(n) % len(classes)
    else:
        X, y = _standardised(name, split, str(data_root(root)))
        X, y = _subset(X, y, classes, n_per_class, seed, name)
    if flatten:
        X = X.reshape(len(X), -1)
    return X.to(device), y.to(device)


def _subset(X, y, classes, n_per_class, seed, name):
    g = torch.Generator().manual_seed(seed)
    perm = torch.randperm(len(y), generator=g)
    keep, labels = [], []
    for new, c in enumerate(classes):
        idx = perm[y[perm] == c]
        if n_per_class is not None:
            if len(idx) < n_per_class:
                raise ValueError(f"n_per_class={n_per_class}: {name} class {c} has only {len(idx)} samples in this split")
            idx = idx[:n_per_class]
        keep.append(idx)
        labels.append(torch.full((len(idx),), new))
    keep = torch.cat(keep)
    return X[keep], torch.cat(labels)


@functools.lru_cache(maxsize=4)
def _standardised(name, split, root):
    """Raw uint8/float data -> float32, standardised per channel with training-split statistics (cached:
    callers get copies through `_subset`'s indexing)."""
    X, y = _raw(name, split, root)
    Xtr = X if split == "train" else _raw(name, "train", root)[0]
    dims = [0] + list(range(2, Xtr.dim()))
    mean = Xtr.float().mean(dims, keepdim=True)
    std = Xtr.float().std(dims, keepdim=True)
    return ((X.float() - mean) / std).contiguous(), y


def _raw(name, split, root):
    root = data_root(root)
    train = split == "train"
    if name == "mnist1d":
        return _mnist1d(train)
    import torchvision.datasets as tvd
    if name == "fashion-mnist":
        ensure_fashion_mnist(root)  # the raw files checked (size, SHA-256) before they are read
    cls = {"fashion-mnist": tvd.FashionMNIST, "mnist": tvd.MNIST, "cifar10": tvd.CIFAR10,
           "cifar100": tvd.CIFAR100, "stl10": tvd.STL10}[name]
    kwargs = {"split": split} if name == "stl10" else {"train": train}
    try:
        ds = cls(str(root), download=False, **kwargs)
    except RuntimeError:
        try:
            ds = cls(str(root), download=True, **kwargs)
        except Exception as e:  # offline, or the mirror is down
            raise DataUnavailable(_missing_message(name, root, e)) from None
    data = torch.as_tensor(np.asarray(ds.data))
    targets = torch.as_tensor(np.asarray(ds.labels if name == "stl10" else ds.targets), dtype=torch.int64)
    if data.dim() == 3:  # (N, H, W) grey images
        data = data.unsqueeze(1)
    elif data.shape[-1] == 3:  # CIFAR: (N, H, W, C)
        data = data.permute(0, 3, 1, 2)
    return data, targets


def _mnist1d(train):
    from mnist1d.data import get_dataset_args, make_dataset
    d = make_dataset(get_dataset_args())  # procedural and seeded by its own default arguments
    x, y = (d["x"], d["y"]) if train else (d["x_test"], d["y_test"])
    return torch.as_tensor(x, dtype=torch.float32).unsqueeze(1), torch.as_tensor(y, dtype=torch.int64)


def _missing_message(name, root, error):
    how = {
        "fashion-mnist": "install Debian's copy (`sudo apt-get install dataset-fashion-mnist`, which `make` does "
                         "when run as root), or let torchvision download it on a machine with internet",
    }.get(name, "let torchvision download it on a machine with internet (run once with network access)")
    return (f"dataset {name!r} is not in {root} and could not be downloaded ({type(error).__name__}: {' '.join(str(error).split())}). "
            f"To get it: {how}; or copy torchvision's files for it into {root} "
            f"(set $NBDEMO_DATA to use another folder).")
