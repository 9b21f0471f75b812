"""The committed results store: the runs of each claim over seeds, and the rule that turns them into a headline.

Every function takes a `Claim` (`nbdemo.claims.get`), not its id.

`results/<run name>/<CLAIM>.json` (run name as in `runner.run_name`: `default`, `paper`, `default-steps=100`) holds
{"claim", "profile", "overrides", "runs": {seed: record}}, one record per seed: its outcome, every verdict row, the
fingerprint of what it depended on, its wall time and provenance. A sweep's client writes it, one finished run at a
time, through a temporary file renamed into place, so a file is always whole and a seed is never stored twice; the
read-modify-write holds a lock (`.<CLAIM>.json.lock` beside the file), so sweeps of one claim that run at once, from
two terminals or two machines sharing the checkout, keep every record. Executed notebooks of other profiles (a paper profile run on a GPU) sit beside it as `<CLAIM>.ipynb`.
"""
import json
import os
from collections import Counter
from pathlib import Path

from filelock import FileLock

from . import fingerprint, params, runner
from .claims import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED, ROOT

RESULTS = Path(os.environ.get("NBDEMO_RESULTS", ROOT / "results"))
MIN_SEEDS, MAJORITY = 5, 0.8
MIXED, TOO_FEW = "MIXED", "TOO FEW SEEDS"
RULE = (f"A claim's headline over its seeds is REPRODUCED when at least {MAJORITY:.0%} of the seeds reproduce "
        f"(4 of 5), NOT REPRODUCED when at least {MAJORITY:.0%} do not reproduce, INCONCLUSIVE when more than half "
        f"are inconclusive (a requirement failed), and MIXED otherwise; with fewer than {MIN_SEEDS} seeds there "
        f"is no headline ({TOO_FEW}).")


def headline(outcomes):
    """The claim's outcome over seeds, from the list of its runs' outcomes, by `RULE`."""
    n, count = len(outcomes), Counter(outcomes)
    if n < MIN_SEEDS:
        return TOO_FEW
    if count[INCONCLUSIVE] > n / 2:
        return INCONCLUSIVE
    for label in (REPRODUCED, NOT_REPRODUCED):
        if count[label] >= MAJORITY * n:
            return label
    return MIXED


def path(claim, profile="default", overrides=None):
    return RESULTS / runner.run_name(profile, overrides) / f"{claim.id}.json"


def load(claim, profile="default", overrides=None):
    """The stored runs of a claim, {seed: record}; empty when none are stored."""
    try:
        return {int(s): r for s, r in json.loads(path(claim, profile, overrides).read_text())["runs"].items()}
    except FileNotFoundError:
        return {}


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


def summary(claim, profile="default", overrides=None):
    """The dashboard's view of a claim: headline, counts and staleness over its stored seeds, or None."""
    runs = status(claim, profile, overrides)
    if not runs:
        return None
    outcomes = [r["outcome"] for r, _ in runs.values()]
    checks = {}
    for r, _ in runs.values():
        for row in r["rows"]:
            if row["kind"] != "note":
                n = checks.setdefault((row["kind"], row["name"]), [0, 0])
                n[0] += bool(row["ok"])
                n[1] += 1
    return {"headline": headline(outcomes), "n": len(outcomes), "reproduced": outcomes.count(REPRODUCED),
            "counts": Counter(outcomes), "stale": sorted(s for s, (_, fresh) in runs.items() if not fresh),
            "runs": {s: r for s, (r, _) in runs.items()}, "rows": checks,
            "wall_s": sorted(r["wall_s"] for r, _ in runs.values())[len(runs) // 2]}


def executed(claim, profile):
    """A committed executed notebook of a non-default profile (e.g. a paper profile run on a GPU), or None."""
    nb = RESULTS / profile / f"{claim.id}.ipynb"
    return nb if nb.exists() else None
