import pytest
import torch

from nbdemo.claims.verdict import Verdict
from nbdemo.papers.mli.experiment import check_trend


def lengths(*groups):
    return {f"s{i}": {"error_len": torch.tensor(g, dtype=torch.float64)} for i, g in enumerate(groups)}


def test_check_trend_asks_for_a_longer_plateau_along_the_sweep():
    def ok(*groups):
        v = Verdict("MLI-4")
        summary = lengths(*groups)
        check_trend(v, summary, list(summary), "error", where="Fig. 6")
        check, note = v.rows
        assert note["kind"] == "note" and note["value"] == pytest.approx(sum(groups[-1]) / 3 - sum(groups[0]) / 3, abs=1e-5)
        return v.outcome == "REPRODUCED"

    assert ok([0.0, 0.01, 0.02], [0.1, 0.11, 0.12], [0.2, 0.21, 0.22], [0.3, 0.31, 0.32])
    # two settings without a plateau, then a long one: a trend, though one step is below any grid's resolution
    assert ok([0.0, 0.02, 0.0], [0.0, 0.0, 0.02], [0.04, 0.06, 0.02], [0.3, 0.26, 0.34])
    assert not ok([0.1] * 3, [0.1] * 3, [0.1] * 3, [0.1] * 3)  # a flat sweep
    assert not ok([0.3, 0.31, 0.32], [0.2, 0.21, 0.22], [0.1, 0.11, 0.12], [0.0, 0.01, 0.02])  # the other way
    assert not ok([0.0, 0.3, 0.1], [0.2, 0.0, 0.3], [0.1, 0.2, 0.0], [0.3, 0.1, 0.2])  # no order


def test_mli_notebooks_have_no_control_characters():
    # e.g. "\alpha" in a non-raw string becomes BEL + "lpha", which the book shows as "lpha"
    import pathlib
    import re

    import nbformat

    for path in sorted(pathlib.Path(__file__).parents[3].glob("notebooks/MLI-*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, 4).cells):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", cell.source), f"{path.name}, cell {i}"
