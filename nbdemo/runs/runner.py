"""Run one claim notebook with papermill on a kernel (`nbdemo.runs.kernels`): output paths and each run's provenance.

`run(claim, profile, overrides)` takes a `Claim` (`nbdemo.claims.registry.get`), its parameters resolved by `nbdemo.runs.params`,
and writes `build/runs/<profile>/<CLAIM>.ipynb`, with its verdict, provenance and fingerprint (`nbdemo.runs.fingerprint`)
in the notebook's metadata, through a temporary file renamed into place, so an interrupted run leaves nothing that
looks complete. A run that stops at an error keeps the notebook as executed up to that cell, as
`<CLAIM>.failed.ipynb` beside it. `notebooks/` is only written by `run(..., commit=True)`, the default profile with
no overrides.
"""
import ast
import hashlib
import json
import os
import re
import time
from pathlib import Path

from nbdemo.claims.registry import PROVENANCE_KEY, ROOT, VERDICT_KEY
from nbdemo.claims.verdict import describe
from nbdemo.ml import datacheck
from nbdemo.runs import fingerprint, lock
from nbdemo.runs.kernels import (KERNEL_ENV, NotebookFailed, Terminated, execute, shared_kernel,  # noqa: F401
                                  sigterm_as_interrupt)
from nbdemo.runs.devices import check_device
from nbdemo.runs.params import ParameterError, resolve

BUILD = Path(os.environ.get("NBDEMO_BUILD", ROOT / "build"))


# ---------------------------------------------------------------- provenance

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


# ---------------------------------------------------------------- runs and their output paths

