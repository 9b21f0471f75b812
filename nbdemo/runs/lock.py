"""The lock of the book's environment: `requirements.lock`, every package that `make book` and `make test` install,
with its exact version and hashes (`make lock` makes it from pyproject.toml with pip-tools).

Every run records the lock's short hash in its provenance (`provenance`, called by `runner.run`), with the packages
installed apart from it where there are any, and each claim page states it (`shown`): a run made under another lock
than the book's may differ from a rerun in its last digits. The fingerprint is about the code and does not cover it.
"""
import hashlib
import importlib.metadata
import re
import sysconfig

from nbdemo.claims.registry import ROOT

LOCK = ROOT / "requirements.lock"
# Installed but not locked: pip, which installs the lock (the venv's own), and the project itself (installed editable).
UNLOCKED = {"pip", "nbdemo"}
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;\\]+)")


def normal(name):
    """A distribution's name as PEP 503 compares it ("Jinja2", "typing_extensions" -> "jinja2", "typing-extensions")."""
    return re.sub(r"[-_.]+", "-", name).lower()


def digest(path=LOCK):
    """The lock's short hash: the first 12 hex digits of its SHA-256 (`sha256sum requirements.lock`); None without
    a lock (nbdemo installed from elsewhere than a clone)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        return None


def pins(path=LOCK):
    """{name: version} of every package the lock pins."""
    return {normal(m[1]): m[2] for line in path.read_text().splitlines() if (m := PIN.match(line))}


def installed():
    """{name: version} of every distribution installed in this Python's site-packages. Only there: importing
    setuptools puts its own vendored copies (setuptools/_vendor, with their .dist-info) on sys.path, and a scan of
    sys.path would then count them as installed packages."""
    site = sorted({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    return {normal(d.metadata["Name"]): d.version for d in importlib.metadata.distributions(path=site)}


def differences(path=LOCK):
    """How the installed packages depart from the lock, one text each ("numpy 2.4.7 (lock 2.4.6)", "torch missing
    (lock 2.14.1)", "rich 14.0.0 (not in the lock)"); empty when they are exactly the lock's."""
    locked, have = pins(path), installed()
    return ([f"{n} {have.get(n, 'missing')} (lock {v})" for n, v in sorted(locked.items()) if have.get(n) != v]
            + [f"{n} {v} (not in the lock)" for n, v in sorted(have.items()) if n not in locked.keys() | UNLOCKED])


def provenance():
    """What a run records of its environment: {"lock": short hash}, and {"unlocked": "..."} where the installed
    packages depart from the lock (a flat text: a stored record's provenance holds texts, numbers or null)."""
    if (lock := digest()) is None:
        return {"lock": None}
    off = differences()
    return {"lock": lock, **({"unlocked": "; ".join(off)} if off else {})}


def shown(prov):
    """How a claim page states the environment of a run, from its provenance: its lock, and whether it is the book's."""
    run, book = prov.get("lock"), digest()
    if run is None:
        text = "no lock recorded (a run made before the book had a lock, or installed without one)"
    elif run == book:
        text = f"lock `{run}`, this book's `requirements.lock`"
    else:
        text = (f"lock `{run}`, **another lock than this book's** (`{book}`): a rerun under the book's lock may "
                "differ in its last digits")
    return text + (f"; installed apart from the lock: {prov['unlocked']}" if prov.get("unlocked") else "")


def other_locks(runs):
    """The stored runs ({seed: record}) made under another lock than the book's, as a text ("seeds 3, 4 (lock
    `0c1b2d4e3f9a`), seed 7 (no lock recorded)"); empty when every one was made under the book's lock."""
    book, by_lock = digest(), {}
    for seed, rec in sorted(runs.items()):
        lock = (rec.get("provenance") or {}).get("lock")
        if lock != book:
            by_lock.setdefault(lock, []).append(str(seed))
    return ", ".join(f"seed{'s' if len(s) > 1 else ''} {', '.join(s)} "
                     f"({f'lock `{lock}`' if lock else 'no lock recorded'})" for lock, s in by_lock.items())
