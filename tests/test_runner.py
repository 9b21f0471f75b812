"""The claim registry, verdicts, parameter validation, profiles and the `nbdemo` command."""
import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import nbformat
import pytest
import yaml

from nbdemo import runner
from nbdemo.claims import CLAIMS, ROOT, Verdict
from nbdemo.train import History

WITH_NOTEBOOK = [c for c in CLAIMS if CLAIMS[c].notebook.exists()]
NBDEMO = [sys.executable, "-m", "nbdemo.cli"]


def test_every_notebook_and_profile_belongs_to_a_registered_claim():
    assert len(CLAIMS) == 32
    assert {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} <= set(CLAIMS)
    assert {p.stem for p in runner.PROFILES.glob("*.yml")} <= set(WITH_NOTEBOOK)


def test_verdict_passes_only_when_every_check_does(capsys):
    v = Verdict("tfd-1")
    v.check("a", expected="> 0", measured=0.123456, ok=True)
    assert v.passed
    v.check_finite(History(diverged_at=17))
    assert not v.passed
    table = v.table()
    assert "0.123" in table and "diverged at step 17" in table and table.endswith("TFD-1: FAIL (1/2 checks)")
    assert not Verdict("TFD-1").passed  # no checks is no evidence


def test_environment_yml_lists_the_pyproject_dependencies():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    pip = next(d["pip"] for d in yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
               if isinstance(d, dict))
    assert sorted(d for d in pip if d != "-e .") == sorted(deps)


@pytest.mark.parametrize("overrides, message", [
    ({"no_such_name": "1"}, "has no parameter 'no_such_name'"),
    ({"steps": "-5"}, "'steps' = -5 is impossible"),
    ({"depth": "abc"}, "'depth' must be int"),
    ({"gamma": "0"}, "'gamma' = 0.0 is impossible"),
    ({"gamma": "-1e-3"}, "'gamma' = -0.001 is impossible"),
    ({"dataset": "imagenet"}, "'dataset' = 'imagenet' is impossible"),
    ({"lr": "fast"}, "'lr' must be float"),
    ({"n_eval": "0"}, "'n_eval' = 0 is impossible"),
    ({"device": "gpu"}, "'device' = 'gpu' is impossible"),
])
def test_bad_parameters_are_refused_with_the_name(overrides, message):
    with pytest.raises(runner.ParameterError, match=re.escape(message)):
        runner.resolve("TFD-1", "default", overrides)


def test_training_precision_is_checked():
    with pytest.raises(runner.ParameterError, match="'precision' = 'float16' is impossible"):
        runner.resolve("PFC-4", "default", {"precision": "float16"})
    assert runner.resolve("PFC-4", "default", {"precision": "bfloat16", "torch_compile": "true"})[0] == {
        "precision": "bfloat16", "torch_compile": True}


