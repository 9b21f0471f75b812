"""The verdict's history: every state a claim's stored runs have held, and the revisions declared for it.

`results/history/<CLAIM>.json` (under the store's folder) holds {"claim", "states", "revisions"}:
- a *state* is one content of the claim's store, its default runs and its control's, keyed by the git blob ids of
  the two files: when it was stored (the commit that holds it, or the time a sweep wrote it), its headline by the
  rule of its day (`rules.RULE_ID`), each seed's outcome and a digest of its rows, each row's kind, comparison,
  threshold and source, and the parameters of the default profile and of the control;
- a *revision* is an entry of `results/revisions/<CLAIM>.yml` (written by hand before the changed notebook runs:
  date, kind, what, why), stamped with the commit time that added it.
`backfill` reads every state and revision from git; `record` (called by every sweep of the default profile or the
control) adds the store's state of now. Both only add: no entry is ever removed or replaced (a state found in git
whose entry a sweep wrote gets its commit filled in).
"""
import hashlib
import json
import subprocess
import tempfile
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace

import yaml

from nbdemo.claims.registry import ROOT
from nbdemo.claims.verdict import OUTCOMES
from nbdemo.runs import params, rules, runner, safe, store
from nbdemo.runs.params import short

REVISIONS = ROOT / "results" / "revisions"
KINDS = ("check", "threshold", "reading", "setting", "requirement", "control")  # of a declared revision


def path(claim):
    return store.RESULTS / "history" / f"{claim.id}.json"


def now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def utc(stamp):
    return datetime.fromisoformat(stamp).astimezone(timezone.utc).isoformat(timespec="seconds")


def _time(stamp):
    """A run's start in UTC, or None where it is not a time."""
    try:
        return utc(stamp)
    except (TypeError, ValueError):
        return None


def blob(data):
    """The git blob id of a file's bytes (what `git hash-object` prints)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _digest(rows):
    return hashlib.sha1(json.dumps([(r["name"], r.get("value"), r["ok"]) for r in rows]).encode()).hexdigest()[:10]


def _runs(data):
    """{seed: record} of a results file's bytes (None: no file)."""
    runs = json.loads(data)["runs"] if data else {}
    return {int(s): {**rec, "rows": rec.get("rows") or []} for s, rec in runs.items()}


def _source(row):
    src = row.get("source")
    return None if not src else src["where"] if src["from"] == "paper" else f"ours: {src['why']}"


def state(default, control, parameters, profile_file):
    """The facts of one state of a claim's store, from its files' bytes (control None when there is none), the
    notebook's parameters then (None where they could not be read) and its profile file then."""
    runs, control_runs = _runs(default), _runs(control)
    declared = isinstance(profile_file.get(rules.CONTROL), dict)
    j = rules.judge(runs, control_runs if declared else None, profile_file.get("control untested"))
    rows = {}
    for rec in runs.values():
        for r in rec["rows"]:
            rows.setdefault(r["name"], [r["kind"], r.get("op"), r.get("threshold"), _source(r)])
    made = max(runs.values(), key=lambda r: r.get("started") or "").get("commit") if runs else None
    return {"key": f"{blob(default)}:{blob(control) if control else '-'}", "code": made,
            "headline": j["headline"], "k": j["k"], "n": j["n"], "inconclusive": j["inconclusive"],
            "low": round(j["low"], 4),
            "high": round(j["high"], 4), "rule": rules.RULE_ID,
            "seeds": {str(s): {"outcome": rec["outcome"], "digest": _digest(rec["rows"])}
                      for s, rec in sorted(runs.items())},
            "started": {str(s): t for s, rec in sorted(runs.items()) if (t := _time(rec.get("started")))},
            "rows": rows, "parameters": None if parameters is None else {k: v for k, v in parameters.items() if k != "seed"},
            "control": {"profile": profile_file[rules.CONTROL],
                        "seeds": {str(s): _digest(rec["rows"]) for s, rec in sorted(control_runs.items())}}
            if declared else None}


def _revision(entry):
    """A declared revision as the history keeps it, with its key (what identifies it: date, kind, what)."""
    rev = {k: str(entry.get(k, "")) for k in ("date", "kind", "what", "why")}
    return {"key": hashlib.sha1(json.dumps([rev["date"], rev["kind"], rev["what"]]).encode()).hexdigest()[:12], **rev}


def declared(text, what="a file of results/revisions/"):
    """The revisions of a results/revisions/<CLAIM>.yml text, as `_revision`s, read by the bounded reader
    (`safe.yaml_load`); one that is not a list of mappings of texts raises `StoreError`, one line."""
    try:
        entries = safe.yaml_load(text, str(what)) or []
    except safe.Unreadable as e:
        raise store.StoreError(str(e)) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise store.StoreError(f"{what}: a revision record is a YAML list of mappings (date, kind, what, why)")
    for e in entries:
        if bad := [k for k in ("date", "kind", "what", "why") if not isinstance(e.get(k, ""), (str, int, float))]:
            raise store.StoreError(f"{what}: a revision's {bad[0]} {short(e[bad[0]])} is not a text")
    return [_revision(e) for e in entries]


