import pytest
import torch

from nbdemo.mli import check_grows
from nbdemo.verdict import Verdict


def lengths(*means):
    return {f"s{i}": {"error_len": torch.tensor([m, m])} for i, m in enumerate(means)}


def test_check_grows_needs_every_step_longer_than_the_resolution():
    def ok(*means):
        v = Verdict("MLI-4")
        summary = lengths(*means)
        check_grows(v, summary, list(summary), "error", resolution=0.02, where="Fig. 6")
        row, = v.rows
        assert row["value"] == pytest.approx([b - a for a, b in zip(means, means[1:])])  # the differences decide
        return v.outcome == "REPRODUCED"

    assert ok(0.0, 0.1, 0.2, 0.3)
    assert not ok(0.1, 0.1, 0.1, 0.1)  # a flat sweep
    assert not ok(0.0, 0.01, 0.2, 0.3)  # one step within the grid's resolution
    assert not ok(0.0, 0.3, 0.2, 0.4)  # not monotone


def test_mli_notebooks_have_no_control_characters():
    # e.g. "\alpha" in a non-raw string becomes BEL + "lpha", which the book shows as "lpha"
    import pathlib
    import re

    import nbformat

    for path in sorted(pathlib.Path(__file__).parents[1].glob("notebooks/MLI-*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, 4).cells):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", cell.source), f"{path.name}, cell {i}"