def test_sweep_counts_each_check_over_the_seeds(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    outcomes = {0: (True, True), 1: (True, False), 2: (False, False)}

    def run(claim, profile, overrides):
        a, b = outcomes[overrides["seed"]]
        return None, {"verdict": {"passed": a and b, "checks": [{"check": "a", "ok": a}, {"check": "b", "ok": b}]}}

    monkeypatch.setattr(runner, "run", run)
    result = runner.sweep("TFD-1", [0, 1, 2])
    assert result["checks"] == {"a": 2, "b": 1} and result["holds"] == 1
    assert json.loads(runner.sweep_path("TFD-1", "default").read_text()) == result


def test_good_overrides_are_typed():
    changed, full = runner.resolve("TFD-1", "default", {"steps": "300", "gamma": "1", "dataset": "mnist"})
    assert changed == {"steps": 300, "gamma": 1.0, "dataset": "mnist"} and full["width"] == 512


def test_unknown_profile_is_refused():
    with pytest.raises(runner.ParameterError, match="no profile 'papr'"):
        runner.resolve("TFD-1", "papr")


@pytest.mark.parametrize("claim", WITH_NOTEBOOK)
def test_every_profile_is_valid(claim):
    named = runner.profiles(claim)
    assert "paper" in named or len(named) > 1, f"{claim} has no paper profile"
    for profile in named:
        runner.resolve(claim, profile)


def test_cli_refuses_bad_parameters_before_running(tmp_path):
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path)}
    for args, message in [(["-p", "no_such_name", "1"], "no parameter 'no_such_name'"),
                          (["-p", "steps", "-5"], "'steps' = -5 is impossible")]:
        r = subprocess.run(NBDEMO + ["run", "TFD-1", *args], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr
    assert not any(tmp_path.iterdir())  # nothing ran, nothing was written


def test_a_cell_that_raises_is_reported_in_two_lines_and_its_notebook_kept(tmp_path):
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path)}
    r = subprocess.run(NBDEMO + ["run", "PCB-1", "-p", "n_per_class", "100000"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode != 0 and r.stderr.startswith("nbdemo: PCB-1 stopped at cell In [")  # no kernel chatter
    assert "ValueError: n_per_class=100000: fashion-mnist class 0 has only 6000" in r.stderr
    assert len(r.stderr.splitlines()) == 2 and "Traceback" not in r.stderr
    kept = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert [f.name for f in kept] == ["PCB-1.failed.ipynb"] and "has only 6000" in kept[0].read_text()


def test_cli_output_piped_into_a_reader_that_stops_early_is_not_an_error():
    r = subprocess.run(" ".join(NBDEMO + ["list", "|", "head", "-1"]), shell=True, capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.startswith("claim") and r.stderr == ""


def _snapshot():
    return {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")}


def _has_child(pid):
    """Whether process `pid` has started a child process (the runner's kernel); /proc lists them per thread."""
    for f in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            if f.read_text().split():
                return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_nothing_behind(tmp_path, sig):
    before = _snapshot()
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path)}
    # Ctrl-C as in a terminal. A shell starts a background job with SIGINT ignored, and a CI job may run the
    # tests as one: the child would inherit that.
    p = subprocess.Popen(NBDEMO + ["run", "TFD-1", "-p", "steps", "100000"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not _has_child(p.pid) and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(15)  # well inside the notebook's training
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0 and "interrupted" in err
    assert not [f for f in tmp_path.rglob("*") if f.is_file()]
    assert _snapshot() == before


def test_rerun_gives_identical_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    small = {"steps": 200, "n_eval": 500, "width": 64}
    first = runner.run("TFD-1", overrides=small, log=lambda *_: None)[1]["verdict"]
    Path(runner.output_path("TFD-1", overrides=small)).unlink()
    second = runner.run("TFD-1", overrides=small, log=lambda *_: None)[1]["verdict"]
    assert first == second and first["checks"]


@pytest.mark.parametrize("claim", WITH_NOTEBOOK)
def test_paper_profiles_run_in_shape(claim, tmp_path, monkeypatch):
    """Build the paper's model and take two steps on random tensors of the paper dataset's shape."""
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    for profile in runner.profiles(claim):
        if profile != "default":
            path, meta = runner.run(claim, profile, dry_run=True, log=lambda *_: None)
            assert meta["dry_run"] and nbformat.read(path, as_version=4).cells


def test_corrupted_or_truncated_results_count_as_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    path = runner.output_path("TFD-1", "paper")
    path.parent.mkdir(parents=True)
    for junk in ["", '{"cells": [', "\x00\x01 not json"]:
        path.write_text(junk)
        assert runner.latest("TFD-1", "paper") is None


def test_divergence_is_a_fail_with_its_step_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    verdict = runner.run("TFD-1", overrides={"lr": 1e4, "steps": 200, "n_eval": 500, "width": 64},
                         log=lambda *_: None)[1]["verdict"]
    finite = next(c for c in verdict["checks"] if c["check"] == "training stayed finite")
    assert not verdict["passed"] and not finite["ok"] and finite["measured"].startswith("diverged at step")


@pytest.mark.parametrize("classes", ["[0, 12]", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "[-1, 2]"])
def test_classes_that_the_dataset_lacks_are_refused(classes):
    with pytest.raises(runner.ParameterError, match="does not fit fashion-mnist, which has classes 0..9"):
        runner.resolve("PCB-1", "default", {"classes": classes})
