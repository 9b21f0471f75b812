"""The loaders, on small IDX files the tests write themselves."""
import gzip
import hashlib
import multiprocessing
import struct

import numpy as np
import pytest
import torch

from nbdemo.ml import data, datacheck


def write_idx(path, array):
    """An IDX file (the MNIST format) of uint8 values, gzipped as Debian ships them."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def tiny_fashion(tmp_path, monkeypatch):
    """A fake system copy of Fashion-MNIST: 30 train images (3 per class) and 10 test images of 28x28."""
    system = tmp_path / "system"
    system.mkdir()
    rng = np.random.default_rng(0)
    train_y = np.repeat(np.arange(10), 3)
    train_x = rng.integers(0, 256, (30, 28, 28))
    train_x[:, 0, 0] = train_y * 20  # a pixel that tells the class, to check the labels travel with the images
    write_idx(system / "train-images-idx3-ubyte.gz", train_x)
    write_idx(system / "train-labels-idx1-ubyte.gz", train_y)
    write_idx(system / "t10k-images-idx3-ubyte.gz", rng.integers(0, 256, (10, 28, 28)))
    write_idx(system / "t10k-labels-idx1-ubyte.gz", np.arange(10))
    monkeypatch.setenv("NBDEMO_FASHION_MNIST_DIR", str(system))
    monkeypatch.setenv("NBDEMO_DATA", str(tmp_path / "cache"))
    monkeypatch.setattr(datacheck, "FASHION_MNIST", checksums(system))  # the loader checks the files it reads
    return train_x, train_y


def checksums(system):
    """The table of `datacheck.FASHION_MNIST` for the files of a fake system copy: (bytes, SHA-256) of each."""
    table = {}
    for gz in sorted(system.glob("*.gz")):
        raw = gzip.open(gz).read()
        table[gz.stem] = (len(raw), hashlib.sha256(raw).hexdigest())
    return table


def test_fashion_mnist_from_the_system_copy(tiny_fashion, tmp_path):
    train_x, train_y = tiny_fashion
    X, y = data.load("fashion-mnist")
    assert X.shape == (30, 784) and X.dtype == torch.float32 and y.dtype == torch.int64
    assert (tmp_path / "cache" / "FashionMNIST" / "raw" / "train-images-idx3-ubyte").exists()
    # standardised with the training split's mean and std
    raw = torch.tensor(train_x, dtype=torch.float32)
    expected = (raw - raw.mean()) / raw.std()
    assert torch.allclose(X[y == 0][0].reshape(28, 28), expected[train_y == 0][0], atol=1e-5)
    assert abs(X.mean().item()) < 1e-5 and abs(X.std().item() - 1) < 1e-4
    images, _ = data.load("fashion-mnist", flatten=False)
    assert images.shape == (30, 1, 28, 28)


def _decompress_together(barrier, root, table):
    datacheck.FASHION_MNIST = table  # a spawned process does not inherit the test's monkeypatch
    barrier.wait()
    datacheck.ensure_fashion_mnist(root)


def test_processes_decompressing_at_once_each_leave_whole_files(tiny_fashion, tmp_path):
    """Two sweep workers load Fashion-MNIST at the same time: neither may trip on the other's temporary file.
    (A file of 6,000 images takes long enough to decompress that the writes overlap.)"""
    write_idx(tmp_path / "system" / "train-images-idx3-ubyte.gz", np.random.default_rng(1).integers(0, 256, (6000, 28, 28)))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager, ctx.Pool(2) as pool:
        barrier = manager.Barrier(2)
        pool.starmap(_decompress_together, [(barrier, tmp_path / "cache", checksums(tmp_path / "system"))] * 2,
                     chunksize=1)
    raw = tmp_path / "cache" / "FashionMNIST" / "raw"
    assert sorted(p.name for p in raw.iterdir()) == sorted(datacheck.FASHION_MNIST)
    assert (raw / "train-images-idx3-ubyte").read_bytes() == gzip.open(
        tmp_path / "system" / "train-images-idx3-ubyte.gz").read()


def test_classes_are_relabelled_in_order_and_balanced(tiny_fashion):
    train_x, _ = tiny_fashion
    X, y = data.load("fashion-mnist", classes=[7, 2], n_per_class=2, seed=3)
    assert y.tolist() == [0, 0, 1, 1]
    raw_pixel = X[:, 0] * torch.tensor(train_x, dtype=torch.float32).std() + torch.tensor(train_x).float().mean()
    assert torch.allclose(raw_pixel, torch.tensor([140.0, 140, 40, 40]), atol=1e-3)


def test_test_split_uses_training_statistics(tiny_fashion):
    train_x, _ = tiny_fashion
    X, y = data.load("fashion-mnist", split="test")
    assert X.shape == (10, 784) and sorted(y.tolist()) == list(range(10))
    assert abs(X.mean().item()) > 1e-3  # not re-standardised on itself


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "imagenet"}, "unknown"),
    ({"name": "fashion-mnist", "classes": [3, 10]}, "classes 0..9"),
    ({"name": "fashion-mnist", "n_per_class": 4}, "has only 3"),
    ({"name": "fashion-mnist", "split": "val"}, "split"),
])
def test_bad_requests_are_refused_with_the_reason(tiny_fashion, kwargs, message):
    with pytest.raises(ValueError, match=message):
        data.load(**kwargs)


def test_missing_dataset_says_how_to_get_it(tmp_path, monkeypatch):
    import torchvision.datasets as tvd
    monkeypatch.setattr(tvd.MNIST, "mirrors", ["http://127.0.0.1:9/"])  # nothing listens there: offline
    with pytest.raises(data.DataUnavailable, match="mnist.*To get it"):
        data.load("mnist", root=tmp_path)


def test_dry_run_gives_random_data_of_the_dataset_shape(monkeypatch):
    monkeypatch.setenv("NBDEMO_DRY_RUN", "1")
    X, y = data.load("cifar10", classes=[3, 5], n_per_class=1000, flatten=False)
    assert X.shape == (64, 3, 32, 32) and set(y.tolist()) == {0, 1}


def test_mnist1d_is_procedural():
    X, y = data.load("mnist1d", n_per_class=10)
    assert X.shape == (100, 40) and y.bincount().tolist() == [10] * 10
