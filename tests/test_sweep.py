"""Sweeps on a real Dask scheduler with two worker processes on localhost: every run stored once and whole, a killed
worker costing only its run in flight, and a complete sweep starting no run.

The runs are MLI-7 (the r-homogeneous model, a few seconds each) with fewer steps than the default profile."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import psutil
import pytest
import torch

from nbdemo import params, results, runner, sweep
from nbdemo.claims import CLAIMS, OUTCOMES

DASK = str(Path(sys.executable).with_name("dask"))
CLAIM, SMALL = CLAIMS["MLI-7"], {"steps": 200}


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A `dask scheduler` and two single-threaded `dask worker` processes, one under a nanny (which sets
    OMP_NUM_THREADS=1 for its worker) and one without (a killed worker stays dead)."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "OMP_WAIT_POLICY": "PASSIVE"}
    file = tmp_path / "scheduler.json"
    procs = [subprocess.Popen([DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                               "--scheduler-file", str(file)], env=env, stderr=subprocess.DEVNULL)]
    deadline = time.time() + 60
    while not file.exists() and time.time() < deadline:
        time.sleep(0.2)
    address = json.loads(file.read_text())["address"]
    workers = [subprocess.Popen([DASK, "worker", address, "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1",
                                 *nanny], env=env, stderr=subprocess.DEVNULL) for nanny in ([], ["--no-nanny"])]
    procs += workers
    try:
        yield address, workers
    finally:
        for p in procs:
            for child in psutil.Process(p.pid).children(recursive=True) if p.poll() is None else []:
                child.kill()
            p.kill()
            p.wait()


def _stored():
    return json.loads(results.path(CLAIM, overrides=SMALL).read_text())["runs"]


def test_a_sweep_stores_every_run_and_a_rerun_starts_none(cluster):
    address, _ = cluster
    started = sweep.sweep([CLAIM], [0, 1], overrides=SMALL, scheduler=address, log=lambda *_: None)
    assert sorted(started) == [(CLAIM, 0), (CLAIM, 1)]
    runs = _stored()
    assert sorted(runs) == ["0", "1"] and {r["outcome"] for r in runs.values()} <= set(OUTCOMES)
    assert all(fresh for _, fresh in results.status(CLAIM, overrides=SMALL).values())
    # every notebook ran with the threads of a run by hand, whichever worker it ran on
    assert {r["provenance"]["threads"] for r in runs.values()} == {torch.get_num_threads()}
    before = results.path(CLAIM, overrides=SMALL).read_bytes()
    assert sweep.sweep([CLAIM], [0, 1], overrides=SMALL, scheduler=address, log=lambda *_: None) == []
    assert results.path(CLAIM, overrides=SMALL).read_bytes() == before
    # one more seed runs only that seed
    assert sweep.sweep([CLAIM], [0, 1, 2], overrides=SMALL, scheduler=address, log=lambda *_: None) == [(CLAIM, 2)]


def test_a_worker_killed_mid_sweep_loses_only_its_run_in_flight(cluster):
    address, workers = cluster
    alone = next(w for w in workers if w.args[-1] == "--no-nanny")  # its children are its notebook kernels
    seeds, log = [0, 1, 2], []  # the killed worker's run goes to the other worker
    job = threading.Thread(target=lambda: log.append(
        sweep.sweep([CLAIM], seeds, overrides=SMALL, scheduler=address, log=lambda *_: None)))
    job.start()
    deadline, victim = time.time() + 120, None
    while victim is None and time.time() < deadline:  # wait until its notebook kernel runs
        victim = alone if psutil.Process(alone.pid).children() else None
        time.sleep(0.2)
    assert victim is not None, "no worker started a run"
    time.sleep(2)
    for child in psutil.Process(victim.pid).children(recursive=True):
        child.kill()
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    job.join(300)
    assert not job.is_alive() and log and sorted(log[0]) == [(CLAIM, s) for s in seeds]
    runs = _stored()  # whole JSON, every seed once, no temporary file left behind
    assert sorted(runs) == [str(s) for s in seeds] and all(runs[str(s)]["seed"] == s for s in seeds)
    assert not [p for p in results.RESULTS.rglob("*") if p.name.startswith(".") and p.suffix != ".lock"]


def test_a_local_cluster_runs_notebooks_with_the_threads_of_a_run_by_hand(tmp_path, monkeypatch):
    """Making a LocalCluster sets OMP_NUM_THREADS=1 in this very process; the notebooks must not inherit it."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("NBDEMO_BUILD", str(tmp_path / "build"))
    for var in sweep.DASK_VARS:  # as in a plain shell (and restored after the test)
        monkeypatch.delenv(var, raising=False)
    assert sweep.sweep([CLAIM], [0], overrides=SMALL, workers=1, log=lambda *_: None) == [(CLAIM, 0)]
    assert _stored()["0"]["provenance"]["threads"] == torch.get_num_threads()


