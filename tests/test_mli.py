import torch

from nbdemo.claims import Verdict
from nbdemo.mli import check_grows


def lengths(*means):
    return {f"s{i}": {"error_len": torch.tensor([m, m])} for i, m in enumerate(means)}


def test_check_grows_needs_every_step_longer_than_the_resolution():
    def ok(*means):
        v = Verdict("MLI-4")
        summary = lengths(*means)
        check_grows(v, summary, list(summary), "error", resolution=0.02)
        return v.outcome == "REPRODUCED"

    assert ok(0.0, 0.1, 0.2, 0.3)
    assert not ok(0.1, 0.1, 0.1, 0.1)  # a flat sweep
    assert not ok(0.0, 0.01, 0.2, 0.3)  # one step within the grid's resolution
    assert not ok(0.0, 0.3, 0.2, 0.4)  # not monotone
