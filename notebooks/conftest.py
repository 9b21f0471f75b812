"""nbval runs these notebooks outside `nbdemo run`, which checks the datasets' raw files before a kernel starts
(`nbdemo.datacheck`): check them here too, once per test process, so that a damaged copy stops the tests in one line
instead of changing what the notebooks compute."""
import pytest

from nbdemo import datacheck


def pytest_configure(config):
    try:
        datacheck.ensure_fashion_mnist()
    except datacheck.BadData as e:
        raise pytest.UsageError(str(e)) from None
