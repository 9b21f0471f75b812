"""`nbdemo sweep`: claims × seeds as tasks on Dask, each run stored as soon as it finishes.

Each task is one notebook run (`runner.run`) in a worker process; it returns the run's metadata, and this process,
the only writer of the results store, adds it to `results/` at once (`store.store`). A sweep that is stopped, or
whose worker dies, so loses only the runs in flight: Dask hands a dead worker's task to another worker, and a rerun
of the same sweep runs only the seeds that are missing or stale.

By default the tasks run on a `LocalCluster` of single-threaded worker processes, one per core (`local_workers`:
a notebook's kernel runs torch on one thread of the CPU, `nbdemo.setup`); `scheduler` connects to a running scheduler instead (`dask scheduler`
and `dask worker`, or dask-jobqueue on SLURM: see the README), a tls:// one with `security` (a Dask `Security`, or
Dask's config `distributed.comm.tls.*`).
"""
import logging
import os
import re
import shutil
import signal
import ssl
import tempfile
import time

from nbdemo.claims.registry import Claim, get
from nbdemo.runs import devices, history, kernels, params, runner, store

MAX_RUNS = store.MAX_RUNS  # runs (claims x seeds) in one sweep: more is a typo, or a job to split into several sweeps
CONNECT_TIMEOUT = 10  # seconds to reach a --scheduler
ADDRESS = re.compile(r"(?:(?:tcp|tls|ucx)://)?(\[[0-9a-fA-F:]+\]|[\w.-]+):(\d{1,5})|inproc://\S+", re.ASCII)
SEEDS = re.compile(r"(0|[1-9][0-9]{0,9})(?:-(0|[1-9][0-9]{0,9}))?", re.ASCII)  # one item of --seeds: 7 or 0-4


def parse_seeds(text):
    """The forms of --seeds: "0-4", "0 1 2", "0,3,7" or "0-2,9" (words apart, each a list of seeds and ranges joined
    by single commas) -> a sorted list of distinct seeds in [0, 2**32) (at most `MAX_RUNS`)."""
    items = [item for word in str(text).split() for item in word.split(",")]
    ranges = []
    for item in items:
        m = SEEDS.fullmatch(item)
        if not m or (m[2] is not None and int(m[2]) < int(m[1])) or int(m[2] or m[1]) >= 2 ** 32:
            raise params.ParameterError(f"seeds {params.short(text)}: give seeds in [0, 2**32) as a list or ranges, "
                                        "e.g. 0-4, 0 1 2 or 0,3,7")
        ranges.append(range(int(m[1]), int(m[2] or m[1]) + 1))
    if not ranges:
        raise params.ParameterError("seeds: give at least one seed, e.g. 0-4")
    n = sum(map(len, ranges))  # counted before any list is made: 0-100000000 is a number, not a list
    if n > MAX_RUNS:
        raise params.ParameterError(f"seeds {params.short(text)}: {n:,} seeds; a sweep runs at most {MAX_RUNS:,} runs "
                                    "(split it into several sweeps)")
    return sorted(set().union(*ranges))


def tls(text):
    """--security "CA,CERT,KEY" -> its three PEM files: the CA's certificate, a certificate that CA signed, and its key
    (checked by `check_request`)."""
    files = text.split(",")
    if len(files) != 3 or not all(files):
        raise params.ParameterError(f"--security {params.short(text)}: give CA,CERT,KEY, three PEM files (the CA's "
                                    "certificate, a certificate it signed and its key), e.g. ca.pem,node.pem,node.key")
    return files


def _security(security):
    """The Dask `Security` of a client: from --security's text, as given (a dask-jobqueue cluster's), or None."""
    if not isinstance(security, str):
        return security
    from distributed import Security
    ca, cert, key = tls(security)
    return Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True)


