import math

from nbdemo.ml.train import History
from nbdemo.papers.tfd.metrics import first_phase
from nbdemo.papers.tfd.phase_window import scored_snapshots


def _hist(losses, every=50):
    h = History()
    for i, loss in enumerate(losses):
        h.add(i * every, {"loss": loss})
    return h


def test_first_phase_snapshots():
    k = 10
    hist = _hist([math.log(k)] * 8 + [1.5, 1.0, 0.6, 0.4])
    last = first_phase(hist.steps, hist["loss"], k).last
    snaps = tuple(range(0, 600, 50))
    assert scored_snapshots(snaps, hist, k) == tuple(t for t in snaps if t <= last)
    assert 0 < len(scored_snapshots(snaps, hist, k)) < len(snaps)


def test_window_overrides_the_phase():
    k = 10
    hist = _hist([math.log(k)] * 12)
    assert scored_snapshots(tuple(range(0, 1000, 100)), hist, k, window_steps=500) == (0, 100, 200, 300, 400, 500)