HISTORY_REPAIR = ("restore it with `git checkout -- results/history/`, or move it away and run "
                  "`nbdemo history --backfill`")


def _text(x, none=False):
    return isinstance(x, str) or (none and x is None)


def _mapping_of(x, test):
    return isinstance(x, dict) and all(isinstance(k, str) and test(v) for k, v in x.items())


def _state_fault(s):
    """What is wrong with one state of a history (what `state` makes, with "commit" and "at"), or None."""
    if not isinstance(s, dict):
        return "is not a mapping"
    for field, none in (("key", False), ("at", False), ("headline", False), ("commit", True), ("code", True)):
        if not _text(s.get(field), none):
            return f"{field} {short(s.get(field))} is not a text"
    if not all(isinstance(s.get(f), int) and not isinstance(s[f], bool) and s[f] >= 0 for f in ("k", "n")):
        return f"k {short(s.get('k'))} or n {short(s.get('n'))} is not a count"
    if not _mapping_of(s.get("seeds"), lambda v: isinstance(v, dict) and _text(v.get("digest"))
                       and (v.get("outcome") is None or v["outcome"] in OUTCOMES)) \
            or not all(store.SEED_KEY.fullmatch(k) for k in s["seeds"]):
        return "seeds is not a mapping of seeds to an outcome and a digest"
    if not _mapping_of(s.get("started", {}), _text):
        return "started is not a mapping of seeds to times"
    if not _mapping_of(s.get("rows"), lambda v: isinstance(v, list) and len(v) == 4 and _text(v[0])):
        return "rows is not a mapping of names to [kind, comparison, threshold, source]"
    if s.get("parameters") is not None and not isinstance(s["parameters"], dict):
        return "parameters is not a mapping or null"
    c = s.get("control")
    if c is not None and not (isinstance(c, dict) and "profile" in c and _mapping_of(c.get("seeds"), _text)):
        return "control is not a profile with a mapping of seeds to digests, or null"
    return None


def _revision_fault(r):
    if not isinstance(r, dict):
        return "is not a mapping"
    for field, none in (("key", False), ("at", False), ("date", False), ("kind", False), ("what", False),
                        ("why", False), ("commit", True)):
        if not _text(r.get(field), none):
            return f"{field} {short(r.get(field))} is not a text"
    return None


def _fault(h, claim):
    """What is wrong with a history's content, as a text, or None."""
    if not (isinstance(h, dict) and isinstance(h.get("states"), list) and isinstance(h.get("revisions"), list)):
        return "is not a mapping with the lists 'states' and 'revisions'"
    if h.get("claim", claim.id) != claim.id:
        return f"holds claim {short(h['claim'])}, not {claim.id}"
    for part, fault_of in (("states", _state_fault), ("revisions", _revision_fault)):
        for i, e in enumerate(h[part]):
            if fault := fault_of(e):
                return f"{part[:-1]} {i + 1}: {fault}"
    return None


def load(claim):
    """The claim's history, read through the store's checked reader (bounded, no key twice) and checked field by
    field; a damaged one raises `StoreError`, one line naming it."""
    file = path(claim)
    if (text := store.read(file, HISTORY_REPAIR)) is None:
        return {"claim": claim.id, "states": [], "revisions": []}
    try:
        h = safe.json_load(text, None, store.MAX_BYTES)
    except safe.Unreadable as e:
        raise store.StoreError(f"{file}: {e.why}; {HISTORY_REPAIR}") from None
    if fault := _fault(h, claim):
        raise store.StoreError(f"{file}: {fault}; {HISTORY_REPAIR}")
    return h


def merge(claim, states=(), revisions=()):
    """Add the states and revisions that the claim's history does not hold yet (by key), fill in the commit of a
    state that a sweep stored and git now holds, and write the history; return it. Nothing is removed. The
    read-modify-write holds the history file's lock, so writers at once (sweeps, a backfill) keep every entry."""
    file = path(claim)
    file.parent.mkdir(parents=True, exist_ok=True)
    with store.lock(file):
        h = load(claim)
        for part, new in (("states", states), ("revisions", revisions)):
            held = {e["key"]: e for e in h[part]}
            for e in new:
                if e["key"] not in held:
                    held[e["key"]] = e
                    h[part].append(e)
                elif e.get("commit") and not held[e["key"]].get("commit"):
                    held[e["key"]]["commit"] = e["commit"]
            h[part].sort(key=lambda e: e["at"])
        runner.atomic_write(json.dumps(h, indent=1, ensure_ascii=False) + "\n", file)
    return h


