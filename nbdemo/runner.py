"""Run claim notebooks with papermill: parameters, profiles, validation, provenance and the results cache.

A run writes `build/runs/<profile>/<CLAIM>.ipynb`, with its verdict and provenance in the notebook's metadata,
through a temporary file renamed into place, so an interrupted run leaves nothing that looks complete. A run that
stops at an error keeps the notebook as executed up to that cell, as `<CLAIM>.failed.ipynb` beside it.
`notebooks/` is only written by `run(..., commit=True)`, the default profile with no overrides.
"""
import ast
import hashlib
import json
import math
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import nbformat
import yaml

from . import __version__
from .claims import PROVENANCE_KEY, ROOT, VERDICT_KEY, describe, get
from .data import DATASETS
from .train import PRECISIONS

BUILD = Path(os.environ.get("NBDEMO_BUILD", ROOT / "build"))
PROFILES = Path(__file__).parent / "profiles"


class ParameterError(ValueError):
    """A parameter that the notebook does not have, of the wrong type, or with an impossible value."""


class NotebookFailed(RuntimeError):
    """A cell of the notebook raised an error (missing data, no CUDA device, ...)."""


# ---------------------------------------------------------------- parameters and profiles

def defaults(claim):
    """The notebook's parameters cell (its default profile), as {name: literal}."""
    nb = nbformat.read(get(claim).notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ParameterError(f"{claim}: the notebook needs exactly one cell tagged 'parameters'")
    values = {}
    for node in ast.parse(cells[0].source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ParameterError(f"{claim}: the parameters cell may only hold `name = literal` lines")
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


# Keys of a profile file that are texts, not profiles: what the `control` profile is and why it must fail the checks,
# or why the claim has no control (see nbdemo.evidence).
CONTROL_TEXTS = ("control about", "no control")


def profile_file(claim):
    """The mapping in nbdemo/profiles/<CLAIM>.yml ({} when there is none)."""
    path = PROFILES / f"{get(claim).id}.yml"
    try:
        named = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    except yaml.YAMLError as e:
        raise ParameterError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(named, dict):
        raise ParameterError(f"{path}: a profile file is a mapping of profile names to overrides")
    return named


def profiles(claim):
    """Named profiles of overrides from nbdemo/profiles/<CLAIM>.yml; "default" is the parameters cell itself."""
    path = PROFILES / f"{get(claim).id}.yml"
    named = {k: v for k, v in profile_file(claim).items() if k not in CONTROL_TEXTS}
    bad = [k for k, v in named.items() if not isinstance(v, dict)]
    if bad:
        raise ParameterError(f"{path}: a profile is a mapping of parameter names to values; "
                             f"{', '.join(map(str, bad))} is not")
    return {"default": {}, **named}


def _positive(v):
    return v > 0


RULES = {  # parameter name -> (test, what is allowed)
    "steps": (lambda v: v >= 0, "an integer >= 0"),
    "epochs": (lambda v: v >= 0, "an integer >= 0"),
    "width": (_positive, "a positive integer"),
    "depth": (_positive, "a positive integer"),
    "blocks": (_positive, "a positive integer"),
    "batch_size": (_positive, "a positive integer"),
    "lr": (_positive, "a number > 0"),
    "gamma": (_positive, "a number > 0 (the init variance factor)"),
    "beta": (_positive, "a number > 0 (the init output scale)"),
    "momentum": (lambda v: 0 <= v < 1, "a number in [0, 1)"),
    "weight_decay": (lambda v: v >= 0, "a number >= 0"),
    "seed": (lambda v: v >= 0, "an integer >= 0"),
    "seeds": (lambda v: len(v) > 0 and all(isinstance(s, int) and s >= 0 for s in v), "a non-empty list of integers >= 0"),
    "dataset": (lambda v: v in DATASETS, f"one of {sorted(DATASETS)}"),
    "precision": (lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
    "device": (lambda v: re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", v) is not None, "auto, cpu, cuda, cuda:N or mps"),
}


def _coerce(name, value, default):
    """Parse a command-line string as YAML and check it against the type of the default value."""
    if isinstance(value, str) and not isinstance(default, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ParameterError(f"parameter {name!r}: cannot read {value!r} as a value") from None
    if isinstance(default, float) and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if default is None:
        return value
    want = type(default)
    ok = isinstance(value, want) and not (isinstance(value, bool) and want is not bool)
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ParameterError(f"parameter {name!r} must be {want.__name__} (default {default!r}), got {value!r}")
    if not _finite(value):
        raise ParameterError(f"parameter {name!r} = {value!r} is impossible: a number must be finite")
    return value


def _finite(value):
    """No NaN or infinity anywhere in a value (numbers inside lists too)."""
    if isinstance(value, (list, tuple)):
        return all(map(_finite, value))
    return not isinstance(value, float) or math.isfinite(value)


def validate(claim, overrides):
    """Check override names, types and values against the notebook's parameters; return the full parameter dict."""
    params = defaults(claim)
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise ParameterError(f"{claim} has no parameter {', '.join(map(repr, unknown))}; "
                             f"its parameters are: {', '.join(sorted(params))}")
    for name, value in overrides.items():
        params[name] = _coerce(name, value, params[name])
    for name, value in params.items():
        test, allowed = RULES.get(name) or ((_positive, "a positive integer") if name.startswith("n_") else (None, ""))
        if test and not test(value):
            raise ParameterError(f"parameter {name!r} = {value!r} is impossible: it must be {allowed}")
    if "classes" in params and "dataset" in params and isinstance(params["classes"], list):
        k = DATASETS[params["dataset"]][1]
        if len(params["classes"]) > k or not all(isinstance(c, int) and 0 <= c < k for c in params["classes"]):
            raise ParameterError(f"parameter 'classes' = {params['classes']} does not fit {params['dataset']}, "
                                 f"which has classes 0..{k - 1}")
    return params


def resolve(claim, profile="default", overrides=None):
    """Profile overrides, then command-line overrides, validated. Returns (changed parameters, all parameters)."""
    named = profiles(claim)
    if profile not in named:
        raise ParameterError(f"{claim} has no profile {profile!r}; its profiles are: {', '.join(named)}")
    changed = {**named[profile], **(overrides or {})}
    full = validate(claim, changed)
    return {k: full[k] for k in changed}, full


# ---------------------------------------------------------------- fingerprints and provenance

PACKAGE = Path(__file__).resolve().parent


def _code(claim):
    nb = nbformat.read(get(claim).notebook, as_version=4)
    return [cell.source for cell in nb.cells if cell.cell_type == "code"]


def _imported(source, package):
    """Dotted names a piece of code imports, anywhere in it (lazy imports inside functions too); relative imports
    are resolved against `package`, the package the code belongs to."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics: read its plain Python lines
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)  # `from nbdemo import data` names a module


def _source_file(module):
    """The file of an nbdemo module (its .py, or its package's __init__.py), or None for anything else."""
    parts = module.split(".")
    if parts[0] != "nbdemo":
        return None
    path = PACKAGE.joinpath(*parts[1:])
    return next((f for f in (path.with_suffix(".py"), path / "__init__.py") if f.is_file()), None)


def dependencies(claim):
    """The package's source files that a claim's notebook runs: what its code cells import, transitively, with the
    __init__.py of every package on the way. Editing any other module leaves the claim's results fresh."""
    todo, seen = [name for source in _code(claim) for name in _imported(source, "")], set()
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            path = _source_file(module)
            if path and path not in seen:
                seen.add(path)
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                todo += _imported(path.read_text(), package)
    return sorted(seen)


def fingerprint(claim, params):
    """Hash of what a run's outputs depend on: the notebook's code cells, the package modules they import
    (transitively, see `dependencies`) and the parameters. Prose can be edited without making results stale."""
    h = hashlib.sha256()
    for source in _code(claim):
        h.update(source.encode())
    for path in dependencies(claim):
        h.update(str(path.relative_to(PACKAGE)).encode() + path.read_bytes())
    h.update(json.dumps(params, sort_keys=True).encode())
    return h.hexdigest()[:16]


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def git_commit(claim):
    """The commit whose code made a run: HEAD, with "+dirty" when something the run depends on differs from HEAD's
    version (the notebook's code cells, a package module it imports). Outputs and prose of notebooks do not count,
    nor files of other claims, so a sweep that writes the committed notebooks leaves the next runs clean."""
    try:
        sha = _git("rev-parse", "--short", "HEAD").strip()
        changed = _git("status", "--porcelain", "--", *map(str, dependencies(claim))).strip()
        try:
            committed = nbformat.reads(_git("show", f"HEAD:{get(claim).notebook.relative_to(ROOT)}"), as_version=4)
            same = [c.source for c in committed.cells if c.cell_type == "code"] == _code(claim)
        except subprocess.CalledProcessError:  # not in HEAD
            same = False
        return sha + ("" if same and not changed else "+dirty")
    except (OSError, subprocess.CalledProcessError):
        return f"nbdemo {__version__} (no git)"


def glued(nb, key):
    """The JSON value a notebook stored with `claims._glue(key, ...)`, or None."""
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("metadata", {}).get("scrapbook", {}).get("name") == key:
                return json.loads(ast.literal_eval(out["data"]["application/papermill.record/text/plain"]))
    return None


def summary(nb):
    """What the dashboard and `nbdemo list` show of an executed notebook (its nbdemo metadata)."""
    return nb.metadata.get("nbdemo")


# ---------------------------------------------------------------- running

@contextmanager
def sigterm_as_interrupt():
    """SIGTERM unwinds like Ctrl-C, so temporary files are removed and the kernel is shut down. Only the main
    thread can install a handler: in a Dask worker, which runs tasks in threads, the worker handles its signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_interrupt(*_):
        raise KeyboardInterrupt
    old = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _kernel_manager():
    """A kernel manager that talks over Unix sockets in a private folder, not over open TCP ports; returns it and
    the folder (a TemporaryDirectory to clean up)."""
    from jupyter_client.manager import KernelManager
    sockets = tempfile.TemporaryDirectory(prefix="nbdemo-kernel-")
    return KernelManager(kernel_name="python3", transport="ipc", ip=f"{sockets.name}/kernel"), sockets


@contextmanager
def shared_kernel(dry_run=False):
    """One kernel for many runs, e.g. the dry runs of every paper profile: torch and nbdemo are imported once, and
    each notebook starts from an empty namespace (`%reset -f`). Runs on it share its dry-run setting."""
    km, sockets = _kernel_manager()
    km.start_kernel(env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
                         "NBDEMO_DRY_RUN": "1" if dry_run else "0"})
    km.nbdemo_dry_run = dry_run
    try:
        yield km
    finally:
        if km.has_kernel:
            km.shutdown_kernel(now=True)
        sockets.cleanup()


def _reset(km):
    kc = km.client()
    kc.start_channels()
    try:
        kc.wait_for_ready(timeout=60)
        kc.execute_interactive("%reset -f", timeout=60)
    finally:
        kc.stop_channels()


def _execute(notebook, out, parameters, cwd, km=None):
    """papermill in a worker thread, on a kernel this thread starts and stops (or on `km`, a shared kernel, which
    it resets first and leaves running).

    In the main thread nbclient takes SIGINT and SIGTERM for its own kernel cleanup, which can leave the kernel
    training and the run waiting for good. Here they reach the main thread as KeyboardInterrupt: it kills the
    kernel, lets the worker unwind and re-raises."""
    import papermill

    own, failed = km is None, []
    if own:
        km, sockets = _kernel_manager()
    else:
        _reset(km)

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


def atomic_write(text, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def run_name(profile="default", overrides=None, dry_run=False):
    """The folder name of a profile with overrides: `default`, `paper`, `default-seed=3-steps=100`, `dry-run`."""
    name = "dry-run" if dry_run else profile
    if overrides:
        name += "-" + "-".join(f"{k}={v}" for k, v in sorted(overrides.items())).replace("/", "_").replace(" ", "")
    return name


def output_path(claim, profile="default", overrides=None, dry_run=False):
    return BUILD / "runs" / run_name(profile, overrides, dry_run) / f"{get(claim).id}.ipynb"


def run(claim, profile="default", overrides=None, *, commit=False, dry_run=False, kernel=None, log=print):
    """Execute one claim notebook; return (path of the executed notebook, its nbdemo metadata).

    kernel: a `shared_kernel` to run on, instead of a kernel of its own."""
    from papermill.exceptions import PapermillExecutionError
    claim = get(claim).id
    changed, full = resolve(claim, profile, overrides)
    if commit and (profile != "default" or changed or dry_run):
        raise ParameterError("--commit writes notebooks/ and takes the default profile only, with no -p overrides")
    if kernel is not None and kernel.nbdemo_dry_run != dry_run:
        raise ValueError(f"this shared kernel was started with dry_run={kernel.nbdemo_dry_run}")
    built = output_path(claim, profile, changed, dry_run)
    out, failed = get(claim).notebook if commit else built, built.with_suffix(".failed.ipynb")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.running.ipynb")
    # OpenMP threads that sleep at barriers instead of spinning: on a small shared machine a spinning thread
    # holds the core its partner needs, and torch runs many times slower (same numbers either way).
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    env_before = os.environ.get("NBDEMO_DRY_RUN")
    os.environ["NBDEMO_DRY_RUN"] = "1" if dry_run else "0"
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.perf_counter()
    try:
        with sigterm_as_interrupt():
            try:
                _execute(str(get(claim).notebook), str(tmp), changed, str(get(claim).notebook.parent), kernel)
            except PapermillExecutionError as e:  # papermill has saved the notebook up to the failing cell
                atomic_write(tmp.read_text(), failed)
                raise NotebookFailed(f"{claim} stopped at cell In [{e.exec_count}] with {e.ename}: {e.evalue}\n"
                                     f"the notebook as executed up to there: {_shown(failed)}") from e
            nb = nbformat.read(tmp, as_version=4)
            meta = {"claim": claim, "profile": profile, "overrides": changed, "parameters": full,
                    "dry_run": dry_run, "commit": git_commit(claim), "started": started,
                    "wall_s": round(time.perf_counter() - t0, 1), "fingerprint": fingerprint(claim, full),
                    "provenance": glued(nb, PROVENANCE_KEY), "verdict": glued(nb, VERDICT_KEY)}
            nb.metadata["nbdemo"] = meta
            atomic_write(nbformat.writes(nb), out)
            failed.unlink(missing_ok=True)
    finally:
        tmp.unlink(missing_ok=True)
        if env_before is None:
            os.environ.pop("NBDEMO_DRY_RUN", None)
        else:
            os.environ["NBDEMO_DRY_RUN"] = env_before
    log(f"{claim} [{profile}{' dry run' if dry_run else ''}] {meta['wall_s']:.1f} s  "
        f"verdict: {verdict_text(meta['verdict'])}  -> {_shown(out)}")
    return out, meta


def _shown(path):
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def verdict_text(verdict):
    return describe(verdict["rows"]) if verdict else "no verdict recorded"


def latest(claim, profile="default"):
    """The up-to-date executed notebook of a claim for a profile (committed, else built), or None if stale."""
    claim = get(claim).id
    _, full = resolve(claim, profile)
    want = fingerprint(claim, full)
    for path in ([get(claim).notebook] if profile == "default" else []) + [output_path(claim, profile)]:
        try:
            meta = summary(nbformat.read(path, as_version=4))
        except (OSError, ValueError, nbformat.ValidationError):  # missing, truncated or corrupted: run again
            continue
        if meta and meta.get("fingerprint") == want and meta.get("profile") == profile:
            return path, meta
    return None
