"""The results store with many writers and on damaged files: no lost record, and one clear line for a bad file."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.runs import store

MLI7 = CLAIMS["MLI-7"]

WRITER = """
import sys
from nbdemo.runs import store
from nbdemo.claims.registry import CLAIMS
first, n = int(sys.argv[1]), int(sys.argv[2])
for seed in range(first, first + n):
    store.store(CLAIMS["MLI-7"], {"parameters": {"seed": seed}, "overrides": {"seed": seed},
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


GOOD = {"claim": "MLI-7", "profile": "default", "overrides": {}, "runs": {"0": {
    "seed": 0, "outcome": "REPRODUCED", "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc", "started": "now",
    "provenance": {}, "rows": [{"kind": "check", "name": "claim", "ok": True, "statistic": 1.0},
                               {"kind": "note", "name": "n", "ok": None, "statistic": "inf"}]}}}


def _run0(body, **change):
    body = json.loads(json.dumps(body))
    body["runs"]["0"].update(change)
    return json.dumps(body)


def _row0(**change):
    body = json.loads(json.dumps(GOOD))
    body["runs"]["0"]["rows"][0].update(change)
    return json.dumps(body)


DAMAGED = {  # shape -> (file text, what the error says)
    "truncated": (json.dumps(GOOD)[:100], "not valid JSON"),
    "empty": ("", "empty"),
    "a list": ("[]", "not a mapping with 'runs'"),
    "runs a list": ('{"runs": [1, 2]}', "'runs' is not a mapping"),
    "a record not a mapping": ('{"runs": {"0": 1}}', "seed 0: not a mapping"),
    "no fingerprint": (json.dumps({"runs": {"0": {k: v for k, v in GOOD["runs"]["0"].items()
                                                  if k != "fingerprint"}}}), "seed 0: no fingerprint"),
    "ok NaN": (_row0(ok=float("nan")), "seed 0: row 'claim': ok is nan"),
    "ok a string": (_row0(ok="yes"), "seed 0: row 'claim': ok is 'yes'"),
    "outcome NaN": (_run0(GOOD, outcome=float("nan")), "seed 0: outcome nan is not one of"),
    "outcome unknown": (_run0(GOOD, outcome="MAYBE"), "seed 0: outcome 'MAYBE' is not one of"),
    "a number infinite": (_row0(statistic=float("inf")), "seed 0: a number is not finite"),
    "wall time NaN": (_run0(GOOD, wall_s=float("nan")), "seed 0: a number is not finite"),
    "seed key 04": (json.dumps({"runs": {"04": GOOD["runs"]["0"]}}), "seed key '04' is not"),
    "seed key -1": (json.dumps({"runs": {"-1": GOOD["runs"]["0"]}}), "seed key '-1' is not"),
    "rows not a list": (_run0(GOOD, rows={}), "seed 0: rows is not a list"),
    "another claim's file": (json.dumps({**GOOD, "claim": "MLI-8"}), "holds claim 'MLI-8'"),
}


@pytest.mark.parametrize("shape", DAMAGED)
def test_a_damaged_file_raises_one_line_naming_it_and_what_is_wrong(tmp_path, monkeypatch, shape):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    text, what = DAMAGED[shape]
    file = store.path(MLI7)
    file.parent.mkdir()
    file.write_text(text)
    with pytest.raises(store.StoreError) as e:
        store.load(MLI7)
    assert str(file) in str(e.value) and what in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(store.StoreError):  # and nothing is stored over it
        store.store(MLI7, {"parameters": {"seed": 1}, "overrides": {"seed": 1}, "verdict": None,
                             "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc", "started": "now",
                             "provenance": {}})
    assert file.read_text() == text


def test_a_good_file_reads_back(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.path(MLI7).parent.mkdir()
    store.path(MLI7).write_text(json.dumps(GOOD))
    assert store.load(MLI7) == {0: GOOD["runs"]["0"]}


def test_a_profile_folder_that_is_a_file(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    (tmp_path / "default").write_text("")
    with pytest.raises(store.StoreError, match=f"{tmp_path / 'default'} is not a folder"):
        store.load(MLI7)


def _nbdemo(tmp_path, *args, timeout=120):
    env = {**os.environ, "NBDEMO_RESULTS": str(tmp_path / "results"), "NBDEMO_BUILD": str(tmp_path / "build"),
           "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "nbdemo.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def damaged(tmp_path):
    """A store with MLI-7's committed file whole and MLI-8's truncated."""
    folder = tmp_path / "results" / "default"
    folder.mkdir(parents=True)
    shutil.copy(ROOT / "results" / "default" / "MLI-7.json", folder)
    (folder / "MLI-8.json").write_text((ROOT / "results" / "default" / "MLI-8.json").read_text()[:500])
    return tmp_path, folder / "MLI-8.json"


def test_list_shows_the_other_claims_and_the_damaged_one_as_unreadable(damaged):
    tmp_path, bad = damaged
    out = _nbdemo(tmp_path, "list")
    assert out.returncode == 2
    rows = {line.split()[0]: line for line in out.stdout.splitlines()[1:-1]}
    assert "unreadable" in rows["MLI-8"] and "of 5" in rows["MLI-7"] and "no results" in rows["TFD-1"]
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert str(bad) in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [["sweep", "--all", "--stale"], ["sweep", "MLI-8", "--seeds", "0"], ["book"]])
def test_sweep_and_book_report_a_damaged_file_in_one_line(damaged, args):
    tmp_path, bad = damaged
    out = _nbdemo(tmp_path, *args, timeout=90)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert str(bad) in out.stderr and "not valid JSON" in out.stderr
    assert not (tmp_path / "build" / "runs").exists()  # nothing ran
