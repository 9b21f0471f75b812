"""The lock of the book's environment (`requirements.lock`, `nbdemo.runs.lock`): what is installed is exactly the
lock, the lock is pyproject.toml's and hashes every file, `make` and environment.yml install it, and a claim page
states a run's lock and whether it is the book's."""
import re
import subprocess
import tomllib

import yaml
from packaging.requirements import Requirement

from nbdemo.book.staging import provenance_cell
from nbdemo.claims.registry import ROOT
from nbdemo.runs import lock, store


def test_the_installed_packages_are_exactly_the_locked_versions():
    assert lock.differences() == [], "rebuild .venv from the lock: rm -rf .venv && make setup"


def test_setuptools_vendored_copies_do_not_count_as_installed():
    import setuptools  # noqa: F401  (puts setuptools/_vendor, with its .dist-info, on sys.path)
    assert "jaraco-text" not in lock.installed() and lock.installed()["setuptools"] == lock.pins()["setuptools"]


def test_the_lock_pins_every_dependency_of_pyproject_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    pins = lock.pins()
    for dep in map(Requirement, project["project"]["dependencies"] + project["build-system"]["requires"]):
        name = lock.normal(dep.name)
        assert name in pins and dep.specifier.contains(pins[name]), f"{dep} (lock {pins.get(name)}): run make lock"


def test_every_pin_of_the_lock_carries_its_hashes():
    blocks = re.split(r"\n(?=\S)", lock.LOCK.read_text())
    pinned = [b for b in blocks if lock.PIN.match(b)]
    assert len(pinned) == len(lock.pins()) > 100
    assert all(re.search(r"--hash=sha256:[0-9a-f]{64}", b) for b in pinned)


def test_make_and_environment_yml_install_the_lock():
    setup = subprocess.run(["make", "-n", "-B", "setup"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    installs = [line for line in setup.splitlines() if "pip install" in line]
    assert installs == [".venv/bin/python -m pip install -q --require-hashes -r requirements.lock",
                        ".venv/bin/python -m pip install -q --no-deps --no-build-isolation -e ."]
    env = yaml.safe_load((ROOT / "environment.yml").read_text())["dependencies"]
    assert next(d["pip"] for d in env if isinstance(d, dict)) == ["--require-hashes", "-r requirements.lock"]


def test_a_run_records_the_lock_and_its_page_says_whose_it_is(monkeypatch):
    assert lock.provenance() == {"lock": lock.digest()} and re.fullmatch(r"[0-9a-f]{12}", lock.digest())
    stored = {0: {"provenance": {"lock": lock.digest()}}, 3: {"provenance": {"lock": "0123456789ab"}},
              4: {"provenance": {"lock": "0123456789ab"}}, 5: {"provenance": {}}}
    monkeypatch.setattr(store, "load", lambda claim, profile, overrides: stored)
    meta = {"claim": "TFD-1", "profile": "default", "overrides": {}, "parameters": {"seed": 0}, "commit": "abc",
            "started": "now", "wall_s": 1.0, "provenance": {"device": "cpu", "lock": lock.digest()}}
    page = provenance_cell(meta).source
    assert f"lock `{lock.digest()}`, this book's" in page
    assert "not made under the book's lock: seeds 3, 4 (lock `0123456789ab`), seed 5 (no lock recorded)" in page
    meta["provenance"] = {"device": "cpu", "lock": "0123456789ab", "unlocked": "numpy 2.4.7 (lock 2.4.6)"}
    page = provenance_cell(meta).source
    assert "lock `0123456789ab`, **another lock than this book's**" in page and "numpy 2.4.7 (lock 2.4.6)" in page
    assert "no lock recorded" in lock.shown({"device": "cpu"})
