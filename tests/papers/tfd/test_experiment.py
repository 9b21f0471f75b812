"""The steps the TFD notebooks share (nbdemo.papers.tfd.experiment): the first-phase rows decide exactly what
first_phase decides, the shuffled-label control's data, the inner variants, and every training path ending in a
verdict when the loss diverges."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from nbdemo.claims.verdict import INCONCLUSIVE, Verdict
from nbdemo.ml.ensemble import ensemble_forward, train_ensemble
from nbdemo.ml.models import MLP
from nbdemo.ml.train import train
from nbdemo.papers.tfd import experiment as tfd
from nbdemo.papers.tfd.metrics import first_phase, in_first_phase, interclass_cosine, trend

K = 10
STEPS = list(range(0, 1001, 20))


def curve(plateau_until, floor=0.5, start=math.log(K)):
    """A loss that sits at `start` up to `plateau_until`, then falls linearly to `floor` at the last step."""
    t = np.array(STEPS, dtype=float)
    fall = np.clip((t - plateau_until) / max(1, STEPS[-1] - plateau_until), 0, 1)
    return start + (floor - start) * fall


@pytest.mark.parametrize("loss", [curve(500), curve(40), curve(2000), curve(500, floor=0.91 * math.log(K)),
                                  curve(500, floor=0.89 * math.log(K)), curve(300, start=3.0)])
def test_drop_ratio_decides_what_first_phase_decides(loss):
    phase = first_phase(STEPS, loss, K)
    assert (tfd.drop_ratio(loss, K) < 1 - tfd.DROP) == phase.ended


def rows(loss, steps=STEPS[-1], kind="requirement", snapshots=None):
    v = Verdict("TFD-2")
    tfd.require_first_phase(v, STEPS[:len(loss)], loss, K, steps, kind=kind, snapshots=snapshots)
    return {r["name"]: r for r in v.rows}


def test_first_phase_rows_pass_for_a_long_plateau_and_a_drop():
    r = rows(curve(500))
    assert [x["kind"] for x in r.values()] == ["requirement", "requirement"]
    assert all(x["ok"] for x in r.values())
    assert r["the first phase lasts at least 5% of the budget"]["value"] == 500  # the last step before the fall


def test_a_short_first_phase_fails_only_the_length_row():
    r = rows(curve(20))
    assert r["the loss drops within the budget"]["ok"]
    assert not r["the first phase lasts at least 5% of the budget"]["ok"]  # last step < 1000 // 20


def test_no_drop_fails_both_rows_and_step_0_does_not_crash():
    for loss, steps in [(curve(2000), STEPS[-1]), (curve(2000)[:1], 0)]:
        r = rows(loss, steps, kind="check")
        assert [x["kind"] for x in r.values()] == ["check", "check"]
        assert not any(x["ok"] for x in r.values())
        assert r["the first phase lasts at least 5% of the budget"]["value"] == "nan"


def test_the_length_row_stores_its_variants_for_the_drop_of_ours():
    loss = curve(500, floor=0.5)
    r = rows(loss, snapshots=[0, 100, 200])["the first phase lasts at least 5% of the budget"]
    lower, higher = r["inner"][tfd.DROP_INNER]
    assert lower == first_phase(STEPS, loss, K, drop=0.9 * tfd.DROP).last
    assert higher == first_phase(STEPS, loss, K, drop=1.1 * tfd.DROP).last
    assert rows(loss, snapshots=[0, 100])["snapshots inside the first phase"]["ok"] is False


def test_inner_varies_each_threshold_of_ours_alone():
    seen = []
    out = tfd.inner(lambda drop, quarter: seen.append((drop, quarter)) or drop + quarter, quarter=True)
    assert seen == [(0.9 * tfd.DROP, tfd.QUARTER), (1.1 * tfd.DROP, tfd.QUARTER),
                    (tfd.DROP, 0.9 * tfd.QUARTER), (tfd.DROP, 1.1 * tfd.QUARTER)]
    assert list(out) == [tfd.DROP_INNER, tfd.QUARTER_INNER]


def test_order_statistic_holds_only_for_a_non_increasing_sweep_that_shortens():
    def holds(lengths):
        return all(a >= b for a, b in zip(tfd.order_statistic(lengths), tfd.order_threshold(lengths)))
    assert holds([560, 300, 100]) and holds([560, 560, 0])
    assert not holds([560, 560, 560]) and not holds([560, 600, 100]) and not holds([0, 300, 560])


def test_shuffled_labels_keep_the_data_and_give_a_balanced_subset_of_the_relabelled_training_set(monkeypatch):
    monkeypatch.setenv("NBDEMO_DRY_RUN", "1")  # random data of the dataset's shape (the global generator's)

    def data(**kw):
        torch.manual_seed(0)
        return tfd.data("fashion-mnist", 100, 3, "cpu", **kw)
    X0, y0, _, _, k = data()
    X, y, Xe, ye, _ = data(shuffle_labels=True)
    assert torch.equal(X, X0) and not torch.equal(y, y0)
    assert torch.equal(torch.bincount(y, minlength=k), torch.bincount(y0, minlength=k))  # the same labels, moved
    assert torch.bincount(ye, minlength=k).tolist() == [100 // k] * k
    rows = [int(torch.nonzero((X == x).all(1))[0]) for x in Xe]  # each evaluation sample is a training sample ...
    assert torch.equal(y[rows], ye)  # ... with the label it is trained on
    assert torch.equal(data(shuffle_labels=True)[1], y)  # seeded


# --- every training path of the TFD notebooks ends in a verdict when the loss diverges (issue 43) --------------

def tiny_data(n=200, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 12, generator=g), torch.arange(n) % 4


def diverging(path):
    """Train as the notebooks of `path` do, at lr 1e3: (History, the eval loss per record)."""
    X, y = tiny_data()
    kw = dict(steps=60, lr=1e3, batch_size=20, record_at=10, progress=False)
    if path == "train":  # TFD-1, 2, 5: records of the loss and the features
        def record(model, step):
            with torch.no_grad():
                feats, logits = model.features(X)
                return {"loss": F.cross_entropy(logits, y).item(), "similarity": interclass_cosine(feats[2], y)}
        hist = train(MLP(12, 16, 4, 4), X, y, record=record, **kw)
        return hist, hist["loss"]
    if path == "snapshots":  # TFD-3, 4
        hist, snapshots, phase, ts = tfd.train_with_snapshots(MLP(12, 16, 4, 4), X, y, X, y, 4, 20, 10, steps=60,
                                                              lr=1e3, batch_size=20, progress=False)
        assert ts == (0,) and ts == tfd.snapshots_in(snapshots, phase)
        return hist, hist["loss"]
    nets = [MLP(12, 16, 4, 4, gamma=g) for g in (0.1, 1.0)]  # TFD-6, 7: an ensemble
    loss = torch.func.vmap(F.cross_entropy, in_dims=(0, None))
    _, hist = train_ensemble(nets, X, y, same_batches=True, **kw,
                             record=lambda p, step: {"loss": loss(ensemble_forward(nets[0], p, X), y).numpy()})
    return hist, hist["loss"][:, 0]


@pytest.mark.parametrize("path", ["train", "snapshots", "ensemble"])
def test_a_diverged_training_is_inconclusive_with_its_step(path):
    hist, loss = diverging(path)
    assert hist.diverged_at is not None and hist.steps[0] == 0
    v = Verdict("TFD-1")
    v.require_finite(hist)
    tfd.require_first_phase(v, hist.steps, loss, 4, 60)
    phase = first_phase(hist.steps, loss, 4)
    first = in_first_phase(hist.steps, phase)
    v.check("a trend over the first phase", trend([hist.steps[i] for i in first], np.asarray(loss)[first])[0], ">=",
            0.5, source=tfd.DROP_SOURCE)
    assert v.outcome == INCONCLUSIVE
    assert v.rows[0]["measured"] == f"diverged at step {hist.diverged_at}"


def history(loss, diverged_at=None):
    """A History of the evaluation loss recorded at STEPS (cut where a run's records stop at its first NaN)."""
    from nbdemo.ml.train import History
    steps = STEPS[:len(loss)]
    return History(list(steps), None, {"loss": list(loss)}, diverged_at)


def test_a_run_that_diverges_before_its_drop_counts_as_the_whole_budget():
    stuck = history(curve(2000)[:20], diverged_at=390)      # records stop at step 380, never dropped
    assert tfd.phase_length(stuck, K, 1000) == 1000
    assert tfd.diverged_in_first_phase(stuck, K)
    dropped = history(curve(500), diverged_at=990)          # diverged long after its drop
    p = first_phase(STEPS, curve(500), K)
    assert tfd.phase_length(dropped, K, 1000) == p.last < 1000
    assert not tfd.diverged_in_first_phase(dropped, K)
    assert not tfd.diverged_in_first_phase(history(curve(500)), K)


def test_the_drop_row_declares_the_drop_variants_under_the_inner_names():
    v = Verdict("TFD-2")
    tfd.require_first_phase(v, STEPS, curve(500, floor=0.895 * math.log(K)), K, 1000)
    drop_row, length_row = v.rows[0], v.rows[1]
    lower, higher = (drop_row["alternatives"][f"{tfd.DROP_INNER}, {s}"] for s in ("10% lower", "10% higher"))
    assert drop_row["ok"] and lower["ok"] and not higher["ok"]  # a 10.5% drop: a 9% drop, not an 11% one
    assert set(length_row["inner"]) == {tfd.DROP_INNER}


def test_the_finiteness_row_says_why_it_has_no_alternative():
    v = Verdict("TFD-2")
    v.require_finite(history(curve(500), diverged_at=700))
    assert v.rows[0]["value"] == 700 and not v.rows[0]["ok"] and v.rows[0]["source"]["no_alternative"]
