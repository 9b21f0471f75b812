"""The committed results store: the runs of each claim over seeds, each checked when it is read.

Every function takes a `Claim` (`nbdemo.claims.registry.get`), not its id.

`results/<run name>/<CLAIM>.json` (run name as in `runner.run_name`: `default`, `paper`, `default-steps=100`) holds
{"claim", "profile", "overrides", "runs": {seed: record}}, one record per seed: its outcome, every verdict row, the
fingerprint of what it depended on, its wall time and provenance. A sweep's client writes it, one finished run at a
time, through a temporary file renamed into place, so a file is always whole and a seed is never stored twice; the
read-modify-write holds a lock (`.<CLAIM>.json.lock` beside the file), so sweeps of one claim that run at once, from
two terminals or two machines sharing the checkout, keep every record. A file is checked when it is read (`load`):
its size, its number of runs and its nesting first, then the type and range of every field that the code reads (of
the file, each record and each verdict row). A damaged one raises `StoreError`, one line naming the file and what is
wrong, and is never written over. Executed notebooks of other profiles (a paper profile run on a GPU) sit beside it
as `<CLAIM>.ipynb`.
"""
import json
import math
import os
import re
from pathlib import Path

from filelock import FileLock

from nbdemo.claims.registry import ROOT
from nbdemo.claims.verdict import KINDS, OPS, OUTCOMES, holds, numbers, outcome
from nbdemo.runs import fingerprint, params, runner, safe
from nbdemo.runs.params import short

RESULTS = Path(os.environ.get("NBDEMO_RESULTS", ROOT / "results"))
REPAIR = "restore it with `git checkout -- results/` or move it away and sweep again"
# What a file may hold: at most MAX_RUNS runs (what one sweep may run), MAX_BYTES in all (1,000 records of 32 KB; the
# largest stored record takes 9 KB), nested at most MAX_DEPTH levels deep (the deepest value of a record, a number
# of a row's `inner`, is at level 9 of its file).
MAX_RUNS, MAX_BYTES, MAX_DEPTH = 1000, 32 * 2 ** 20, 12
SEED_KEY = re.compile(r"0|[1-9][0-9]{0,9}", re.ASCII)  # and < 2**32, as `params.RULES["seed"]`
FINGERPRINT = re.compile(r"[0-9a-f]{16}", re.ASCII)
NUMBER_TEXTS = ("inf", "-inf", "nan")  # how `verdict.encode` stores the numbers that JSON has no literal for


def path(claim, profile="default", overrides=None):
    return RESULTS / runner.run_name(profile, overrides) / f"{claim.id}.json"


class StoreError(ValueError):
    """A results file that cannot be read or is not what `store` writes; the message names the file and the fault."""


def _plain(tree, depth=1):
    """What is wrong with a part of a parsed file, at `depth` in it, as a tree: nested deeper than MAX_DEPTH, or a
    NaN or infinity (JSON's non-standard literals); None if nothing. Walked without recursion."""
    todo = [(tree, depth)]
    while todo:
        x, depth = todo.pop()
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(x, float) and not math.isfinite(x):
            return "a number is not finite (NaN or infinity)"
        if isinstance(x, (dict, list)):
            todo += [(v, depth + 1) for v in (x.values() if isinstance(x, dict) else x)]
    return None


def _number(x):
    """A stored number: finite (JSON) or one of the texts of inf and NaN."""
    return (isinstance(x, (int, float)) and not isinstance(x, bool)) or x in NUMBER_TEXTS


def _statistic(x):
    """One stored number or a non-empty list of them (`verdict._stored`)."""
    return _number(x) or (isinstance(x, list) and len(x) > 0 and all(map(_number, x)))


def _text(x):
    return isinstance(x, str)


def _source_fault(src):
    if not isinstance(src, dict) or src.get("from") not in ("paper", "ours"):
        return f"source {short(src)} is not paper(...) or ours(...)"
    if src["from"] == "paper" and not (_text(src.get("where")) and (
            "line" not in src or (isinstance(src["line"], int) and not isinstance(src["line"], bool)
                                  and src["line"] >= 1))):
        return "source: paper(...) needs 'where' as a text and 'line', if any, as an integer >= 1"
    if src["from"] == "ours" and not (_text(src.get("why")) and src["why"].strip()):
        return "source: ours(...) needs 'why' as a text"
    return None


