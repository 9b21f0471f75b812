import re

import pytest
import torch

from nbdemo import bench, cli
from nbdemo.ml.train import History


def test_every_bench_pair_runs(monkeypatch):
    """Each pair on fewer samples of its data: 80 a class, still more samples than inputs, as at the bench's sizes."""
    cpu, load = torch.device("cpu"), bench.load
    monkeypatch.setattr(bench, "load", lambda *a, n_per_class, **k: load(*a, n_per_class=min(n_per_class, 80), **k))
    pairs = [bench.ensembles(2, cpu, s) for s in bench.ENSEMBLES] + [bench.deep_linear_compact(2, cpu)]
    for fast, slow in pairs:
        fast(), slow()
    for fast, slow in bench.per_sample(cpu, n_per_class=1):  # asserts that both sides give the same changes
        fast(), slow()


def test_a_diverged_bench_run_is_an_error():
    with pytest.raises(RuntimeError, match="diverged at step 3"):
        bench.finished(History(diverged_at=3))


def test_an_unusable_device_is_refused_before_anything_is_timed(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "--device", "gpu"])
    assert "argument --device: 'gpu' is not auto, cpu, cuda, cuda:N or mps" in capsys.readouterr().err


def kind(name):
    """A bench row's kind: its name without its size."""
    return re.sub(r"N=\d+|\d+ batches|one epoch of batches|\d+ training steps|one training epoch", "", name)


def test_the_quick_bench_keeps_one_row_of_each_kind_at_its_small_size(monkeypatch):
    """Nothing is built or timed by planning; the quick plan has every kind of the full one, once, at N=10 and a
    tenth of an epoch."""
    cpu = torch.device("cpu")
    full, quick = bench.plan(cpu), bench.plan(cpu, quick=True)
    assert len(quick) < len(full)
    assert sorted(kind(name) for name, _, _ in quick) == sorted({kind(name) for name, _, _ in full})
    assert not [name for name, _, _ in quick if "N=100" in name or "epoch" in name]
    made = []
    monkeypatch.setattr(bench, "data_path", lambda device, n_batches: made.append(n_batches) or (
        lambda train_too: None, lambda train_too: None))
    monkeypatch.setattr(bench, "ensembles", lambda n, device, setting: made.append(n) or (None, None))
    monkeypatch.setattr(bench, "deep_linear_compact", lambda n, device: made.append(n) or (None, None))
    monkeypatch.setattr(bench, "per_sample", lambda device: made.append("per sample") or [(None, None)] * 3)
    for _, make, _ in bench.plan(cpu, quick=True):
        make()
    assert made == [bench.QUICK_BATCHES] + [10] * (len(bench.ENSEMBLES) + 1) + ["per sample"]  # each built once


def test_bench_quick_times_the_quick_plan_with_fewer_repeats(monkeypatch, capsys):
    timed = []
    monkeypatch.setattr(bench, "plan", lambda device, quick: [
        (f"row {quick}", lambda: ("fast", "slow"), True), ("two algorithms", lambda: ("fast", "slow"), False)])
    monkeypatch.setattr(bench, "pair", lambda fast, slow, repeats, device: timed.append(repeats) or (1.0, 2.0, 4e9, 8e9))
    monkeypatch.setattr(bench, "matmul_peak", lambda device: 1.0)
    cli.main(["bench", "--quick", "--device", "cpu"])
    out = capsys.readouterr().out
    assert timed == [bench.QUICK_REPEATS] * 2 and "median of 3 alternating repeats" in out
    assert re.search(r"row True .* 2\.0x\s+4\s+2\n", out) and re.search(r"two algorithms .* 2\.0x\s+-\s+-\n", out)
    cli.main(["bench", "--device", "cpu", "--repeats", "2"])
    assert timed[2:] == [2, 2] and "row False" in capsys.readouterr().out


def test_the_data_path_of_the_quick_bench_stops_after_its_batches(monkeypatch):
    steps = []
    loss = bench.F.cross_entropy
    monkeypatch.setattr(bench.F, "cross_entropy", lambda *a, **k: steps.append(1) or loss(*a, **k))
    resident, dataloader = bench.data_path(torch.device("cpu"), n_batches=3)
    resident(True)(), dataloader(True)()
    assert len(steps) == 6