def _check_tls(scheduler, security):
    """Refuse a tls:// scheduler when neither `security` nor Dask's config names the CA's certificate and this
    client's, or one of its files is missing, unreadable, not PEM, or a key that is not the certificate's. The files of
    --security are read by Python's ssl, as Dask reads them; Dask is imported only for a `Security` or its config."""
    if isinstance(security, str):
        files = tls(security)
    else:
        from distributed import Security
        security = security or Security()  # Security(): Dask's config
        files = [security.tls_ca_file, security.tls_client_cert, security.tls_client_key]
    for f in files:
        if f and "\n" not in f and not os.path.isfile(f):  # a file's name, not the PEM text itself
            raise params.ParameterError(f"--scheduler {scheduler}: no certificate or key file {params.short(f)}")
    try:
        if isinstance(security, str):
            ca, cert, key = files
            ssl.create_default_context(cafile=ca).load_cert_chain(cert, key)
        elif security.get_connection_args("client")["ssl_context"] is None:  # reads the files
            raise params.ParameterError(f"--scheduler {scheduler}: give --security CA,CERT,KEY (or set "
                                        "distributed.comm.tls.ca-file, .client.cert and .client.key in Dask's config)")
    except OSError as e:  # ssl.SSLError is one
        raise params.ParameterError(f"--scheduler {scheduler}: its certificate files are refused: {e}") from None


def _cores():
    """The cores this process may run on, without importing torch."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def check_request(claims, seeds, scheduler=None, gpu=False, security=None, workers=None):
    """Refuse, before anything is planned or started, a sweep that is too big, a seed that is not one, an address
    that is not one, more LocalCluster workers than there are cores (or workers with a scheduler, which has its own),
    --gpu on a LocalCluster of a machine where torch sees no GPU (its runs would wait for good), `security` without a
    tls:// scheduler, and a tls:// scheduler without certificate files that can be read."""
    if len(claims) * len(seeds) > MAX_RUNS:
        raise params.ParameterError(f"{len(claims) * len(seeds):,} runs ({len(claims)} claims x {len(seeds)} seeds); "
                                    f"a sweep runs at most {MAX_RUNS:,} (split it into several sweeps)")
    bad = [s for s in seeds if not params.RULES["seed"][0](s)]
    if bad:
        raise params.ParameterError(f"seed {params.short(bad[0])} is impossible: it must be {params.RULES['seed'][1]}")
    m = ADDRESS.fullmatch(scheduler) if scheduler else None
    if scheduler and not (m and (m[2] is None or 0 < int(m[2]) < 65536)):
        raise params.ParameterError(f"--scheduler {params.short(scheduler)}: give tcp://HOST:PORT (or tls://, ucx://, "
                                    "inproc://), e.g. tcp://127.0.0.1:8786")
    if workers is not None and scheduler:
        raise params.ParameterError("--workers sets the workers of the LocalCluster; a --scheduler has its own workers")
    if workers is not None and not 1 <= workers <= _cores():
        raise params.ParameterError(f"--workers {workers}: give 1 to {_cores()}, the cores here (each worker runs one "
                                    "notebook at a time, whose kernel runs torch on one thread)")
    if gpu and not scheduler and not devices.cuda_devices():
        raise params.ParameterError("--gpu: torch sees no CUDA device here, so no worker of the LocalCluster has a GPU; "
                                    "give --scheduler of a cluster whose workers have --resources GPU=1")
    is_tls = (scheduler or "").startswith("tls://")
    given = isinstance(security, str) or (security is not None and security.tls_ca_file)  # an empty Security: no TLS
    if given and not is_tls:
        raise params.ParameterError("--security is for a scheduler started with --protocol tls: "
                                    "give --scheduler tls://HOST:PORT")
    if is_tls:
        _check_tls(scheduler, security)