def _row_fault(row):
    """What is wrong with one stored verdict row (`verdict.Verdict` writes them), or None."""
    if not isinstance(row, dict):
        return "is not a mapping"
    if not (_text(row.get("name")) and row["name"]):
        return f"name {short(row.get('name'))} is not a text"
    if row.get("kind") not in KINDS:
        return f"kind {short(row.get('kind'))} is not one of {', '.join(KINDS)}"
    for field in ("expected", "measured"):
        if not _text(row.get(field)):
            return f"{field} {short(row.get(field))} is not a text"
    if row.get("reported") is not None and not _text(row["reported"]):
        return f"reported {short(row['reported'])} is not a text or null"
    if row["kind"] == "note":
        if any(row.get(f) is not None for f in ("ok", "op", "threshold", "source")) or "inner" in row:
            return "a note has no ok, op, threshold, source or inner"
        if row.get("value") is not None and not _statistic(row["value"]):
            return f"value {short(row['value'])} is not a number, a list of numbers or null"
        return None
    if not isinstance(row.get("ok"), bool):
        return f"ok is {short(row.get('ok'))}, not true or false"
    if row.get("op") not in OPS:
        return f"op {short(row.get('op'))} is not one of {' '.join(OPS)}"
    if not _statistic(row.get("value")):
        return f"value {short(row.get('value'))} is not a number or a list of numbers"
    n, t = len(row["value"]) if isinstance(row["value"], list) else 1, row.get("threshold")
    if not (_number(t) or (isinstance(t, list) and len(t) in (1, n) and all(map(_number, t)))):
        return f"threshold {short(t)} is not a number or a list of one number or of one per value"
    if fault := _source_fault(row.get("source")):
        return fault
    inner = row.get("inner", {})
    if not isinstance(inner, dict) or not all(
            v is None or (isinstance(v, list) and len(v) == 2 and all(map(_statistic, v))) for v in inner.values()):
        return "inner is not a mapping of thresholds to [value lower, value higher] or null"
    if (recomputed := holds(row["value"], row["op"], t)) != row["ok"] and not _rounded_away(row["value"], t):
        return (f"ok is {str(row['ok']).lower()}, but value {short(row['value'])} {row['op']} {short(t)} "
                f"{'holds' if recomputed else 'does not hold'}")
    return None


def _rounded_away(value, threshold):
    """Whether a number of a stored statistic lies within its rounding (`verdict.encode` keeps 6 significant digits)
    of its threshold: there the run's own unrounded number may have decided its `ok` either way."""
    xs, ts = numbers(value), numbers(threshold)
    return any(abs(x - t) <= 1e-5 * max(abs(x), abs(t)) for x, t in zip(xs, ts * len(xs) if len(ts) == 1 else ts))


def _fault(run, seed):
    """What is wrong with one stored record, or None."""
    if not isinstance(run, dict):
        return "not a mapping"
    if fault := _plain(run, depth=3):
        return fault
    if not (_text(run.get("fingerprint")) and FINGERPRINT.fullmatch(run["fingerprint"])):
        return f"fingerprint {short(run['fingerprint'])} is not 16 hex digits" if "fingerprint" in run else \
            "no fingerprint"
    if run.get("seed") != seed or isinstance(run.get("seed"), bool):
        return f"seed {short(run.get('seed'))} is not its key"
    if run.get("outcome") is not None and run.get("outcome") not in OUTCOMES:
        return f"outcome {short(run.get('outcome'))} is not one of {', '.join(OUTCOMES)} or null"
    wall = run.get("wall_s")
    if not (isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall >= 0):
        return f"wall_s {short(wall)} is not a number of seconds"
    for field in ("commit", "started"):
        if not _text(run.get(field)):
            return f"{field} {short(run.get(field))} is not a text"
    prov = run.get("provenance")
    if prov is not None and not (isinstance(prov, dict) and all(
            v is None or isinstance(v, (str, int, float)) for v in prov.values())):
        return "provenance is not a mapping of names to texts, numbers or null"
    if not isinstance(run.get("rows"), list):
        return "rows is not a list"
    for i, row in enumerate(run["rows"]):
        if fault := _row_fault(row):
            name = row.get("name") if isinstance(row, dict) else None
            return f"row {short(name)}: {fault}" if _text(name) and name else f"row {i + 1}: {fault}"
    if run["rows"] and run.get("outcome") is not None and run["outcome"] != (made := outcome(run["rows"])):
        return f"outcome {run['outcome']} is not its rows' ({made})"
    return None


