import math

import pytest
import torch

from nbdemo.ml.models import MLP
from nbdemo.papers.mli.batched import sweep_experiment
from nbdemo.papers.mli.experiment import INNER, inner
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


def test_a_diverged_sweep_still_gives_a_verdict():
    # issue 43: a learning rate that blows up gives INCONCLUSIVE "diverged at step N", not a traceback
    torch.manual_seed(0)
    X, y = torch.randn(40, 6), torch.randint(0, K, (40,))
    make = lambda: MLP(6, 5, 4, K, init="kaiming")
    runs, hists = sweep_experiment({"a": make, "b": make}, X, y, ALPHAS, n_models=2, steps=30, lr=1e6, batch_size=20)
    assert hists["a"].diverged_at is not None
    from nbdemo.papers.mli.effect import sweep_verdict
    v = sweep_verdict("MLI-4", runs, hists, K, where="Fig. 6")
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


def test_the_loss_band_widens_with_the_output_bias_degree_of_the_path():
    # loss = log k + alpha * gap: inside Theorem 1's band on the linear path (the bias at degree 1), above the band of
    # a homogeneous path of depth 10 from alpha^10 * gap + eps on (alpha - alpha^10 > eps / gap: alpha >= 0.06 here)
    from nbdemo.papers.mli.experiment import plateaus
    alphas = torch.linspace(0, 1, 50, dtype=torch.float64)
    gap = 2.0
    c = dict(alpha=alphas, error=torch.zeros(50, dtype=torch.float64), loss=math.log(K) + alphas * gap, delta_max=gap)
    linear = plateaus([{**c, "bias_degree": 1}], K)["loss_len"]
    homogeneous = plateaus([{**c, "bias_degree": 10}], K)["loss_len"]
    eps = 0.05 * math.log(K)
    inside = alphas * gap <= alphas ** 10 * gap + eps
    assert linear.item() == pytest.approx(1.0)
    assert homogeneous.item() == pytest.approx(float(alphas[inside & (alphas < 0.5)].max()))
    assert plateaus([c], K)["loss_len"].item() == pytest.approx(1.0)  # no degree given: the linear path's


def test_a_diverged_net_has_no_plateau():
    from nbdemo.papers.mli.experiment import plateaus
    alphas = torch.linspace(0, 1, 50, dtype=torch.float64)
    good = dict(alpha=alphas, error=torch.full((50,), 1 - 1 / K, dtype=torch.float64),
                loss=torch.full((50,), math.log(K), dtype=torch.float64), delta_max=0.0)
    nan = {**good, "loss": torch.cat([good["loss"][:1], torch.full((49,), math.nan, dtype=torch.float64)])}
    p = plateaus([good, nan, {**good, "delta_max": math.nan}], K)
    assert p["error_len"][0] == pytest.approx(1.0) and p["loss_len"][0] == pytest.approx(1.0)
    assert all(math.isnan(x) for key in ("error_len", "loss_len") for x in p[key][1:].tolist())


def test_the_fit_requirement_declares_a_stricter_and_a_looser_fit():
    from nbdemo.claims.verdict import Verdict
    from nbdemo.papers.mli.experiment import require_trained
    alphas = torch.linspace(0, 1, 5, dtype=torch.float64)
    fit = lambda e: dict(alpha=alphas, error=torch.tensor([0.9, 0.9, 0.5, 0.1, e], dtype=torch.float64),
                         loss=torch.ones(5, dtype=torch.float64))
    v = Verdict("MLI-2")
    require_trained(v, {"a": [fit(0.0), fit(0.03)]}, {})
    row = v.rows[0]
    assert row["ok"] and row["value"] == pytest.approx(0.03)
    alts = row["alternatives"]
    assert not alts["fit: at most 1% training error"]["ok"] and alts["fit: at most 10% training error"]["ok"]