def handshake(scheduler, security=None):
    """Connect to a tcp:// or tls:// scheduler and go through Dask's handshake within CONNECT_TIMEOUT seconds, or
    refuse it in one line: a port that accepts and then says nothing (where Dask's client would wait for good), or
    one that speaks another protocol (whose first bytes Dask would read as the length of a message to allocate)."""
    if scheduler.startswith(("inproc://", "ucx://")):
        return
    import asyncio
    from distributed.comm import connect as dask_connect
    from distributed import Security
    args = (_security(security) or Security()).get_connection_args("client")  # Security(): Dask's config

    async def greet():
        comm = await asyncio.wait_for(dask_connect(scheduler, timeout=CONNECT_TIMEOUT, **args), CONNECT_TIMEOUT)
        await comm.close()
    try:
        asyncio.run(greet())
    except (Exception, MemoryError) as e:  # noqa: BLE001  whatever the other end did, one line
        why = "it accepted the connection and did not answer" if isinstance(e, asyncio.TimeoutError) else \
            "it does not speak Dask's protocol" if isinstance(e, MemoryError) else \
            f"{type(e).__name__}: {' '.join(str(e).split())[:200]}"
        raise params.ParameterError(f"cannot connect to {scheduler} within {CONNECT_TIMEOUT} s: {why}") from None


def connect(scheduler, cluster, gpu, security=None):
    """A Client of the scheduler (or of the LocalCluster); a scheduler that does not answer within CONNECT_TIMEOUT
    seconds (or refuses the client's certificate, or speaks another protocol: `handshake`), or has no GPU worker for
    --gpu, is refused in one line. security: a `Security`, or the text of --security."""
    from distributed import Client
    if scheduler:
        handshake(scheduler, security)
    try:
        client = Client(scheduler or cluster, timeout=CONNECT_TIMEOUT, security=_security(security))
    except OSError as e:
        raise params.ParameterError(f"cannot connect to {scheduler} within {CONNECT_TIMEOUT} s: "
                                    f"{' '.join(str(e).split())[:200]}") from None
    if gpu and not any(w.get("resources", {}).get("GPU") for w in client.scheduler_info()["workers"].values()):
        client.close()
        raise params.ParameterError(f"--gpu: no worker of {scheduler or 'the LocalCluster'} has the resource GPU "
                                    "(start workers with --resources GPU=1)")
    return client


def _is_page(claim, seed, profile, overrides):
    """Whether this run is the committed notebook's: the default profile with no override but its own seed."""
    return profile == "default" and not overrides and seed == params.defaults(claim)["seed"]


def plan(claims, seeds, profile="default", overrides=None, commit=False, force=False):
    """The (claim, seed) runs that are missing or stale in the store (and, with `commit`, the seed-0 runs whose
    committed notebook is stale). Parameters are checked here, before anything runs: once per claim, since its runs
    differ only in their seeds (which `check_request` checks)."""
    todo = []
    for claim in claims:
        params.resolve(claim, profile, {**(overrides or {}), "seed": seeds[0]}, force)
        stored = store.status(claim, profile, overrides)
        for seed in seeds:
            fresh = seed in stored and stored[seed][1]
            page_stale = commit and _is_page(claim, seed, profile, overrides) and runner.latest(claim) is None
            if not fresh or page_stale:
                todo.append((claim, seed))
    return todo


# A Dask nanny sets these for its workers, in the process that starts a LocalCluster too (the thread counts to 1,
# malloc's trim threshold, a fixed hash seed), and a notebook's kernel would inherit them. A kernel runs torch on one
# thread anyway (`nbdemo.setup`), but the rest of a run by hand's environment is kept too: each task carries the
# values this process had before any cluster was made.
DASK_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_", "PYTHONHASHSEED")


