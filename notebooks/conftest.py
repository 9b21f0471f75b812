"""nbval settings for the claim notebooks: check the datasets' raw files first, as `nbdemo run` does before a kernel
starts (`nbdemo.ml.datacheck`), so that a damaged copy stops the tests in one line instead of changing what the
notebooks compute; compare stdout and results, never stderr (progress bars, warnings); and print each notebook's wall
time at the end of the run."""
import time
from collections import defaultdict

import pytest

from nbdemo.ml import datacheck

_wall = defaultdict(float)


def pytest_configure(config):
    try:
        datacheck.ensure_fashion_mnist()
    except datacheck.BadData as e:
        raise pytest.UsageError(str(e)) from None


def pytest_collectstart(collector):
    if collector.fspath and collector.fspath.ext == ".ipynb":
        collector.skip_compare += ("stderr",)


def pytest_runtest_protocol(item, nextitem):
    item._nbdemo_t0 = time.perf_counter()


def pytest_runtest_teardown(item, nextitem):
    _wall[item.fspath.basename] += time.perf_counter() - getattr(item, "_nbdemo_t0", time.perf_counter())


def pytest_terminal_summary(terminalreporter):
    if not _wall:
        return
    tr = terminalreporter
    tr.section("notebook wall times (default profile)")
    for name, s in sorted(_wall.items()):
        tr.write_line(f"{s:7.1f} s  {name}" + ("   OVER the 60 s budget" if s > 60 else ""))
    tr.write_line(f"{sum(_wall.values()):7.1f} s  all {len(_wall)} notebooks")
