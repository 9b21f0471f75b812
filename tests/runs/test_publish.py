"""`make publish` pushes only where it is told: it needs REMOTE=, and never pushes to a path on this machine that
only a remote's name points at (a clone's origin is the checkout it came from). Run in a scratch repository with
the project's Makefile, a book of one page and a bare repository as the site."""
import shutil
import subprocess
import sys

import pytest

from nbdemo.claims.registry import ROOT


def _git(*args, cwd):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


@pytest.fixture
def clone(tmp_path):
    """(a repository with the Makefile and a built book whose origin is the bare repository `site`, site)."""
    site, work = tmp_path / "site.git", tmp_path / "work"
    _git("init", "-q", "--bare", str(site), cwd=tmp_path)
    work.mkdir()
    shutil.copy(ROOT / "Makefile", work)
    (work / "html").mkdir()
    (work / "html" / "index.html").write_text("<p>book</p>")
    _git("init", "-q", cwd=work)
    _git("add", "-A", cwd=work)
    _git("commit", "-q", "-m", "book", cwd=work)
    _git("remote", "add", "origin", str(site), cwd=work)
    return work, site


def _publish(work, *args):
    return subprocess.run(["make", "-s", "publish", "HTML=html", f"PYTHON={sys.executable}", *args], cwd=work,
                          capture_output=True, text=True, timeout=120)


def _branches(site):
    return _git("branch", "--list", cwd=site).split()


def test_publish_without_remote_is_refused(clone):
    work, site = clone
    r = _publish(work)
    assert r.returncode == 2 and "make publish: give REMOTE=, the remote to push the book to" in r.stdout
    assert _branches(site) == []


@pytest.mark.parametrize("url", ["{site}", "file://{site}", "../site.git"])
def test_a_remote_whose_address_is_a_local_path_is_refused(clone, url):
    work, site = clone
    url = url.format(site=site)
    _git("remote", "set-url", "origin", url, cwd=work)
    r = _publish(work, "REMOTE=origin")
    assert r.returncode == 2 and f"remote origin is {url}, a path on this machine; give REMOTE={url}" in r.stdout
    assert _branches(site) == []


@pytest.mark.parametrize("url", ["git@github.com:USER/REPO.git", "https://github.com/USER/REPO.git"])
def test_a_remote_elsewhere_passes_the_check(clone, url):
    """The check lets a network remote through to ghp-import (PYTHON=echo: the push itself is not tried)."""
    work, _ = clone
    _git("remote", "set-url", "origin", url, cwd=work)
    r = subprocess.run(["make", "-s", "publish", "HTML=html", "PYTHON=echo", "REMOTE=origin"], cwd=work,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "-m ghp_import --no-jekyll --push --force --remote origin" in r.stdout, r.stdout


def test_a_local_path_given_as_remote_gets_the_book(clone):
    work, site = clone
    r = _publish(work, f"REMOTE={site}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(_git("ls-tree", "-r", "--name-only", "gh-pages", cwd=site).split()) == [".nojekyll", "index.html"]
