import pytest
import torch

from nbdemo import bench, cli
from nbdemo.ml.train import History


def test_every_bench_pair_runs():
    cpu = torch.device("cpu")
    pairs = [bench.ensembles(2, cpu, s) for s in bench.ENSEMBLES] + [bench.deep_linear_compact(2, cpu)]
    for fast, slow in pairs:
        fast(), slow()
    for _, fast, slow in bench.per_sample(cpu):  # asserts that both sides give the same changes
        fast(), slow()


def test_a_diverged_bench_run_is_an_error():
    with pytest.raises(RuntimeError, match="diverged at step 3"):
        bench.finished(History(diverged_at=3))


def test_an_unusable_device_is_refused_before_anything_is_timed(capsys):
    with pytest.raises(SystemExit):
        cli.main(["bench", "--device", "gpu"])
    assert "argument --device: 'gpu' is not auto, cpu, cuda, cuda:N or mps" in capsys.readouterr().err