class NoGit(store.StoreError):
    """The checkout has no git repository (a download without .git) or git is not installed: the history cannot be
    read from git."""


def _git(*args):
    try:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout
    except FileNotFoundError:
        raise NoGit("git is not installed, and the verdict's history is read from git") from None
    except subprocess.CalledProcessError as e:
        why = " ".join((e.stderr or "").split())[:200] or f"git {args[0]} exited {e.returncode}"
        raise NoGit(f"{ROOT} has no git history to read the verdict's history from ({why})") from None


def _commits(*paths):
    """[(commit, its committer time in UTC)] of every commit that changed one of the paths (all branches merged
    into HEAD), oldest first."""
    lines = _git("log", "--full-history", "--format=%H %cI", "--", *paths).split("\n")
    return sorted(((c, utc(t)) for c, t in (line.split() for line in lines if line)), key=lambda x: x[1])


@contextmanager
def objects():
    """read(spec) -> bytes or None: files of the repository's history ("COMMIT:path"), by one `git cat-file`."""
    git = subprocess.Popen(["git", "-C", str(ROOT), "cat-file", "--batch"], stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)

    def read(spec):
        git.stdin.write(spec.encode() + b"\n")
        git.stdin.flush()
        header = git.stdout.readline().split()
        if header[-1] == b"missing":
            return None
        data = git.stdout.read(int(header[2]))
        git.stdout.read(1)
        return data
    try:
        yield read
    finally:
        git.stdin.close()
        git.wait()


def parameters_of(claim, notebook):
    """The parameters cell of a notebook's bytes (`params.defaults`), or None where it cannot be read."""
    with tempfile.TemporaryDirectory() as tmp:
        (nb := Path(tmp) / "nb.ipynb").write_bytes(notebook or b"")
        try:
            return params.defaults(SimpleNamespace(id=claim.id, notebook=nb))
        except (params.ParameterError, ValueError, SyntaxError, KeyError):
            return None


def git_states(claim):
    """The states of a claim's store that the repository's history holds: one at every commit that changed its
    results/default or results/control file (a state held by several commits is kept at the first)."""
    files = {p: f"results/{p}/{claim.id}.json" for p in ("default", rules.CONTROL)}
    states = {}
    with objects() as read:
        for commit, at in _commits(*files.values()):
            default = read(f"{commit}:{files['default']}")
            if default is None:
                continue
            profile_file = yaml.safe_load(read(f"{commit}:nbdemo/profiles/{claim.id}.yml") or b"") or {}
            s = state(default, read(f"{commit}:{files[rules.CONTROL]}"),
                      parameters_of(claim, read(f"{commit}:notebooks/{claim.id}.ipynb")), profile_file)
            states.setdefault(s["key"], {**s, "commit": commit[:10], "at": at})
    return list(states.values())


def git_revisions(claim):
    """The declared revisions of a claim that the repository's history holds, each at the commit that first held it."""
    file, revisions = f"results/revisions/{claim.id}.yml", {}
    with objects() as read:
        for commit, at in _commits(file):
            for rev in declared(read(f"{commit}:{file}") or b""):
                revisions.setdefault(rev["key"], {**rev, "commit": commit[:10], "at": at})
    return list(revisions.values())


def backfill(claim):
    """Merge into the claim's history every state and revision that git holds; return the history. (A revision not
    committed yet is `pending` until a sweep records it, or a backfill after it is committed.) Without git,
    `NoGit`, one line; the history is left as it is."""
    return merge(claim, git_states(claim), git_revisions(claim))


def pending(claim, at):
    """The revisions of results/revisions/<CLAIM>.yml that the claim's history does not hold yet, stamped `at`: each
    was written after the history's last `record` or `backfill`, which merge every revision there is."""
    file, held = REVISIONS / f"{claim.id}.yml", {r["key"] for r in load(claim)["revisions"]}
    return [{**rev, "commit": None, "at": at} for rev in (declared(file.read_text()) if file.exists() else [])
            if rev["key"] not in held]


def record(claim, started):
    """Add the store's state of now to the claim's history (a sweep calls this when it has stored its runs; started:
    when the sweep began), after the revisions declared since, which git stamps or else `started` does. Without git,
    `NoGit` (one line), and nothing is written."""
    default = store.path(claim)
    if not default.exists():
        return load(claim)
    control = store.path(claim, rules.CONTROL)
    store.load(claim), store.load(claim, rules.CONTROL)  # both checked before `state` reads them
    revisions = git_revisions(claim) + pending(claim, started)  # without git: `NoGit`, before anything is written
    s = state(default.read_bytes(), control.read_bytes() if control.exists() else None, params.defaults(claim),
              params.profile_file(claim))
    return merge(claim, [{**s, "commit": None, "at": now()}], revisions)

