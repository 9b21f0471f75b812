"""Raw dataset files are checked against their size and SHA-256 before a run reads them, on small IDX files the
tests write and whose checksums they put in the table."""
import gzip
import hashlib
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest

from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.ml import datacheck
from nbdemo.runs import runner

NAMES = list(datacheck.FASHION_MNIST)


@pytest.fixture
def copy(tmp_path, monkeypatch):
    """A system copy of four small IDX files (gzipped, as Debian ships them), an empty cache, and the table of
    their true sizes and hashes. Returns (system folder, cache folder, {name: true bytes})."""
    system, cache = tmp_path / "system", tmp_path / "cache"
    system.mkdir()
    rng, true, table = np.random.default_rng(0), {}, {}
    for name in NAMES:
        true[name] = b"\x00\x00\x08\x01\x00\x00\x00\x64" + rng.integers(0, 256, 100, dtype=np.uint8).tobytes()
        (system / f"{name}.gz").write_bytes(gzip.compress(true[name]))
        table[name] = (len(true[name]), hashlib.sha256(true[name]).hexdigest())
    monkeypatch.setattr(datacheck, "FASHION_MNIST", table)
    monkeypatch.setenv("NBDEMO_FASHION_MNIST_DIR", str(system))
    monkeypatch.setenv("NBDEMO_DATA", str(cache))
    return system, cache / "FashionMNIST" / "raw", true


def test_a_good_copy_fills_the_cache(copy):
    system, raw, true = copy
    datacheck.ensure({"dataset": "fashion-mnist"})
    assert {p.name: p.read_bytes() for p in raw.iterdir()} == true  # no temporary file left


def test_a_same_size_corrupted_copy_is_refused_naming_the_file(copy):
    system, raw, true = copy
    bad = bytearray(true[NAMES[0]])
    bad[50:] = bytes(len(bad) - 50)  # half of it zeroed: same size, other data
    (system / f"{NAMES[0]}.gz").write_bytes(gzip.compress(bytes(bad)))
    with pytest.raises(datacheck.BadData, match=rf"{NAMES[0]}\.gz holds the wrong data \(SHA-256"):
        datacheck.ensure({"dataset": "fashion-mnist"})
    assert not (raw / NAMES[0]).exists() and not list(raw.glob(".*partial"))


def test_a_valid_gzip_of_a_truncated_file_is_refused_and_not_kept(copy):
    system, raw, true = copy
    (system / f"{NAMES[0]}.gz").write_bytes(gzip.compress(true[NAMES[0]][:60]))
    with pytest.raises(datacheck.BadData, match=r"wrong data \(60 bytes, not 108"):
        datacheck.ensure({"dataset": "fashion-mnist"})
    assert not (raw / NAMES[0]).exists()


def test_a_truncated_gzip_is_refused_naming_the_file(copy):
    system, raw, _ = copy
    gz = system / f"{NAMES[1]}.gz"
    gz.write_bytes(gz.read_bytes()[:-12])
    with pytest.raises(datacheck.BadData, match=rf"{gz} is not a whole gzip file"):
        datacheck.ensure({"dataset": "fashion-mnist"})


def test_a_damaged_cache_file_is_replaced_from_the_system_copy_or_removed(copy):
    system, raw, true = copy
    datacheck.ensure({"dataset": "fashion-mnist"})
    (raw / NAMES[0]).write_bytes(b"\x00" * 20)
    datacheck.ensure({"dataset": "fashion-mnist"})
    assert (raw / NAMES[0]).read_bytes() == true[NAMES[0]]
    (raw / NAMES[0]).write_bytes(b"\x00" * 20)
    (system / f"{NAMES[0]}.gz").unlink()
    with pytest.raises(datacheck.BadData, match=r"was damaged \(20 bytes, not 108\) and has been removed"):
        datacheck.ensure({"dataset": "fashion-mnist"})
    assert not (raw / NAMES[0]).exists()


