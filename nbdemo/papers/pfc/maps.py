"""PFC-4's verdict on the paper's features (Wang, Gai & Zhang, Table I, §IV-A): every layer of the conv ResNet's last
stage measured on its C x H x W maps, flattened, the features Table I gives and §IV-A compares ("the final 4 or 5
blocks whose input features are of the same dimension"). PFC-1's requirements and checks (`depth_order_verdict`) are
computed on them; the same rows on the channel means, which a classifier after global average pooling reads (ours,
`ConvResNet.classifier_features`), are notes.
"""
import numpy as np

from nbdemo.ml.train import History
from nbdemo.papers.pfc.orders import depth_order_verdict

# The rows of `depth_order_verdict` computed from the training loss and error alone, the same on any features: they
# are not repeated among the channel means' notes.
TRAINING_ROWS = ("training stayed finite", "training error 0, reached and kept",
                 "terminal phase: training loss after zero error, end window / start window - 1")
MEANS = "channel means: "


def last_record_on(hist, metrics):
    """A copy of the History `hist` of `train_recorded` whose last record of PFC1, PFC2 and PFC3 is `metrics`: the
    layers' metrics after training (`layer_metrics`) on other features than the recorded ones. The requirements
    (`nbdemo.papers.pfc.regime`) read these metrics at the last record only; the training loss and error, read at
    every record, are kept."""
    records = {name: list(values) for name, values in hist.records.items()}
    for name in ("PFC1", "PFC2", "PFC3"):
        records[name][-1] = np.asarray(metrics[name])
    return History(list(hist.steps), hist.loss, records, hist.diverged_at, hist.wall_s)


def maps_verdict(hist, maps, means, n, raw=None):
    """PFC-4's verdict on `n` training samples: `depth_order_verdict` (the terminal phase, the regime, Conjecture 1's
    order across depth) on the metrics `maps` of the flattened maps, and, where `means` (the metrics of the channel
    means) is given, every row of the same verdict on the channel means that reads the features, as a note whose
    name starts with MEANS. `raw`: the raw input's metrics, for the notes on the collapse relative to it."""
    v = depth_order_verdict("PFC-4", last_record_on(hist, maps), maps, n, raw)
    if means is not None:
        for row in depth_order_verdict("PFC-4", last_record_on(hist, means), means, n, raw).rows:
            if row["name"] not in TRAINING_ROWS:
                v.note(MEANS + row["name"], row["value"], shown=row["measured"])
    return v

