"""The results store with many writers and on damaged files: no lost record, and one clear line for a bad file."""
import json
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.runs import fingerprint, store

MLI7 = CLAIMS["MLI-7"]

WRITER = """
import sys
from nbdemo.runs import fingerprint, store
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


CHECK = {"kind": "check", "name": "claim", "value": 1.0, "op": ">=", "threshold": 0.5, "reported": "~1",
         "source": {"from": "paper", "where": "Fig. 3", "line": 12}, "expected": ">= 0.5 (paper ~1)",
         "measured": "1", "ok": True, "inner": {"tolerance eps = 0.05 (ours)": [0.9, [1.0, "nan"]], "hold": None}}
REQUIRE = {"kind": "requirement", "name": "fit", "value": [1.0, 2.0], "op": ">", "threshold": [0.0], "reported": None,
           "source": {"from": "ours", "why": "synthetic"}, "expected": "> 0", "measured": "1, 2", "ok": True}
NOTE = {"kind": "note", "name": "n", "value": "inf", "op": None, "threshold": None, "reported": None, "source": None,
        "expected": "", "measured": "inf", "ok": None}
GOOD = {"claim": "MLI-7", "profile": "default", "overrides": {}, "runs": {"0": {
    "seed": 0, "outcome": "REPRODUCED", "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc", "started": "now",
    "provenance": {"device": "cpu", "gpu": None, "threads": 2}, "rows": [CHECK, REQUIRE, NOTE]}}}


def _run0(body=GOOD, **change):
    body = json.loads(json.dumps(body))
    body["runs"]["0"].update(change)
    return json.dumps(body)


def _without(field, row=None):
    """GOOD without `field` in its record (or in its row number `row`)."""
    body = json.loads(json.dumps(GOOD))
    del (body["runs"]["0"] if row is None else body["runs"]["0"]["rows"][row])[field]
    return json.dumps(body)


def _row(i=0, **change):
    body = json.loads(json.dumps(GOOD))
    body["runs"]["0"]["rows"][i].update(change)
    return json.dumps(body)


DAMAGED = {  # shape -> (file text, what the error says)
    "truncated": (json.dumps(GOOD)[:100], "not valid JSON"),
    "empty": ("", "empty"),
    "a list": ("[]", "not a mapping with 'runs'"),
    "runs a list": ('{"runs": [1, 2]}', "'runs' is not a mapping"),
    "a record not a mapping": ('{"runs": {"0": 1}}', "seed 0: not a mapping"),
    "no fingerprint": (_without("fingerprint"), "seed 0: no fingerprint"),
    "a fingerprint not hex": (_run0(fingerprint="../../etc"), "seed 0: fingerprint '../../etc' is not 16 hex"),
    "ok NaN": (_row(ok=float("nan")), "seed 0: a number is not finite"),
    "ok a string": (_row(ok="yes"), "seed 0: row 'claim': ok is 'yes', not true or false"),
    "ok null in a check": (_row(ok=None), "seed 0: row 'claim': ok is None"),
    "outcome NaN": (_run0(outcome=float("nan")), "seed 0: a number is not finite"),
    "outcome unknown": (_run0(outcome="MAYBE"), "seed 0: outcome 'MAYBE' is not one of"),
    "a number infinite": (_row(value=float("inf")), "seed 0: a number is not finite"),
    "wall time NaN": (_run0(wall_s=float("nan")), "seed 0: a number is not finite"),
    "wall time a string": (_run0(wall_s="1.0"), "seed 0: wall_s '1.0' is not a number of seconds"),
    "wall time negative": (_run0(wall_s=-1), "seed 0: wall_s -1 is not a number of seconds"),
    "no wall time": (_without("wall_s"), "seed 0: wall_s None is not a number"),
    "seed key 04": (json.dumps({"runs": {"04": GOOD["runs"]["0"]}}), "seed key '04' is not"),
    "seed key -1": (json.dumps({"runs": {"-1": GOOD["runs"]["0"]}}), "seed key '-1' is not"),
    "seed key 2**32": (json.dumps({"runs": {str(2 ** 32): GOOD["runs"]["0"]}}), "seed key '4294967296' is not"),
    "seed not its key": (_run0(seed=3), "seed 0: seed 3 is not its key"),
    "rows not a list": (_run0(rows={}), "seed 0: rows is not a list"),
    "a row not a mapping": (_run0(rows=[1]), "seed 0: row 1: is not a mapping"),
    "a row without kind": (_without("kind", 0), "seed 0: row 'claim': kind None is not one of"),
    "a row without name": (_without("name", 0), "seed 0: row 1: name None is not a text"),
    "a name not a text": (_row(name=["x"]), "seed 0: row 1: name ['x'] is not a text"),
    "value a word": (_row(value="x"), "seed 0: row 'claim': value 'x' is not a number"),
    "value missing": (_without("value", 0), "seed 0: row 'claim': value None is not a number"),
    "value an empty list": (_row(value=[]), "seed 0: row 'claim': value [] is not a number"),
    "value nested": (_row(value=[[1.0]]), "seed 0: row 'claim': value [[1.0]] is not a number"),
    "op unknown": (_row(op="~"), "seed 0: row 'claim': op '~' is not one of"),
    "threshold a word": (_row(threshold="half"), "seed 0: row 'claim': threshold 'half' is not"),
    "thresholds not one per value": (_row(1, threshold=[0, 0, 0]), "seed 0: row 'fit': threshold [0, 0, 0] is not"),
    "source missing": (_without("source", 0), "seed 0: row 'claim': source None is not paper(...) or ours(...)"),
    "paper without where": (_row(source={"from": "paper"}), "seed 0: row 'claim': source: paper(...) needs 'where'"),
    "a line not a number": (_row(source={"from": "paper", "where": "Fig. 3", "line": "12"}), "needs 'where'"),
    "ours without why": (_row(1, source={"from": "ours", "why": " "}), "seed 0: row 'fit': source: ours(...) needs"),
    "inner not variants": (_row(inner={"eps": [1.0]}), "seed 0: row 'claim': inner is not a mapping"),
    "inner a word": (_row(inner={"eps": ["x", 1.0]}), "seed 0: row 'claim': inner is not a mapping"),
    "expected missing": (_without("expected", 0), "seed 0: row 'claim': expected None is not a text"),
    "measured a number": (_row(measured=1), "seed 0: row 'claim': measured 1 is not a text"),
    "reported a number": (_row(reported=1), "seed 0: row 'claim': reported 1 is not a text or null"),
    "a note with ok": (_row(2, ok=True), "seed 0: row 'n': a note has no ok"),
    "a note's value a word": (_row(2, value="many"), "seed 0: row 'n': value 'many' is not"),
    "provenance nested": (_run0(provenance={"gpu": {"name": "x"}}), "seed 0: provenance is not a mapping of names"),
    "commit a number": (_run0(commit=1), "seed 0: commit 1 is not a text"),
    "another claim's file": (json.dumps({**GOOD, "claim": "MLI-8"}), "holds claim 'MLI-8'"),
    "nested 200 KB deep": ("[" * 100_000 + "]" * 100_000, f"nested deeper than {store.MAX_DEPTH} levels"),
    "nested in a record": (_row(extra=json.loads("[" * 20 + "]" * 20)), "seed 0: nested deeper than"),
    "nested beside the runs": (json.dumps({**GOOD, "x": json.loads("[" * 20 + "]" * 20)}), "nested deeper than"),
    "more runs than a sweep": (json.dumps({"runs": {str(s): {**GOOD["runs"]["0"], "seed": s}
                                                    for s in range(store.MAX_RUNS + 1)}}),
                               f"holds 1,001 runs; a file holds at most {store.MAX_RUNS:,}"),
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


def test_every_committed_results_file_passes_the_check():
    files = sorted((ROOT / "results").glob("*/*.json"))
    assert files
    for file in files:
        if file.stem in CLAIMS and file.parent.name != "history":
            assert store._check(json.loads(file.read_text()), CLAIMS[file.stem]) is None, file


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    """A sparse file of 158 MB (the size of 10^6 small runs): refused from its size alone."""
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    file = store.path(MLI7)
    file.parent.mkdir()
    with open(file, "wb") as f:
        f.truncate(158_000_000)
    with pytest.raises(store.StoreError, match=r"has 158,000,000 bytes; a results file holds at most 33,554,432"):
        store.load(MLI7)


def test_a_fifo_is_refused_rather_than_waited_on(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.path(MLI7).parent.mkdir()
    os.mkfifo(store.path(MLI7))
    with pytest.raises(store.StoreError, match="is not a regular file"):
        store.load(MLI7)


def _meta(seed, **change):
    return {"parameters": {"seed": seed}, "overrides": {"seed": seed}, "verdict": {"outcome": "REPRODUCED",
            "rows": [CHECK]}, "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc", "started": "now",
            "provenance": {}, **change}


def test_a_file_stores_at_most_max_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    monkeypatch.setattr(store, "MAX_RUNS", 3)
    for seed in range(3):
        store.store(MLI7, _meta(seed))
    store.store(MLI7, _meta(2))  # a seed stored again replaces its record
    with pytest.raises(store.StoreError, match="holds 3 runs, the most a results file may hold"):
        store.store(MLI7, _meta(3))
    assert sorted(store.load(MLI7)) == [0, 1, 2]


@pytest.mark.parametrize("verdict", [None, {"outcome": "NOT REPRODUCED", "rows": []}], ids=["none", "no rows"])
def test_a_run_without_verdict_rows_is_stored_and_read_back(tmp_path, monkeypatch, verdict):
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.store(MLI7, _meta(0, verdict=verdict))
    assert store.load(MLI7)[0]["rows"] == [] and store.load(MLI7)[0]["outcome"] == (verdict and verdict["outcome"])


def test_a_record_that_would_not_pass_the_check_is_not_written(tmp_path, monkeypatch):
    """A finished run whose verdict holds what the check refuses (here a NaN in its provenance) is refused in one
    line; the file keeps its other runs and stays readable."""
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    store.store(MLI7, _meta(0))
    with pytest.raises(store.StoreError, match="seed 1: a number is not finite") as e:
        store.store(MLI7, _meta(1, provenance={"gpu_memory": float("nan")}))
    assert "\n" not in str(e.value) and sorted(store.load(MLI7)) == [0]


def test_status_reads_and_hashes_a_claims_code_once_for_all_its_seeds(tmp_path, monkeypatch, fake_meta):
    """The issue's file of 10^6 runs was slow because every seed's fingerprint read and hashed the notebook and
    its modules again; the hash of the code is made once per claim, and each seed's fingerprint is the same."""
    monkeypatch.setattr(store, "RESULTS", tmp_path)
    for seed in range(5):
        store.store(MLI7, fake_meta(MLI7, seed))
    calls, real = [], fingerprint.code
    monkeypatch.setattr(fingerprint, "code", lambda claim: calls.append(claim) or real(claim))
    status = store.status(MLI7)
    assert calls == [MLI7] and sorted(status) == list(range(5)) and all(fresh for _, fresh in status.values())
    assert [r["fingerprint"] for r, _ in status.values()] == [store.expected_fingerprint(MLI7, s) for s in range(5)]


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
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.split()[:1] in ([c] for c in CLAIMS)}
    assert "unreadable" in rows["MLI-8"] and re.search(r"\b\d+ of \d+\b", rows["MLI-7"]) and "no results" in rows["TFD-1"]
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert str(bad) in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("args", [["sweep", "--all", "--stale"], ["sweep", "MLI-8", "--seeds", "0"], ["book"]])
def test_sweep_and_book_report_a_damaged_file_in_one_line(damaged, args):
    tmp_path, bad = damaged
    out = _nbdemo(tmp_path, *args, timeout=90)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert str(bad) in out.stderr and "not valid JSON" in out.stderr
    assert not (tmp_path / "build" / "runs").exists()  # nothing ran


