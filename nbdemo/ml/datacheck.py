"""Raw dataset files checked before a run reads them: each file's size and SHA-256 against the values below, for
the system copy and the cache alike. The cache is filled atomically from a copy that passed, and a cached file that
fails is removed, never kept.

The loaders in `data.py` call `ensure_fashion_mnist` before they read the files, so every way of running a notebook
(`nbdemo run`, a sweep, nbval, Jupyter, plain papermill) refuses a damaged copy with the same one line that names the
file and says how to get a good one. `nbdemo run` and `sweep` also call `ensure` before a kernel starts, and nbval
before its notebooks run (`notebooks/conftest.py`), so that the refusal comes before any work. In a notebook the
error shows as that one line, without a traceback (`BadData._render_traceback_`, which IPython calls).
"""
import gzip
import hashlib
import os
import shutil
import zlib
from pathlib import Path


class DataUnavailable(RuntimeError):
    """A dataset is not on this machine and cannot be fetched."""


def data_root(root=None):
    return Path(root or os.environ.get("NBDEMO_DATA") or Path.home() / ".cache" / "nbdemo")


def system_fashion_mnist():
    return Path(os.environ.get("NBDEMO_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))


# Fashion-MNIST's four files as IDX (decompressed): (bytes, SHA-256). Their headers give 60,000 and 10,000 images
# of 28x28 (16-byte header) and as many labels (8-byte header), the sizes of Zalando's release; the hashes are those
# of Debian's dataset-fashion-mnist (2020), the copy every stored result of this book was computed from.
FASHION_MNIST = {
    "train-images-idx3-ubyte": (47040016, "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
    "train-labels-idx1-ubyte": (60008, "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
    "t10k-images-idx3-ubyte": (7840016, "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
    "t10k-labels-idx1-ubyte": (10008, "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
}
GOOD_COPY = ("install Debian's copy (`sudo apt-get install --reinstall dataset-fashion-mnist`), or unset "
             "$NBDEMO_FASHION_MNIST_DIR to use it")


class BadData(DataUnavailable):
    """A raw dataset file is not the file it should be (truncated, corrupted, another dataset)."""

    def _render_traceback_(self):  # IPython (and so papermill and nbval) shows this instead of the traceback
        return [f"nbdemo: {self}"]


def problem(path, size, sha256):
    """What is wrong with a file against its size and SHA-256, or None when it is the right file."""
    actual = path.stat().st_size
    if actual != size:
        return f"{actual:,} bytes, not {size:,}"
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return None if h.hexdigest() == sha256 else f"SHA-256 {h.hexdigest()[:12]}…, not {sha256[:12]}…"


def ensure_fashion_mnist(root=None):
    """Leave in `root/FashionMNIST/raw` only files that pass, decompressed from the system copy where the cache
    lacks them. A file that is in neither place is left to `data.py` (torchvision's download checks its own MD5)."""
    raw, src = data_root(root) / "FashionMNIST" / "raw", system_fashion_mnist()
    for name, (size, sha256) in FASHION_MNIST.items():
        cached, gz = raw / name, src / f"{name}.gz"
        if cached.exists():
            if not (wrong := problem(cached, size, sha256)):
                continue
            cached.unlink()  # never keep a damaged file: the next run would read it
            if not gz.exists():
                raise BadData(f"{cached} was damaged ({wrong}) and has been removed; {GOOD_COPY}, or let "
                              f"torchvision download it again on a machine with internet")
        if not gz.exists():
            continue
        raw.mkdir(parents=True, exist_ok=True)
        tmp = raw / f".{name}.{os.getpid()}.partial"  # one per process: sweep workers may check at once
        try:
            try:
                with gzip.open(gz) as fin, open(tmp, "wb") as fout:
                    shutil.copyfileobj(fin, fout)
            except (EOFError, OSError, zlib.error) as e:
                raise BadData(f"{gz} is not a whole gzip file ({type(e).__name__}: {e}); {GOOD_COPY}") from None
            if wrong := problem(tmp, size, sha256):
                raise BadData(f"{gz} holds the wrong data ({wrong} decompressed); {GOOD_COPY}")
            tmp.replace(cached)
        finally:
            tmp.unlink(missing_ok=True)


def ensure(parameters, root=None):
    """Check the raw files of every dataset a run's parameters name (Fashion-MNIST: the only one read from files
    that this machine may hold; MNIST-1D is generated, the others are torchvision downloads with their own MD5)."""
    if "fashion-mnist" in parameters.values():
        ensure_fashion_mnist(root)