def test_runs_of_other_datasets_do_not_read_the_files(copy):
    system, raw, _ = copy
    (system / f"{NAMES[0]}.gz").write_bytes(b"not gzip")
    datacheck.ensure({"dataset": "mnist1d", "steps": 10})
    assert not raw.exists()


def test_run_refuses_a_damaged_copy_before_the_kernel_starts(copy, monkeypatch):
    system, _, _ = copy
    (system / f"{NAMES[0]}.gz").write_bytes(b"not gzip")
    monkeypatch.setattr(runner, "execute", lambda *a, **k: pytest.fail("the notebook ran"))
    with pytest.raises(datacheck.BadData, match="not a whole gzip file"):
        runner.run(CLAIMS["MLI-1"])


def test_the_cli_answers_a_damaged_copy_in_one_line_with_exit_2(tmp_path):
    """The issue's case: a same-size copy of the training images with half of them zeroed, pointed at with
    $NBDEMO_FASHION_MNIST_DIR (the real table, so this needs Debian's copy to make the damaged one from)."""
    good = Path("/usr/share/datasets/fashion-mnist")
    if not good.is_dir():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    bad = tmp_path / "fashion"
    bad.mkdir()
    for name in NAMES:
        (bad / f"{name}.gz").symlink_to(good / f"{name}.gz")
    images = bytearray(gzip.decompress((good / f"{NAMES[0]}.gz").read_bytes()))
    images[len(images) // 2:] = bytes(len(images) - len(images) // 2)
    (bad / f"{NAMES[0]}.gz").unlink()
    (bad / f"{NAMES[0]}.gz").write_bytes(gzip.compress(bytes(images), compresslevel=1))
    env = {"NBDEMO_FASHION_MNIST_DIR": str(bad), "NBDEMO_DATA": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-m", "nbdemo.cli", "run", "PCB-4"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert f"{bad / NAMES[0]}.gz holds the wrong data (SHA-256" in out.stderr


def test_nbval_refuses_a_damaged_copy_before_any_notebook_runs(copy):
    """nbval executes the notebooks without `nbdemo run`: notebooks/conftest.py checks the files first. (The
    pytest it starts checks against the real table, which the fixture's small files do not match.)"""
    system, cache, _ = copy
    out = subprocess.run([sys.executable, "-m", "pytest", "--nbval-lax", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "notebooks/MLI-7.ipynb"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == pytest.ExitCode.USAGE_ERROR, out.stdout + out.stderr
    assert f"{system / NAMES[0]}.gz holds the wrong data" in out.stderr and not (cache / NAMES[0]).exists()


def test_the_table_matches_debians_copy():
    good = Path("/usr/share/datasets/fashion-mnist")
    if not good.is_dir():
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    for name, (size, sha256) in datacheck.FASHION_MNIST.items():
        content = gzip.decompress((good / f"{name}.gz").read_bytes())
        assert (len(content), hashlib.sha256(content).hexdigest()) == (size, sha256), name


def test_plain_papermill_stops_at_the_loader_with_the_same_one_line_kernel(copy, short_tmpdir):
    """A notebook run without `nbdemo run` (plain papermill, Jupyter) reads through `data.load`, which checks the
    files too: the cell stops with the refusal's one line, as the notebook's error, without a traceback. (The
    kernel checks against the real table, which the fixture's small files do not match.)"""
    system, _, _ = copy
    import papermill
    from papermill.exceptions import PapermillExecutionError
    out = short_tmpdir / "TFD-5.ipynb"
    with pytest.raises(PapermillExecutionError) as e:
        papermill.execute_notebook(str(CLAIMS["TFD-5"].notebook), str(out), cwd=str(ROOT / "notebooks"),
                                   progress_bar=False, kernel_name="python3")
    assert e.value.ename == "BadData" and f"{system / NAMES[0]}.gz holds the wrong data" in e.value.evalue
    shown = [o for c in nbformat.read(out, as_version=4).cells for o in c.get("outputs", [])
             if o.get("output_type") == "error"]
    assert len(shown) == 1 and shown[0]["traceback"] == [f"nbdemo: {e.value.evalue}"]