def atomic_write(text, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


SAFE = re.compile(r"[A-Za-z0-9_.,+=\[\]-]{1,32}")  # what a folder name shows of a value: no space, /, $, newline


def run_name(profile="default", overrides=None, dry_run=False):
    """The folder name of a profile with overrides: `default`, `paper`, `default-seed=3-steps=100`, `dry-run`. So that
    a name is safe in a file system and a shell, a value that is not 1 to 32 of the characters `SAFE` allows (letters,
    digits, `_.,+=[]-`) is named by a hash of it (`init=#3f9a0c1b2d4e`), and overrides that together take more than 160
    characters by a hash of them all (`paper-#0c1b2d4e3f9a`); the executed notebook's metadata holds every value."""
    def shown(v):
        text = str(v).replace(", ", ",") if isinstance(v, list) else str(v)
        return text if SAFE.fullmatch(text) else "#" + hashlib.sha256(str(v).encode()).hexdigest()[:12]
    name = "dry-run" if dry_run else profile
    if overrides:
        tail = "-".join(f"{k}={shown(v)}" for k, v in sorted(overrides.items()))
        name += "-" + (tail if len(tail) <= 160 else "#" + hashlib.sha256(tail.encode()).hexdigest()[:12])
    return name


def writable(folder):
    """Make `folder` (under build/, which NBDEMO_BUILD may move), or refuse in one line where it cannot be made."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ParameterError(f"cannot make the folder {folder} ({e.strerror or e}): set NBDEMO_BUILD to a folder "
                             "that can be written") from None


def ensure_data(parameters):
    """`datacheck.ensure`, with what the file system refuses (a folder where a cached data file should be, a file
    that cannot be read or removed) as one line, `BadData`, rather than a traceback."""
    try:
        datacheck.ensure(parameters)
    except OSError as e:
        raise datacheck.BadData(f"{e.filename or 'a data file'}: {e.strerror or e}; move it away: a cached data "
                                "file is copied again from the system's copy") from None


def output_path(claim, profile="default", overrides=None, dry_run=False):
    """Where `run` writes a claim's executed notebook: build/runs/<run name>/<CLAIM>.ipynb."""
    return BUILD / "runs" / run_name(profile, overrides, dry_run) / f"{claim.id}.ipynb"


def run(claim, profile="default", overrides=None, *, commit=False, dry_run=False, kernel=None, force=False, log=print):
    """Execute one claim's notebook; return (path of the executed notebook, its nbdemo metadata).

    kernel: a `shared_kernel` to run on, instead of a kernel of its own; force: run sizes, counts and step counts
    over the bounds of `params.RULES` too. Every refusal comes before nbformat and papermill are imported."""
    changed, full = resolve(claim, profile, overrides, force)
    if commit and (profile != "default" or changed or dry_run):
        raise ParameterError("--commit writes notebooks/ and takes the default profile only, with no -p overrides")
    if kernel is not None and kernel.nbdemo_dry_run != dry_run:
        raise ValueError(f"this shared kernel was started with dry_run={kernel.nbdemo_dry_run}")
    check_device(full.get("device", "auto"))  # a device torch does not see here, damaged data, and an output
    if not dry_run:                            # folder that cannot be made are refused before a kernel starts
        ensure_data(full)
    built = output_path(claim, profile, changed, dry_run)
    out, failed = claim.notebook if commit else built, built.with_suffix(".failed.ipynb")
    writable(built.parent)
    import nbformat
    from papermill.exceptions import PapermillExecutionError
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.running.ipynb")
    for var, value in KERNEL_ENV.items():
        os.environ.setdefault(var, value)
    env_before = os.environ.get("NBDEMO_DRY_RUN")
    os.environ["NBDEMO_DRY_RUN"] = "1" if dry_run else "0"
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.perf_counter()
    try:
        with sigterm_as_interrupt():
            try:
                execute(str(claim.notebook), str(tmp), changed, str(claim.notebook.parent), kernel)
            except PapermillExecutionError as e:  # papermill has saved the notebook up to the failing cell
                atomic_write(tmp.read_text(), failed)
                raise NotebookFailed(f"{claim.id} stopped at cell In [{e.exec_count}] with {e.ename}: {e.evalue}\n"
                                     f"the notebook as executed up to there: {_shown(failed)}") from e
            nb = nbformat.read(tmp, as_version=4)
            prov = glued(nb, PROVENANCE_KEY)
            meta = {"claim": claim.id, "profile": profile, "overrides": changed, "parameters": full,
                    "dry_run": dry_run, "commit": fingerprint.git_commit(claim), "started": started,
                    "wall_s": round(time.perf_counter() - t0, 1), "fingerprint": fingerprint.of(claim, full),
                    "provenance": prov and {**prov, "cpu": cpu_model(), **lock.provenance()},
                    "verdict": glued(nb, VERDICT_KEY)}
            nb.metadata["nbdemo"] = meta
            for field in ("input_path", "output_path"):  # paths of this machine (the committed page is public)
                nb.metadata.get("papermill", {}).pop(field, None)
            atomic_write(nbformat.writes(nb), out)
            failed.unlink(missing_ok=True)
    finally:
        tmp.unlink(missing_ok=True)
        if env_before is None:
            os.environ.pop("NBDEMO_DRY_RUN", None)
        else:
            os.environ["NBDEMO_DRY_RUN"] = env_before
    log(f"{claim.id} [{profile}{' dry run' if dry_run else ''}] {meta['wall_s']:.1f} s  "
        f"verdict: {verdict_text(meta['verdict'])}  -> {_shown(out)}")
    return out, meta


def cpu_model():
    """The processor and the instruction set torch's CPU kernels use on it ("AMD EPYC, AVX512"): the last digits of
    a run may differ between processors even with the same torch and thread count."""
    import torch
    try:
        name = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name"))
    except (OSError, StopIteration):
        import platform
        name = platform.processor() or "unknown"
    return f"{name}, {torch.backends.cpu.get_cpu_capability()}"


def _shown(path):
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def verdict_text(verdict):
    return describe(verdict["rows"]) if verdict else "no verdict recorded"


def latest(claim, profile="default"):
    """The up-to-date executed notebook of a claim for a profile (committed, else built), or None if stale."""
    import nbformat
    _, full = resolve(claim, profile)
    want = fingerprint.of(claim, full)
    for path in ([claim.notebook] if profile == "default" else []) + [output_path(claim, profile)]:
        try:
            meta = summary(nbformat.read(path, as_version=4))
        except (OSError, ValueError, nbformat.ValidationError):  # missing, truncated or corrupted: run again
            continue
        if meta and meta.get("fingerprint") == want and meta.get("profile") == profile:
            return path, meta
    return None