def test_a_run_whose_store_fails_keeps_its_notebook_and_the_others_finish(tmp_path, monkeypatch):
    """The claim's file cannot be written when seed 0 finishes (a full disk, a file another user owns): its line
    says so and where its notebook is, seed 1 still runs and is stored, and the sweep ends in one error."""
    monkeypatch.setattr(results, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(runner, "BUILD", tmp_path / "build")
    monkeypatch.setenv("NBDEMO_BUILD", str(tmp_path / "build"))
    real, calls = results.store, []

    def store(claim, meta, *args):
        calls.append(meta["parameters"]["seed"])
        if len(calls) == 1:
            raise PermissionError(13, "Permission denied", str(results.path(claim, *args)))
        return real(claim, meta, *args)
    monkeypatch.setattr(results, "store", store)
    log = []
    with pytest.raises(runner.NotebookFailed, match=r"1 of 2 runs could not be stored") as e:
        sweep.sweep([CLAIM], [0, 1], overrides=SMALL, workers=1, log=log.append)
    lost = calls[0]
    line = next(x for x in log if f"seed {lost}:" in x)
    assert "NOT STORED (PermissionError: [Errno 13] Permission denied" in line and "\n" not in line
    notebook = Path(line.split("its notebook: ")[1].split(" |")[0])
    assert notebook.exists() and nbformat.read(notebook, as_version=4).metadata["nbdemo"]["parameters"]["seed"] == lost
    assert str(notebook) in str(e.value)
    assert list(_stored()) == [str(1 - lost)]


def test_gpu_on_a_scheduler_without_a_gpu_worker_is_refused_not_left_waiting(cluster):
    address, _ = cluster
    t0 = time.time()
    with pytest.raises(params.ParameterError, match="--gpu: no worker of tcp://127.0.0.1:.* has the resource GPU"):
        sweep.sweep([CLAIM], [0], overrides=SMALL, scheduler=address, gpu=True, log=lambda *_: None)
    assert time.time() - t0 < 30 and not results.path(CLAIM, overrides=SMALL).exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_sweep_exits_128_plus_the_signal_and_leaves_no_kernel_files(tmp_path, short_tmpdir, sig,
                                                                                   code):
    """Ctrl-C or SIGTERM mid-run: exit 130 or 143, no kernel connection file (it holds the kernel's HMAC key) or
    kernel folder left in the temporary folder, no process left, nothing stored."""
    tmp = short_tmpdir
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results"),
           "TMPDIR": str(tmp), "PYTHONPATH": str(Path(sweep.__file__).parent.parent)}
    p = subprocess.Popen([sys.executable, "-m", "nbdemo.cli", "sweep", "MLI-7", "--seeds", "0", "-p", "steps",
                          "1000000", "--workers", "1"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not list(tmp.rglob("kernel*.json")) and not list(tmp.glob("tmp*.json")) and time.time() < deadline:
        time.sleep(0.5)
    assert time.time() < deadline, f"no kernel started: {sorted(map(str, tmp.rglob('*')))} {p.poll()}"
    time.sleep(5)  # inside the notebook's training
    family = psutil.Process(p.pid).children(recursive=True)
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == code and "interrupted" in err and "Traceback" not in err, err[-3000:]
    gone, alive = psutil.wait_procs(family, timeout=30)
    assert not alive
    assert not list(tmp.glob("tmp*.json")) and not list(tmp.rglob("nbdemo-kernel-*")) and not list(tmp.rglob("*.json"))
    assert not (tmp_path / "results").exists()


def test_a_failing_notebook_is_reported_by_the_sweep_alone(tmp_path):
    """A notebook that raises: the sweep's own line, not Dask's `Compute Failed` and worker traceback."""
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results"),
           "PYTHONPATH": str(Path(sweep.__file__).parent.parent)}
    r = subprocess.run([sys.executable, "-m", "nbdemo.cli", "sweep", "PCB-1", "--seeds", "0", "-p", "n_per_class",
                        "100000", "--workers", "1"], env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "PCB-1 seed 0: FAILED: PCB-1 stopped at cell" in out
    assert "Compute Failed" not in out and "Traceback" not in out, out[-3000:]
