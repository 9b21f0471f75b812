"""TFD's training with snapshots, scored over the run's first phase or, for a control with no first phase, a window."""
from nbdemo.papers.tfd.experiment import DROP, snapshots_in, train_with_snapshots
from nbdemo.papers.tfd.metrics import first_phase


def scored_snapshots(snapshots, hist, k, window_steps=0, drop=DROP):
    """The snapshot steps of the first phase (ending where the loss falls `drop` below its plateau), or with
    `window_steps` > 0 (a control, which has no first phase of its own) those at steps 0…window_steps."""
    if window_steps:
        return tuple(t for t in snapshots if t <= window_steps)
    return snapshots_in(snapshots, first_phase(hist.steps, hist["loss"], k, drop=drop))


def train_scored(model, X, y, Xe, ye, k, snapshot_every, record_every, window_steps=0, **train_kw):
    """`train_with_snapshots`, its scored snapshots those of `scored_snapshots`: with `window_steps` > 0 the steps
    0…window_steps replace the first phase's, and it says so."""
    hist, snapshots, phase, ts = train_with_snapshots(model, X, y, Xe, ye, k, snapshot_every, record_every, **train_kw)
    if window_steps:
        ts = scored_snapshots(snapshots, hist, k, window_steps)
        print(f"scored instead: the snapshots at steps 0-{window_steps}: {list(ts)}")
    return hist, snapshots, phase, ts
