"""The kernels that run claim notebooks: their sockets and environment, signals, a kernel shared by many runs and
the reset that makes each run on it start as in a fresh kernel, and the one kernel of each sweep worker."""
import atexit
import contextlib
import os
import signal
import tempfile
import threading

from nbdemo.claims.registry import NOTEBOOKS


class NotebookFailed(RuntimeError):
    """A cell of the notebook raised an error (missing data, no CUDA device, ...)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (a closed terminal), unwinding like Ctrl-C; args[0] is the signal's number (the command
    then exits 128 + it: 143, 129), not 130."""


STOPS = (signal.SIGTERM, signal.SIGHUP)  # handled as SIGTERM: unwind and clean up


@contextlib.contextmanager
def sigterm_as_interrupt(first=None):
    """SIGTERM and SIGHUP unwind like Ctrl-C, so temporary files are removed and the kernel is shut down; with
    `first`, a function, Ctrl-C too, and each calls it before it unwinds. Only the main thread can install a
    handler: in a Dask worker, which runs tasks in threads, the worker handles its signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(signum, _):
        if first:
            first()
        raise Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt
    old = {sig: signal.signal(sig, raise_interrupt) for sig in STOPS + ((signal.SIGINT,) if first else ())}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def signals_ignored(signals=(signal.SIGINT, *STOPS)):
    """Ctrl-C, SIGTERM and SIGHUP ignored for a while: during the cleanup after an interrupt, so that a second
    Ctrl-C neither breaks it off nor prints a traceback; and while a sweep's LocalCluster starts its worker
    processes, which keep SIGINT ignored (Python keeps an ignored SIGINT), so that Ctrl-C reaches only the sweep,
    which stops them itself. In the main thread only (elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)


def kernel_manager():
    """A kernel manager that talks over Unix sockets in a private folder, not over open TCP ports, with its
    connection file (which holds the kernel's key) in that folder too; returns it and the folder (a
    TemporaryDirectory to clean up). The folder is made in $NBDEMO_KERNELS when it is set: a sweep's LocalCluster
    points it at one folder that the sweep removes at its end, also when its workers were killed mid-run."""
    from jupyter_client.manager import KernelManager
    sockets = tempfile.TemporaryDirectory(prefix="nbdemo-kernel-", dir=os.environ.get("NBDEMO_KERNELS") or None)
    if len(f"{sockets.name}/kernel-1".encode()) > 107:  # the longest path of a Unix socket
        sockets.cleanup()
        raise NotebookFailed(f"the kernel's sockets would be in {sockets.name}, a path too long for a Unix socket; "
                             "set TMPDIR to a shorter folder")
    km = KernelManager(kernel_name="python3", transport="ipc", ip=f"{sockets.name}/kernel",
                       connection_file=f"{sockets.name}/kernel.json")
    # no IPython history database: kernels running at once collide in it ("ERROR! Session/line number was not unique")
    km.kernel_spec.argv.append("--HistoryManager.enabled=False")
    return km, sockets


# The environment of every kernel, where the user has not set these:
# - OpenMP threads that sleep at barriers instead of spinning: on a small shared machine a spinning thread holds the
#   core its partner needs, and torch runs many times slower (same numbers either way).
# - torch's CPU kernels, and oneDNN's (convolutions), at AVX2 on every processor: with AVX-512 kernels the same seed
#   gives other last digits (TFD-7 and TFD-5 flip rows; PFC-4's conv ResNet another run), so the committed
#   notebooks, made with AVX2, would not reproduce under nbval where the processor has AVX-512. A processor without
#   AVX2 still runs its own best kernels.
KERNEL_ENV = {"OMP_WAIT_POLICY": "PASSIVE", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


@contextlib.contextmanager
def shared_kernel(dry_run=False):
    """One kernel for many runs, e.g. the dry runs of every paper profile: torch and nbdemo are imported once, and
    each notebook starts from an empty namespace (`%reset -f`). Runs on it share its dry-run setting."""
    km, sockets = kernel_manager()
    km.start_kernel(env={**KERNEL_ENV, **os.environ, "NBDEMO_DRY_RUN": "1" if dry_run else "0"}, cwd=str(NOTEBOOKS))
    km.nbdemo_dry_run = dry_run
    try:
        yield km
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        sockets.cleanup()


# What a run on a shared kernel starts from: as in a fresh kernel, an empty namespace, no figure, the caches of
# nbdemo's modules empty (loaded data included) and cell numbers from 1; only the imported modules stay.
RESET = """
%reset -f
import sys as _sys, matplotlib.pyplot as _plt
_plt.close("all")
for _m in [m for n, m in list(_sys.modules.items()) if n == "nbdemo" or n.startswith("nbdemo.")]:
    for _f in list(vars(_m).values()):
        if callable(getattr(_f, "cache_clear", None)):
            _f.cache_clear()
%reset -f
__import__("gc").collect()
get_ipython().execution_count = 1
"""


def reset(km):
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        reply = kc.execute_interactive(RESET, store_history=False, timeout=60)
        if reply["content"]["status"] != "ok":
            raise NotebookFailed(f"the shared kernel could not be reset: {reply['content'].get('evalue')}")
    finally:
        kc.stop_channels()


def execute(notebook, out, parameters, cwd, km=None):
    """papermill in a worker thread, on a kernel this thread starts and stops (or on `km`, a shared kernel, which
    it resets first and leaves running).

    In the main thread nbclient takes SIGINT and SIGTERM for its own kernel cleanup, which can leave the kernel
    training and the run waiting for good. Here they reach the main thread as KeyboardInterrupt: it kills the
    kernel, lets the worker unwind and re-raises."""
    import papermill

    own, failed = km is None, []
    if own:
        km, sockets = kernel_manager()
    else:
        reset(km)

    def work():
        try:
            papermill.execute_notebook(notebook, out, parameters=parameters, cwd=cwd, progress_bar=False,
                                       kernel_name="python3", request_save_on_cell_execute=False, km=km)
        except BaseException as e:  # handed to the main thread
            failed.append(e)

    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    interrupted = True
    try:
        while worker.is_alive():
            worker.join(0.2)
        interrupted = False
    finally:
        if (own or interrupted) and km.has_kernel:
            km.shutdown_kernel(now=True)
        worker.join(30)
        if own:
            sockets.cleanup()
    if failed:
        raise failed[0]


KERNEL_RUNS = 25  # runs on one worker's kernel before a new one starts (what a long-lived kernel may hold on to)
_kernel = {}      # this worker process's kernel: "km", its ExitStack "stack", "runs" made on it


def close_worker_kernel():
    if _kernel:
        _kernel.pop("stack").close()
        _kernel.clear()


atexit.register(close_worker_kernel)


def worker_kernel():
    """The kernel this worker process runs its notebooks on, one after the other (`shared_kernel`): torch,
    nbdemo and matplotlib are imported once per kernel, not once per run (10 of MLI-9's 20 s, 12 of PFC-6's 33 s),
    and each run starts as in a fresh kernel (`RESET`). A new kernel after `KERNEL_RUNS` runs, or when the
    last one died or its run failed; it goes with the worker process (ipykernel exits when its parent does)."""
    if _kernel and (_kernel["runs"] >= KERNEL_RUNS or not _kernel["km"].is_alive()):
        close_worker_kernel()
    if not _kernel:
        stack = contextlib.ExitStack()
        _kernel.update(km=stack.enter_context(shared_kernel()), stack=stack, runs=0)
    _kernel["runs"] += 1
    return _kernel["km"]
