"""Publishing the book: `make publish` pushes the built site to a gh-pages branch (here of a local bare repository),
and the addresses of the repository and the book are written in one place."""
import shutil
import subprocess
import sys
import tomllib

import yaml

from nbdemo.book import pages
from nbdemo.claims.registry import ROOT

GIT = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@example.org"}


def git(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_make_publish_pushes_the_built_book_to_gh_pages(tmp_path, monkeypatch):
    for k, v in GIT.items():
        monkeypatch.setenv(k, v)
    bare, work = tmp_path / "site.git", tmp_path / "work"
    git("init", "-q", "--bare", str(bare), cwd=tmp_path)
    work.mkdir()
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, work / name)
    git("init", "-q", cwd=work)
    git("add", ".", cwd=work)
    git("commit", "-qm", "source", cwd=work)
    html = work / "book" / "_build" / "html"
    (html / "_static").mkdir(parents=True)
    (html / "index.html").write_text("<h1>the book</h1>")
    (html / "_static" / "outcomes.css").write_text(".outcome {}")
    for round_ in range(2):  # the second push replaces the first
        (html / "round.txt").write_text(str(round_))
        subprocess.run(["make", "-s", "publish", f"PYTHON={sys.executable}", f"REMOTE={bare}"], cwd=work, check=True)
    files = set(git("ls-tree", "-r", "--name-only", "gh-pages", cwd=bare).split())
    assert files == {".nojekyll", "index.html", "_static/outcomes.css", "round.txt"}
    assert git("show", "gh-pages:round.txt", cwd=bare) == "1"
    assert len(git("log", "--format=%H", "gh-pages", cwd=bare).split()) == 2  # one commit per publish
    assert "book built from" in git("log", "-1", "--format=%s", "gh-pages", cwd=bare)


def test_make_publish_refuses_without_a_built_book(tmp_path):
    shutil.copy(ROOT / "Makefile", tmp_path / "Makefile")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    run = subprocess.run(["make", "-s", "publish", f"PYTHON={sys.executable}", "REMOTE=nowhere"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode != 0 and "run make book first" in run.stdout


def test_the_repository_and_book_addresses_are_given_once_when_the_book_is_built(monkeypatch):
    """No address is written in the sources (pyproject.toml, CITATION.cff, the book's configuration): the build takes
    them from `make book REPOSITORY=... SITE=...`, and the Pages workflow passes GitHub's own."""
    for name in ("NBDEMO_REPOSITORY", "NBDEMO_SITE"):
        monkeypatch.delenv(name, raising=False)
    assert pages.urls() == {"Repository": None, "Documentation": None}
    monkeypatch.setenv("NBDEMO_REPOSITORY", "https://example.org/a/b/")
    monkeypatch.setenv("NBDEMO_SITE", "https://a.example.org/b")
    assert pages.urls() == {"Repository": "https://example.org/a/b", "Documentation": "https://a.example.org/b/"}
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert not {"repository-code", "url"} & cff.keys()
    assert "urls" not in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert "repository" not in yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    make = (ROOT / "Makefile").read_text()
    assert "NBDEMO_REPOSITORY='$(REPOSITORY)'" in make and "NBDEMO_SITE='$(SITE)'" in make
    workflow = (ROOT / ".github" / "workflows" / "pages.yml").read_text()
    assert "make book" in workflow and "actions/deploy-pages" in workflow
    assert "REPOSITORY=${{ github.server_url }}/${{ github.repository }}" in workflow
    assert "SITE=${{ steps.pages.outputs.base_url }}" in workflow
