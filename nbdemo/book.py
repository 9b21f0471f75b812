"""Assemble the Jupyter Book: executed notebooks, the claims dashboard, and the offline HTML build."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from . import runner
from .claims import CLAIMS, PAPERS, ROOT

BOOK = ROOT / "book"
STATIC = ["_config.yml", "intro.md", "references.bib"] + [f"{p.lower()}.md" for p in PAPERS]


def seeds_text(claim, profile):
    path = runner.sweep_path(claim, profile)
    if not path.exists():
        return ""
    s = json.loads(path.read_text())
    return f"holds in {s['holds']} of {len(s['seeds'])} seeds"


def executed(profile):
    """{claim: (path, meta)} for every claim with a notebook, running those that are stale."""
    done = {}
    for c in CLAIMS.values():
        if c.notebook.exists():
            done[c.id] = runner.latest(c.id, profile) or runner.run(c.id, profile)
    return done


def dashboard(done, profile):
    rows = ["| Claim | Title | Paper figure | Verdict | Profile | Runtime | Seeds |", "|---|---|---|---|---|---|---|"]
    for c in CLAIMS.values():
        if c.id in done:
            meta = done[c.id][1]
            rows.append(f"| {{doc}}`{c.id} <claims/{c.id}>` | {c.title} | {c.figure} | "
                        f"**{runner.verdict_text(meta['verdict'])}** | {profile} | {meta['wall_s']:.0f} s | "
                        f"{seeds_text(c.id, profile)} |")
        else:
            rows.append(f"| {c.id} | {c.title} | {c.figure} | not reproduced yet | | | |")
    n_pass = sum(bool(m["verdict"] and m["verdict"]["passed"]) for _, m in done.values())
    head = (f"{n_pass} of {len(done)} notebooks pass every check in the `{profile}` profile "
            f"({len(CLAIMS)} claims in all). A FAIL is a claim that did not reproduce here; its page says why.\n\n")
    return head + "\n".join(rows) + "\n"


def provenance_cell(meta):
    """A markdown cell stating how the page's outputs were made, appended to the executed notebook."""
    p = meta.get("provenance") or {}
    params = ", ".join(f"`{k}={v!r}`" for k, v in sorted(meta["parameters"].items()))
    lines = [f"- profile `{meta['profile']}`, overrides `{meta['overrides'] or 'none'}`",
             f"- parameters {params}",
             f"- commit `{meta['commit']}`, started {meta['started']}, wall time {meta['wall_s']} s",
             f"- device `{p.get('device')}`, torch {p.get('torch')}, python {p.get('python')}, {p.get('threads')} threads"]
    return nbformat.v4.new_markdown_cell("```{admonition} Provenance of this run\n" + "\n".join(lines) + "\n```")


def stage(done, profile):
    """Write the book's sources to build/book/<profile>: static pages, toc, dashboard, executed notebooks."""
    src = runner.BUILD / "book" / profile
    shutil.rmtree(src, ignore_errors=True)
    (src / "claims").mkdir(parents=True)
    for name in STATIC:
        shutil.copy(BOOK / name, src / name)
    intro = (src / "intro.md").read_text().replace("{{dashboard}}", dashboard(done, profile))
    (src / "intro.md").write_text(intro)
    for claim, (path, meta) in done.items():
        nb = nbformat.read(path, as_version=4)
        nb.cells.append(provenance_cell(meta))
        nbformat.write(nb, src / "claims" / f"{claim}.ipynb")
    parts = []
    for prefix, (title, _) in PAPERS.items():
        chapter = {"file": prefix.lower()}
        sections = [{"file": f"claims/{c}"} for c in done if c.startswith(prefix + "-")]
        parts.append({"caption": title, "chapters": [{**chapter, "sections": sections} if sections else chapter]})
    toc = {"format": "jb-book", "root": "intro", "parts": parts}
    (src / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False, width=200))
    return src


def jupyter_book():
    """The `jupyter-book` script of this environment (jupyter_book 1.x cannot be run with `python -m`)."""
    return str(Path(sys.executable).with_name("jupyter-book"))


def build(profile="default", strict=False, done=None, out=None):
    """Build the HTML book into <out>/_build/html and return its index.html.

    done: {claim: (executed notebook, its nbdemo metadata)}, by default `executed(profile)`, which runs the stale
    notebooks; out: book/ for the default profile, build/book-<profile> for the others.
    """
    done = executed(profile) if done is None else done
    src = stage(done, profile)
    out = out or (BOOK if profile == "default" else runner.BUILD / f"book-{profile}")
    cmd = [jupyter_book(), "build", str(src), "--path-output", str(out)]
    if strict:
        cmd += ["-W", "-n", "--keep-going"]
    subprocess.run(cmd, check=True)
    index = out / "_build" / "html" / "index.html"
    print(f"book: {index}")
    return index