def task(claim, seed, profile, overrides, commit, env, force=False):
    """One notebook run on a worker, on its kernel (`kernels.worker_kernel`), with the values `env` ({variable: value or
    None}) of `DASK_VARS` in the process that started the sweep (and NBDEMO_KERNELS); returns the run's metadata (the
    verdict, provenance, wall time), or {"failed": why} for a notebook that raised: a value, so that Dask does not
    log the worker's traceback."""
    for var, value in env.items():
        if value is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = value
    try:
        if commit and _is_page(claim, seed, profile, overrides):
            path, meta = runner.run(claim, commit=True, kernel=kernels.worker_kernel(), log=lambda *_: None)
        else:
            path, meta = runner.run(claim, profile, {**overrides, "seed": seed}, force=force, kernel=kernels.worker_kernel(),
                                    log=lambda *_: None)
    except Exception as e:  # noqa: BLE001  reported by the sweep in one line
        kernels.close_worker_kernel()  # what the failed run left in its kernel is not known: the next run gets a new one
        return {"failed": str(e) if isinstance(e, runner.NotebookFailed) else f"{type(e).__name__}: {e}"}
    return {**meta, "notebook": str(path)}


def local_workers():
    """Workers of the default LocalCluster: one per core, as each notebook's kernel runs torch on one thread of the
    CPU (`nbdemo.setup`)."""
    return _cores()


def _cluster(scheduler, workers, gpu, folder=None):
    """The LocalCluster when there is no scheduler; with `gpu`, one worker per GPU, each with the resource GPU=1;
    its workers' own files in `folder`."""
    if scheduler:
        return None
    from distributed import LocalCluster
    with kernels.signals_ignored([signal.SIGINT]):  # its worker processes keep SIGINT ignored: Ctrl-C is the sweep's
        return LocalCluster(n_workers=workers or (devices.cuda_devices() if gpu else local_workers()),
                            threads_per_worker=1, processes=True, dashboard_address=None,
                            resources={"GPU": 1} if gpu else None, local_directory=folder)


def _quiet():
    """Dask's and tornado's logs silenced, when a sweep is stopped: what its cleanup does (workers stopped mid-run,
    a client cut off mid-call) is expected, and would otherwise print screens of warnings and tracebacks."""
    for name in ("distributed", "tornado"):
        logging.getLogger(name).setLevel(logging.CRITICAL)


def _run(client, todo, profile, overrides, commit, gpu, env, log, force=False):
    """Submit the runs, store each as it finishes, print progress; return the runs that failed and those that ran
    but could not be stored, as (claim, seed, the executed notebook on its worker)."""
    from distributed import as_completed
    workers = client.scheduler_info()["workers"].values()
    log(f"sweep: {len(todo)} runs on {len(workers)} workers with {sum(w['nthreads'] for w in workers)} threads in all")
    futures = {client.submit(task, claim, seed, profile, overrides, commit, env, force, pure=False, priority=-i,
                             key=f"{claim.id}-seed{seed}-{os.urandom(4).hex()}",  # in the order given
                             resources={"GPU": 1} if gpu else None): (claim, seed)
               for i, (claim, seed) in enumerate(todo)}
    t0, done, failed, unstored = time.perf_counter(), 0, [], []
    for future in as_completed(futures):
        claim, seed = futures[future]
        done += 1
        try:
            meta = future.result()
        except Exception as e:  # its workers kept dying: report, store nothing
            meta = {"failed": str(e)}
        if "failed" in meta:  # the notebook raised
            failed.append((claim, seed))
            what = f"FAILED: {' '.join(meta['failed'].split())[:300]}"
        else:
            try:
                store.store(claim, meta, profile, overrides)
            except (OSError, store.StoreError) as e:  # not writable, disk full, damaged: the notebook stays
                unstored.append((claim, seed, meta["notebook"]))
                what = f"NOT STORED ({type(e).__name__}: {' '.join(str(e).split())}); its notebook: {meta['notebook']}"
            else:
                what = f"{meta['verdict']['outcome'] if meta['verdict'] else 'no verdict'} in {meta['wall_s']:.1f} s"
        left = (time.perf_counter() - t0) / done * (len(todo) - done)
        log(f"[{done:>{len(str(len(todo)))}}/{len(todo)}] {claim.id} seed {seed}: {what} | "
            f"{len(failed) + len(unstored)} failed | about {left / 60:.0f} min left")
    return failed, unstored


