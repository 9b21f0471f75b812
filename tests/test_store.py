"""The results store with many writers and on damaged files: no lost record, and one clear line for a bad file."""
import json
import os
import subprocess
import sys

from nbdemo import results
from nbdemo.claims import CLAIMS, ROOT

MLI7 = CLAIMS["MLI-7"]

WRITER = """
import sys
from nbdemo import results
from nbdemo.claims import CLAIMS
first, n = int(sys.argv[1]), int(sys.argv[2])
for seed in range(first, first + n):
    results.store(CLAIMS["MLI-7"], {"parameters": {"seed": seed}, "overrides": {"seed": seed},
                  "verdict": {"outcome": "REPRODUCED", "rows": []}, "fingerprint": "0" * 16, "wall_s": 1.0,
                  "commit": "abc", "started": "now", "provenance": {}})
"""


def test_two_processes_storing_into_one_file_keep_every_record(tmp_path):
    """Two sweeps of one claim on different seeds (two terminals, or a cluster) write the same file."""
    env = {**os.environ, "NBDEMO_RESULTS": str(tmp_path), "PYTHONPATH": str(ROOT)}
    n = 250
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(first), str(n)], env=env)
               for first in (0, 10_000)]
    assert [w.wait(300) for w in writers] == [0, 0]
    runs = json.loads((tmp_path / "default" / "MLI-7.json").read_text())["runs"]
    assert len(runs) == 2 * n and sorted(map(int, runs)) == list(range(n)) + list(range(10_000, 10_000 + n))