# The issue's files that passed the old check and then crashed `sweep` (a traceback, exit 1) or got past `book`'s check
ISSUE = ["a row without kind", "wall time a string", "no wall time", "value a word", "nested 200 KB deep"]


@pytest.mark.parametrize("args", [["sweep", "MLI-7", "--seeds", "0"], ["book"]], ids=" ".join)
@pytest.mark.parametrize("shape", ISSUE)
def test_the_issues_damaged_files_stop_sweep_and_book_in_one_line_within_2_s(tmp_path, shape, args):
    text, what = DAMAGED[shape]
    folder = tmp_path / "results" / "default"
    folder.mkdir(parents=True)
    (folder / "MLI-7.json").write_text(text)
    t0 = time.perf_counter()
    out = _nbdemo(tmp_path, *args)
    took = time.perf_counter() - t0
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
    assert what in out.stderr and "Traceback" not in out.stderr and took < 2, (took, out.stderr)
    assert not (tmp_path / "build").exists()  # nothing ran


def test_a_file_of_a_million_small_runs_is_refused_within_2_s(tmp_path):
    """The issue's 158 MB file of 10^6 valid runs, which `sweep` spent over 5 minutes and 1.4 GB on."""
    folder = tmp_path / "results" / "default"
    folder.mkdir(parents=True)
    rec = json.dumps({"outcome": None, "rows": [], "fingerprint": "0" * 16, "wall_s": 1.0, "commit": "abc",
                      "started": "now", "provenance": {}})[1:]
    with open(folder / "MLI-7.json", "w") as f:
        f.write('{"claim": "MLI-7", "runs": {')
        f.write(", ".join(f'"{s}": {{"seed": {s}, {rec}' for s in range(10 ** 6)))
        f.write("}}")
    assert (folder / "MLI-7.json").stat().st_size > 150e6
    for args in (["sweep", "MLI-7", "--seeds", "0"], ["book"]):
        t0 = time.perf_counter()
        out = _nbdemo(tmp_path, *args)
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
        assert "bytes; a results file holds at most" in out.stderr and time.perf_counter() - t0 < 2


def test_list_shows_a_deeply_nested_file_as_unreadable(tmp_path):
    folder = tmp_path / "results" / "default"
    folder.mkdir(parents=True)
    (folder / "MLI-7.json").write_text(DAMAGED["nested 200 KB deep"][0])
    out = _nbdemo(tmp_path, "list")
    assert out.returncode == 2 and "RecursionError" not in out.stderr + out.stdout
    assert "unreadable" in next(line for line in out.stdout.splitlines() if line.startswith("MLI-7"))
    assert len(out.stderr.strip().splitlines()) == 1 and "nested deeper than" in out.stderr

