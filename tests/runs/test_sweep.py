"""Sweeps on a real Dask scheduler with two worker processes on localhost, started by the README's command lines:
every run stored once and whole, a killed worker costing only its run in flight, a complete sweep starting no run,
nothing listening beyond loopback, and the same over TLS.

The runs are MLI-7 (the r-homogeneous model, a few seconds each) with fewer steps than the default profile."""
import contextlib
import gzip
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import dask
import nbformat
import psutil
import pytest

from nbdemo import cli
from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.claims.verdict import OUTCOMES
from nbdemo.ml import datacheck
from nbdemo.runs import evidence, lock, params, runner, store, sweep

CLAIM, SMALL = CLAIMS["MLI-7"], {"steps": 200}
README = ROOT / "README.md"
SECURITY = "ca.pem,node.pem,node.key"  # the README's certificate files, in the folder its commands run in


def readme_commands(start, port=8786):
    """The README's command lines that begin with `start` (`openssl`, `.venv/bin/dask worker`, ...), in its order,
    as argument lists that run here: $HEAD and $NODE are 127.0.0.1, the scheduler's port 8786 is `port` (0: any free
    one), the dashboard's 8787 any free one, and .venv/bin/ this interpreter's folder."""
    text = README.read_text().replace("\\\n", " ")
    return [[str(Path(sys.executable).with_name(Path(a[0]).name)) if a[0].startswith(".venv/bin/") else a[0], *a[1:]]
            for a in (shlex.split(line.replace("$HEAD", "127.0.0.1").replace("$NODE", "127.0.0.1")
                                  .replace("8786", str(port)).replace("8787", "0"), comments=True)
                      for line in re.findall(rf"^{re.escape(start)} .*", text, re.M))]