def _check(body, claim):
    """The faults of a file's content, as a text, or None."""
    if not isinstance(body, dict) or not isinstance(body.get("runs"), (dict, list)):
        return "is not a mapping with 'runs'"
    if body.get("claim", claim.id) != claim.id:
        return f"holds claim {short(body['claim'])}, not {claim.id}"
    if not isinstance(body["runs"], dict):
        return "'runs' is not a mapping of seeds to records"
    if len(body["runs"]) > MAX_RUNS:
        return f"holds {len(body['runs']):,} runs; a file holds at most {MAX_RUNS:,} (what one sweep may run)"
    if fault := _plain({k: v for k, v in body.items() if k != "runs"}):
        return fault
    for key, run in body["runs"].items():
        if not (SEED_KEY.fullmatch(key) and int(key) < 2 ** 32):
            return f"seed key {short(key)} is not an integer in [0, 2**32) written plainly"
        if fault := _fault(run, int(key)):
            return f"seed {key}: {fault}"
    return None


def read(file, repair=REPAIR):
    """The text of a file of the store (a results file, a history), or None where there is none; one that is not a
    regular file, is larger than MAX_BYTES, cannot be read or is empty raises `StoreError`, before it is read."""
    try:
        size = file.stat().st_size
        if not file.is_file():  # a folder, a FIFO (a read would wait for good), a device
            raise StoreError(f"{file} is not a regular file; move it away")
        if size > MAX_BYTES:
            raise StoreError(f"{file} has {size:,} bytes; a results file holds at most {MAX_BYTES:,}; {repair}")
        text = file.read_text()
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        folder = next(p for p in reversed(file.parents) if p.exists() and not p.is_dir())
        raise StoreError(f"{folder} is not a folder; move it away") from None
    except (OSError, UnicodeDecodeError) as e:
        raise StoreError(f"{file} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    if not text.strip():
        raise StoreError(f"{file} is empty; {repair}")
    return text


def lock(file):
    """The lock of a file of the store (`.<name>.lock` beside it), held by every read-modify-write of it."""
    return FileLock(file.with_name(f".{file.name}.lock"))


def load(claim, profile="default", overrides=None):
    """The stored runs of a claim, {seed: record}; empty when none are stored. A file that cannot be read or is
    damaged raises `StoreError`, one line naming it and what is wrong."""
    file = path(claim, profile, overrides)
    if (text := read(file)) is None:
        return {}
    try:  # bounded numbers, no key twice (a seed stored twice); the nesting is checked part by part below
        body = safe.json_load(text, None, MAX_BYTES, MAX_DEPTH, walk=False)
    except safe.Unreadable as e:
        raise StoreError(f"{file}: {e.why}; {REPAIR}") from None
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
    rec = record(meta)
    if fault := _fault(json.loads(json.dumps(rec)), rec["seed"]):  # as it would be read back
        raise StoreError(f"{file}: seed {rec['seed']}: {fault}; the run is not stored")
    file.parent.mkdir(parents=True, exist_ok=True)
    with lock(file):
        runs = load(claim, profile, overrides)
        if rec["seed"] not in runs and len(runs) >= MAX_RUNS:
            raise StoreError(f"{file} holds {len(runs):,} runs, the most a results file may hold")
        runs[rec["seed"]] = rec
        body = {"claim": claim.id, "profile": profile,
                "overrides": {k: v for k, v in meta["overrides"].items() if k != "seed"},
                "runs": {str(s): runs[s] for s in sorted(runs)}}
        runner.atomic_write(json.dumps(body, indent=1, ensure_ascii=False) + "\n", file)


def expected_fingerprint(claim, seed, profile="default", overrides=None):
    _, full = params.resolve(claim, profile, {**(overrides or {}), "seed": seed})
    return fingerprint.of(claim, full)


def status(claim, profile="default", overrides=None):
    """{seed: (record, fresh)} for every stored run of a claim; fresh means its fingerprint is today's. The claim's
    parameters and code are read and hashed once, not once per seed."""
    runs = load(claim, profile, overrides)
    if not runs:
        return {}
    _, full = params.resolve(claim, profile, overrides)
    code = fingerprint.code(claim)
    return {s: (r, r["fingerprint"] == fingerprint.of(claim, {**full, "seed": s}, code)) for s, r in runs.items()}


def kept(claim):
    """[(run name, executed notebook)] of the claim's runs kept in results/<run>/ by `nbdemo run ... --keep`: a paper
    profile run on a GPU, say, named by its profile and its overrides (`paper`, `paper-steps=60000`)."""
    return sorted((nb.parent.name, nb) for nb in RESULTS.glob(f"*/{claim.id}.ipynb"))
