import math

import pytest
import torch

from nbdemo.claims.verdict import Verdict
from nbdemo.ml.ensemble import train_ensemble
from nbdemo.ml.models import MLP
from nbdemo.papers.mli.experiment import INNER, check_trend, inner, plateaus, train_and_interpolate, train_mlps
from nbdemo.papers.mli.metrics import majority_chance

K = 10
ALPHAS = torch.linspace(0, 1, 50, dtype=torch.float64)


def curve(length):
    """A net whose error stays at 1 - 1/k and loss at log k up to alpha = length, then both drop to 0."""
    high = ALPHAS <= length + 1e-9
    return {"alpha": ALPHAS, "error": torch.where(high, 1 - 1 / K, 0.0).double(),
            "loss": torch.where(high, math.log(K), 0.0).double(), "delta_max": 0.0}


def runs_of(*groups):
    return {f"s{i}": [curve(x) for x in g] for i, g in enumerate(groups)}


def test_check_trend_asks_for_a_longer_plateau_along_the_sweep():
    def ok(*groups):
        v = Verdict("MLI-4")
        check_trend(v, runs_of(*groups), K, "error", where="Fig. 6")
        check, note = v.rows
        mean = lambda g: float(plateaus([curve(x) for x in g], K)["error_len"].mean())
        assert note["kind"] == "note" and note["value"] == pytest.approx(mean(groups[-1]) - mean(groups[0]), abs=1e-5)
        assert set(check["inner"]) == {INNER["tol"][0], INNER["hold"][0]}  # the error plateau's thresholds
        return v.outcome == "REPRODUCED"

    assert ok([0.0, 0.02, 0.04], [0.1, 0.12, 0.14], [0.2, 0.22, 0.24], [0.3, 0.32, 0.34])
    # two settings without a plateau, then a long one: a trend, though one step is below any grid's resolution
    assert ok([0.0, 0.02, 0.0], [0.0, 0.0, 0.02], [0.04, 0.06, 0.02], [0.3, 0.26, 0.34])
    assert not ok([0.1] * 3, [0.1] * 3, [0.1] * 3, [0.1] * 3)  # a flat sweep
    assert not ok([0.3, 0.32, 0.34], [0.2, 0.22, 0.24], [0.1, 0.12, 0.14], [0.0, 0.02, 0.04])  # the other way
    assert not ok([0.0, 0.3, 0.1], [0.2, 0.0, 0.3], [0.1, 0.2, 0.0], [0.3, 0.1, 0.2])  # no order


def test_inner_varies_each_threshold_of_the_plateau():
    # a dip of 3 points below 1 - 1/k - 0.01 (at 0.885) after a first stretch: with hold 3 it ends the plateau there,
    # with hold 4 it does not; a tolerance 10% larger (0.011) keeps 0.885 on the plateau too
    c = curve(0.6)
    c["error"][10:13] = 1 - 1 / K - 0.015
    length = lambda s: float(s["a"]["error_len"][0])
    out = inner({"a": [c]}, K, length, "error")
    assert set(out) == {INNER["tol"][0], INNER["hold"][0]}
    assert out[INNER["hold"][0]][0] == pytest.approx(float(ALPHAS[9]))  # hold 2: ends before the dip
    assert out[INNER["hold"][0]][1] == pytest.approx(float(ALPHAS[29]))  # hold 4: the dip is bridged
    assert out[INNER["tol"][0]] == (pytest.approx(float(ALPHAS[9])), pytest.approx(float(ALPHAS[9])))
    assert set(inner({"a": [c]}, K, length, "loss")) == {INNER[key][0] for key in ("eps_frac", "widen", "hold")}


def test_train_mlps_is_train_ensemble_for_relu_mlps():
    torch.manual_seed(0)
    X, y = torch.randn(60, 8), torch.randint(0, 3, (60,))
    for bias in ("all", "last", "none"):
        make = lambda: MLP(8, 6, 3, 3, bias=bias, init="kaiming", out_scale=0.5)
        torch.manual_seed(1)
        a = [make() for _ in range(3)]
        b = [MLP(8, 6, 3, 3, bias=bias) for _ in range(3)]
        for m, n in zip(a, b):
            n.load_state_dict(m.state_dict())
        kw = dict(steps=25, lr=0.1, momentum=0.9, batch_size=20, seed=4)
        fast, h_fast = train_mlps(a, X, y, **kw)
        ref, h_ref = train_ensemble(b, X, y, progress=False, **kw)
        assert set(fast) == set(ref)
        for name in ref:
            assert fast[name].shape == ref[name].shape
            assert torch.allclose(fast[name], ref[name], atol=1e-5), (bias, name)
        assert h_fast.loss == pytest.approx(h_ref.loss, abs=1e-5)
        full, _ = train_mlps(a, X, y, steps=3, lr=0.1, batch_size=None)  # full batch: the same data for every member
        assert torch.allclose(full["linears.0.weight"][0], train_mlps(a[:1], X, y, steps=3, lr=0.1,
                                                                     batch_size=None)[0]["linears.0.weight"][0])


def test_a_diverged_sweep_still_gives_a_verdict():
    # issue 43: a learning rate that blows up gives INCONCLUSIVE "diverged at step N", not a traceback
    torch.manual_seed(0)
    X, y = torch.randn(40, 6), torch.randint(0, K, (40,))
    make = lambda: MLP(6, 5, 4, K, init="kaiming")
    runs, hists = {}, {}
    for name in ("a", "b"):
        curves, hists[name] = train_and_interpolate(make, 2, X, y, X, y, ALPHAS, steps=30, lr=1e6, batch_size=20)
        runs[name] = curves["normal"]
    assert hists["a"].diverged_at is not None
    from nbdemo.papers.mli.experiment import trend_verdict
    v = trend_verdict("MLI-4", runs, hists, K, where="Fig. 6")
    assert v.outcome == "INCONCLUSIVE"
    assert any(r["measured"].startswith("diverged at step") for r in v.rows)


def test_majority_chance():
    assert majority_chance(0.5, 3) == pytest.approx(0.5)
    assert majority_chance(1 / 3, 3) == pytest.approx(7 / 27)
    assert majority_chance(1 / 6, 3) == pytest.approx(16 / 216)
    assert majority_chance(1.0, 5) == 1.0 and majority_chance(0.0, 5) == 0.0


def test_mli_notebooks_have_no_control_characters():
    # e.g. "\alpha" in a non-raw string becomes BEL + "lpha", which the book shows as "lpha"
    import pathlib
    import re

    import nbformat

    for path in sorted(pathlib.Path(__file__).parents[3].glob("notebooks/MLI-*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, 4).cells):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f]", cell.source), f"{path.name}, cell {i}"


def test_mli_notebooks_cite_no_line_numbers():
    # a reader sees sections, figures and theorems, never a line of the project's text copy of the paper
    import pathlib
    import re

    import nbformat

    for path in sorted(pathlib.Path(__file__).parents[3].glob("notebooks/MLI-*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, 4).cells):
            texts = [cell.source] + [o.get("text", "") for o in cell.get("outputs", [])]
            assert not any(re.search(r"\bl\.\s?\d", t) for t in texts), f"{path.name}, cell {i}"