def sweep(claims, seeds, profile="default", overrides=None, *, scheduler=None, security=None, workers=None,
          commit=False, gpu=False, force=False, log=print):
    """Run what is missing or stale of claims × seeds on Dask; store each run as it finishes.

    claims: `Claim`s or their ids (an entry point: ids are looked up here, once). Returns the list of runs started,
    as (Claim, seed). workers: of the LocalCluster (default `local_workers()`); gpu: each task asks its worker for the
    resource GPU=1 (workers started with `--resources GPU=1`); force: sizes, counts and step counts over the bounds
    of `params.RULES` too; security: of a tls:// scheduler, the text of --security (CA,CERT,KEY) or a `Security`
    (a dask-jobqueue cluster's `.security`); default: Dask's config.

    Everything is checked before a cluster starts: the request (`check_request`), every run's parameters (`plan`)
    and, for the LocalCluster, the devices they name and the datasets' files, as `runner.run` checks them."""
    claims = [c if isinstance(c, Claim) else get(c) for c in claims]
    overrides = overrides or {}
    check_request(claims, seeds, scheduler, gpu, security, workers)
    todo = plan(claims, seeds, profile, overrides, commit, force)
    if not todo:
        log(f"nothing to run: {len(claims)} claims x {len(seeds)} seeds are stored and fresh in "
            f"{store.path(claims[0], profile, overrides).parent}")
        return []
    if scheduler is None:  # this machine's: a scheduler's workers check their own, each run as it starts
        fulls = [params.resolve(c, profile, overrides, force)[1] for c in dict.fromkeys(c for c, _ in todo)]
        for device in {full.get("device", "auto") for full in fulls}:
            devices.check_device(device)
        runner.ensure_data({v: v for full in fulls for v in full.values() if isinstance(v, str)})  # each dataset once
        runner.writable(runner.BUILD / "runs")
    started = history.now()
    env = {var: os.environ.get(var) for var in DASK_VARS}  # before a LocalCluster sets them
    # the LocalCluster's folder: its workers' files and its runs' kernels, removed at the end even when the workers
    # were killed mid-run
    env["NBDEMO_KERNELS"] = tempfile.mkdtemp(prefix="nbdemo-sweep-") if scheduler is None else None
    cluster, no_history = None, None
    try:
        with runner.sigterm_as_interrupt(first=_quiet):
            cluster = _cluster(scheduler, workers, gpu, env["NBDEMO_KERNELS"])
            with connect(scheduler, cluster, gpu, security) as client:
                failed, unstored = _run(client, todo, profile, overrides, commit, gpu, env, log, force)
    finally:  # also when stopped: the workers of a LocalCluster, and their kernels, go with it (a second Ctrl-C
        with kernels.signals_ignored():  # waits for it quietly)
            if cluster is not None:
                cluster.close()
            if env["NBDEMO_KERNELS"]:
                shutil.rmtree(env["NBDEMO_KERNELS"], ignore_errors=True)
            if profile in ("default", "control") and not overrides:  # the verdict's history: the store's state now
                try:
                    for claim in dict.fromkeys(c for c, _ in todo):
                        history.record(claim, started)
                except history.NoGit as e:  # the runs are stored; the history needs git
                    no_history = e
    problems = ([f"{len(failed)} of {len(todo)} runs failed: " + ", ".join(f"{c.id} seed {s}" for c, s in failed)]
                if failed else []) + \
               ([f"{len(unstored)} of {len(todo)} runs could not be stored: "
                 + ", ".join(f"{c.id} seed {s} (its notebook: {nb})" for c, s, nb in unstored)] if unstored else [])
    if problems:
        raise runner.NotebookFailed("; ".join(problems) + "; the others are stored"
                                    + (f"; the verdict's history is not recorded: {no_history}" if no_history else ""))
    if no_history:
        raise history.NoGit(f"the runs are stored, but the verdict's history is not recorded: {no_history}")
    return todo
