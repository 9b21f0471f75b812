"""The committed results store: the runs of each claim over seeds, each checked when it is read.

Every function takes a `Claim` (`nbdemo.claims.registry.get`), not its id.

`results/<run name>/<CLAIM>.json` (run name as in `runner.run_name`: `default`, `paper`, `default-steps=100`) holds
{"claim", "profile", "overrides", "runs": {seed: record}}, one record per seed: its outcome, every verdict row, the
fingerprint of what it depended on, its wall time and provenance. A sweep's client writes it, one finished run at a
time, through a temporary file renamed into place, so a file is always whole and a seed is never stored twice; the
read-modify-write holds a lock (`.<CLAIM>.json.lock` beside the file), so sweeps of one claim that run at once, from
two terminals or two machines sharing the checkout, keep every record. A file is checked when it is read (`load`); a damaged
one raises `StoreError`, one line naming the file and what is wrong, and is never written over. Executed notebooks of other profiles (a paper profile run on a GPU) sit beside it as `<CLAIM>.ipynb`.
"""
import json
import math
import os
import re
from pathlib import Path

from filelock import FileLock

from nbdemo.claims.registry import ROOT
from nbdemo.claims.verdict import OUTCOMES
from nbdemo.runs import fingerprint, params, runner

RESULTS = Path(os.environ.get("NBDEMO_RESULTS", ROOT / "results"))
REPAIR = "restore it with `git checkout -- results/` or move it away and sweep again"



def path(claim, profile="default", overrides=None):
    return RESULTS / runner.run_name(profile, overrides) / f"{claim.id}.json"


class StoreError(ValueError):
    """A results file that cannot be read or is not what `store` writes; the message names the file and the fault."""


def _finite(x):
    """No NaN or infinity among the numbers of a record (`verdict` stores them as the strings 'inf' and 'nan')."""
    if isinstance(x, float):
        return math.isfinite(x)
    if isinstance(x, dict):
        return all(map(_finite, x.values()))
    return all(map(_finite, x)) if isinstance(x, list) else True


def _fault(run):
    """What is wrong with one stored record, or None."""
    if not isinstance(run, dict):
        return "not a mapping"
    if not isinstance(run.get("fingerprint"), str):
        return "no fingerprint"
    if run.get("outcome") is not None and run.get("outcome") not in OUTCOMES:
        return f"outcome {run.get('outcome')!r} is not one of {', '.join(OUTCOMES)} or null"
    if not isinstance(run.get("rows"), list) or not all(isinstance(r, dict) for r in run["rows"]):
        return "rows is not a list of mappings"
    bad = [r for r in run["rows"] if r.get("ok") is not None and not isinstance(r.get("ok"), bool)]
    if bad:
        return f"row {bad[0].get('name')!r}: ok is {bad[0]['ok']!r}, not true, false or null"
    if not _finite(run):
        return "a number is not finite (NaN or infinity)"
    return None


def _check(body, claim):
    """The faults of a file's content, as a text, or None."""
    if not isinstance(body, dict) or "runs" not in body:
        return "is not a mapping with 'runs'"
    if body.get("claim", claim.id) != claim.id:
        return f"holds claim {body['claim']!r}, not {claim.id}"
    if not isinstance(body["runs"], dict):
        return "'runs' is not a mapping of seeds to records"
    for key, run in body["runs"].items():
        if not re.fullmatch(r"0|[1-9][0-9]*", key):
            return f"seed key {key!r} is not an integer >= 0 written plainly"
        if fault := _fault(run):
            return f"seed {key}: {fault}"
    return None


def load(claim, profile="default", overrides=None):
    """The stored runs of a claim, {seed: record}; empty when none are stored. A file that cannot be read or is
    damaged raises `StoreError`, one line naming it and what is wrong."""
    file = path(claim, profile, overrides)
    try:
        text = file.read_text()
    except FileNotFoundError:
        return {}
    except NotADirectoryError:
        folder = next(p for p in reversed(file.parents) if p.exists() and not p.is_dir())
        raise StoreError(f"{folder} is not a folder; move it away") from None
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"{file} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise StoreError(f"{file} is empty; {REPAIR}")
    try:
        body = json.loads(text)
    except json.JSONDecodeError as e:
        raise StoreError(f"{file} is not valid JSON ({e.msg}: line {e.lineno} column {e.colno}); {REPAIR}") from None
    if fault := _check(body, claim):
        raise StoreError(f"{file}: {fault}; {REPAIR}")
    return {int(s): r for s, r in body["runs"].items()}


def record(meta):
    """What is stored of one finished run (`runner.run`'s metadata)."""
    verdict = meta["verdict"] or {"outcome": None, "rows": []}
    return {"seed": meta["parameters"]["seed"], "outcome": verdict["outcome"], "rows": verdict["rows"],
            **{k: meta[k] for k in ("fingerprint", "wall_s", "commit", "started", "provenance")}}


def store(claim, meta, profile="default", overrides=None):
    """Add one finished run of a claim to its file, atomically, under the file's lock (a sweep's client calls this)."""
    file = path(claim, profile, overrides)
    file.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(file.with_name(f".{file.name}.lock")):
        runs = load(claim, profile, overrides)
        rec = record(meta)
        runs[rec["seed"]] = rec
        body = {"claim": claim.id, "profile": profile,
                "overrides": {k: v for k, v in meta["overrides"].items() if k != "seed"},
                "runs": {str(s): runs[s] for s in sorted(runs)}}
        runner.atomic_write(json.dumps(body, indent=1, ensure_ascii=False) + "\n", file)


def expected_fingerprint(claim, seed, profile="default", overrides=None):
    _, full = params.resolve(claim, profile, {**(overrides or {}), "seed": seed})
    return fingerprint.of(claim, full)


def status(claim, profile="default", overrides=None):
    """{seed: (record, fresh)} for every stored run of a claim; fresh means its fingerprint is today's."""
    return {s: (r, r["fingerprint"] == expected_fingerprint(claim, s, profile, overrides))
            for s, r in load(claim, profile, overrides).items()}


def executed(claim, profile):
    """A committed executed notebook of a non-default profile (e.g. a paper profile run on a GPU), or None."""
    nb = RESULTS / profile / f"{claim.id}.ipynb"
    return nb if nb.exists() else None