@contextlib.contextmanager
def readme_cluster(folder, protocol="tcp", workers=([], ["--no-nanny"])):
    """A `dask scheduler` and `dask worker`s started in `folder` by the README's command lines for `protocol` (tcp,
    or tls with the certificate files in `folder`), one worker per entry of `workers` (extra arguments). Yields the
    scheduler's address and the processes, the scheduler's first; all are killed at the end."""
    def readme(start, port):
        return next(a for a in readme_commands(start, port) if (protocol == "tls") == any("tls" in x for x in a))
    env = {**os.environ, "NBDEMO_BUILD": str(folder / "build"), "OMP_WAIT_POLICY": "PASSIVE"}
    file = folder / "scheduler.json"
    procs = [subprocess.Popen(readme(".venv/bin/dask scheduler", 0) + ["--scheduler-file", str(file)], cwd=folder,
                              env=env, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60
        while not file.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert file.exists(), "the README's `dask scheduler` wrote no scheduler file within 60 s"
        address = json.loads(file.read_text())["address"]
        port = int(address.rsplit(":", 1)[1])
        procs += [subprocess.Popen(readme(".venv/bin/dask worker", port) + extra, cwd=folder, env=env,
                                   stderr=subprocess.DEVNULL) for extra in workers]
        yield address, procs
    finally:
        for p in procs:
            for child in psutil.Process(p.pid).children(recursive=True) if p.poll() is None else []:
                child.kill()
            p.kill()
            p.wait()


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    """A `dask scheduler` and two single-threaded `dask worker` processes, as the README starts them, one under a
    nanny (which sets OMP_NUM_THREADS=1 for its worker) and one without (a killed worker stays dead)."""
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    with readme_cluster(tmp_path) as (address, procs):
        yield address, procs[1:]


def make_certificates(folder):
    """The README's CA, certificate and key, made by its openssl lines in `folder`."""
    folder.mkdir(exist_ok=True)
    for argv in readme_commands("openssl"):
        subprocess.run(argv, cwd=folder, check=True, capture_output=True, timeout=60)
    return folder


def _stored():
    return json.loads(store.path(CLAIM, overrides=SMALL).read_text())["runs"]


def test_a_sweep_stores_every_run_and_a_rerun_starts_none(cluster):
    address, _ = cluster
    started = sweep.sweep([CLAIM], [0, 1], overrides=SMALL, scheduler=address, log=lambda *_: None)
    assert sorted(started) == [(CLAIM, 0), (CLAIM, 1)]
    runs = _stored()
    assert sorted(runs) == ["0", "1"] and {r["outcome"] for r in runs.values()} <= set(OUTCOMES)
    assert all(fresh for _, fresh in store.status(CLAIM, overrides=SMALL).values())
    # every notebook ran torch on one thread (`nbdemo.setup`), whichever worker it ran on
    assert {r["provenance"]["threads"] for r in runs.values()} == {1}
    assert {r["provenance"]["lock"] for r in runs.values()} == {lock.digest()}  # and under the book's lock
    before = store.path(CLAIM, overrides=SMALL).read_bytes()
    assert sweep.sweep([CLAIM], [0, 1], overrides=SMALL, scheduler=address, log=lambda *_: None) == []
    assert store.path(CLAIM, overrides=SMALL).read_bytes() == before
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
    assert not [p for p in store.RESULTS.rglob("*") if p.name.startswith(".") and p.suffix != ".lock"]


def test_a_local_cluster_has_a_worker_per_core_and_runs_notebooks_on_one_thread(tmp_path, monkeypatch):
    """Making a LocalCluster sets OMP_NUM_THREADS=1 in this very process; a notebook runs torch on one thread either
    way (`nbdemo.setup`), as by hand."""
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    monkeypatch.setenv("NBDEMO_BUILD", str(tmp_path / "build"))
    for var in sweep.DASK_VARS:  # as in a plain shell (and restored after the test)
        monkeypatch.delenv(var, raising=False)
    assert sweep.sweep([CLAIM], [0], overrides=SMALL, workers=1, log=lambda *_: None) == [(CLAIM, 0)]
    assert _stored()["0"]["provenance"]["threads"] == 1
    assert sweep.local_workers() == sweep._cores()


def _kernels():
    """The notebook kernels running now, less those another pytest-xdist worker started (`make test` runs notebooks
    on two workers, so one may start a kernel while this test watches for leftovers)."""
    me = os.getpid()

    def foreign(p):
        try:
            return any(a.pid != me and "exec(eval(sys.stdin.readline()))" in " ".join(a.cmdline()) for a in p.parents())
        except psutil.Error:
            return False
    return {p.pid for p in psutil.process_iter(["cmdline"])
            if "ipykernel_launcher" in " ".join(p.info["cmdline"] or []) and not foreign(p)}


def test_runs_on_a_workers_reused_kernel_equal_runs_on_fresh_kernels_and_no_kernel_outlives_the_sweep(tmp_path,
                                                                                                   monkeypatch):
    """One worker runs MLI-9 and then MLI-7 on one kernel (`kernels.worker_kernel`): MLI-7's rows and cell numbers are
    those of a run on a kernel of its own, and when the sweep ends no kernel it started is left running."""
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(runner, "BUILD", tmp_path / "build")
    monkeypatch.setenv("NBDEMO_BUILD", str(tmp_path / "build"))
    before, other = _kernels(), CLAIMS["MLI-9"]
    assert sweep.sweep([other, CLAIM], [1], workers=1, log=lambda *_: None) == [(other, 1), (CLAIM, 1)]
    deadline = time.time() + 30
    while _kernels() - before and time.time() < deadline:
        time.sleep(0.5)
    assert not _kernels() - before, "a kernel of the sweep is still running"
    reused = json.loads(store.path(CLAIM).read_text())["runs"]["1"]
    path, fresh = runner.run(CLAIM, "default", {"seed": 1}, log=lambda *_: None)
    assert reused["rows"] == fresh["verdict"]["rows"]
    counts = [c.execution_count for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"]
    shared = nbformat.read(tmp_path / "build" / "runs" / "default-seed=1" / f"{CLAIM.id}.ipynb", as_version=4)
    assert [c.execution_count for c in shared.cells if c.cell_type == "code"] == counts == list(range(1, len(counts) + 1))


def test_a_run_whose_store_fails_keeps_its_notebook_and_the_others_finish(tmp_path, monkeypatch):
    """The claim's file cannot be written when seed 0 finishes (a full disk, a file another user owns): its line
    says so and where its notebook is, seed 1 still runs and is stored, and the sweep ends in one error."""
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(runner, "BUILD", tmp_path / "build")
    monkeypatch.setenv("NBDEMO_BUILD", str(tmp_path / "build"))
    real, calls = store.store, []

    def failing_store(claim, meta, *args):
        calls.append(meta["parameters"]["seed"])
        if len(calls) == 1:
            raise PermissionError(13, "Permission denied", str(store.path(claim, *args)))
        return real(claim, meta, *args)
    monkeypatch.setattr(store, "store", failing_store)
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
    assert time.time() - t0 < 30 and not store.path(CLAIM, overrides=SMALL).exists()


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupted_sweep_exits_128_plus_the_signal_and_leaves_no_kernel_files(tmp_path, short_tmpdir, sig,
                                                                                   code):
    """Ctrl-C or SIGTERM mid-run: exit 130 or 143, no kernel connection file (it holds the kernel's HMAC key) or
    kernel folder left in the temporary folder, no process left, nothing stored."""
    tmp = short_tmpdir
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results"),
           "TMPDIR": str(tmp), "PYTHONPATH": str(ROOT)}
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
           "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "nbdemo.cli", "sweep", "PCB-1", "--seeds", "0", "-p", "n_per_class",
                        "7000", "--force", "--workers", "1"], env=env, capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "PCB-1 seed 0: FAILED: PCB-1 stopped at cell" in out
    assert "Compute Failed" not in out and "Traceback" not in out, out[-3000:]


def _listening(procs):
    """(ip, port) of every listening socket of these processes and of their children (a nanny's worker)."""
    return {c.laddr for p in procs for q in [psutil.Process(p.pid), *psutil.Process(p.pid).children(recursive=True)]
            for c in q.net_connections(kind="inet") if c.status == psutil.CONN_LISTEN}


@pytest.mark.parametrize("protocol", ["tcp", "tls"])
def test_the_readmes_cluster_listens_on_loopback_only(tmp_path, monkeypatch, protocol):
    """Started by the README's lines, the scheduler and the workers (one under a nanny) serve Dask and HTTP (the
    dashboards, /metrics) on 127.0.0.1 alone: nothing on 0.0.0.0 or ::."""
    monkeypatch.chdir(make_certificates(tmp_path) if protocol == "tls" else tmp_path)
    with readme_cluster(tmp_path, protocol) as (address, procs):
        with sweep.connect(address, None, False, SECURITY if protocol == "tls" else None) as client:
            client.wait_for_workers(2, timeout=90)
            info = client.scheduler_info()
        http = {info["services"]["dashboard"]} | {w["services"]["dashboard"] for w in info["workers"].values()}
        listening = _listening(procs)
    assert address.startswith(f"{protocol}://127.0.0.1:") and len(http) == 3
    assert {ip for ip, _ in listening} == {"127.0.0.1"} and http <= {port for _, port in listening}, listening


def test_a_sweep_runs_over_tls_as_the_readme_says_and_a_stranger_is_refused(tmp_path, monkeypatch):
    """The README's `nbdemo sweep ... --scheduler tls://... --security ...` (of MLI-7, one seed, few steps; the real
    command line, in this process) runs and stores its run; Dask's config serves instead of --security; a
    certificate that another CA signed is refused in one line."""
    monkeypatch.chdir(make_certificates(tmp_path))
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    with readme_cluster(tmp_path, "tls", workers=([],)) as (address, _):
        line = next(a for a in readme_commands(".venv/bin/nbdemo sweep", address.rsplit(":", 1)[1]) if SECURITY in a)
        options = line[line.index("--scheduler"):][:4]
        assert options == ["--scheduler", address, "--security", SECURITY]
        cli.main(["sweep", CLAIM.id, "--seeds", "0", "-p", "steps", str(SMALL["steps"]), *options])  # SystemExit if not
        assert list(_stored()) == ["0"]
        with dask.config.set({"distributed.comm.tls.ca-file": "ca.pem", "distributed.comm.tls.client.cert": "node.pem",
                              "distributed.comm.tls.client.key": "node.key"}):
            sweep.check_request([CLAIM], [0], address)
            with sweep.connect(address, None, False) as client:
                assert client.submit(sum, [1, 2]).result(timeout=60) == 3
        stranger = make_certificates(tmp_path / "stranger")
        t0 = time.time()
        with pytest.raises(params.ParameterError, match=f"cannot connect to {address} within 10 s"):
            sweep.connect(address, None, False, ",".join(str(stranger / f) for f in SECURITY.split(",")))
        assert time.time() - t0 < 30


def test_a_sweep_on_damaged_data_is_refused_before_the_cluster_starts(tmp_path):
    """The issue's case: `run` refused a damaged Fashion-MNIST before any work (exit 2) while `sweep` started its
    cluster, failed every run and exited 1. Now the sweep checks the data first: exit 2, one line, within 2 s."""
    system = tmp_path / "fashion"
    system.mkdir()
    for name in datacheck.FASHION_MNIST:
        (system / f"{name}.gz").write_bytes(gzip.compress(b"\0" * 100))
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results"),
           "NBDEMO_FASHION_MNIST_DIR": str(system), "NBDEMO_DATA": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "nbdemo.cli", "sweep", "PCB-1", "MLI-7", "--seeds", "0-1"], env=env,
                       capture_output=True, text=True, timeout=120)
    took = time.perf_counter() - t0
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and r.stdout == "", r.stdout + r.stderr
    assert f"{system}/train-images-idx3-ubyte.gz holds the wrong data" in r.stderr and took < 2, took
    assert not (tmp_path / "build").exists() and not (tmp_path / "results").exists()


@pytest.mark.parametrize("verdict", [None, {"claim": "MLI-7", "outcome": "NOT REPRODUCED", "rows": []}],
                         ids=["no verdict", "no rows"])
def test_a_run_whose_verdict_has_no_rows_is_stored_and_reported(tmp_path, monkeypatch, fake_meta, verdict):
    """A notebook that recorded no verdict, or one without rows: the sweep stores it, prints its line and the
    claim's line over seeds, and does not crash. (The runs are faked: an in-process cluster calls `task`.)"""
    from distributed import Client, LocalCluster
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(runner, "run", lambda claim, profile, overrides, **_: (
        tmp_path / "nb.ipynb", {**fake_meta(claim, overrides["seed"]), "verdict": verdict, "profile": profile}))
    log = []
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        failed, unstored = sweep._run(client, [(CLAIM, 0), (CLAIM, 1)], "default", {}, False, False, {}, log.append)
    assert failed == unstored == [] and sum("no verdict" in line or "NOT REPRODUCED" in line for line in log) == 2
    assert sorted(store.load(CLAIM)) == [0, 1] and all(r["rows"] == [] for r in store.load(CLAIM).values())
    s = evidence.assess(CLAIM)
    assert s["n"] == 2 and s["headline"]
