"""Assemble the Jupyter Book: the executed notebooks and the generated pages (`nbdemo.book.pages`) staged as a book's
sources, its configuration, and the offline HTML build."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import yaml

from nbdemo.book.claim_page import brief_box, profile_title, verdict_line
from nbdemo.book.claim_page import sections as collapsed
from nbdemo.book.staging import book_notebook, relabel
from nbdemo.book.findings import findings
from nbdemo.book.pages import chapter, citation, dashboard, findings_by_claim, summary, urls
from nbdemo.claims.registry import CLAIMS, PAPERS, ROOT
from nbdemo.runs import evidence, rules, runner, store

BOOK = ROOT / "book"
STATIC = ["_config.yml", "intro.md", "references.bib"] + [f"{p.lower()}.md" for p in PAPERS]


# MathJax 2 as Debian's libjs-mathjax installs it (`make system`), of which the book serves the parts that TeX input
# and CommonHTML output load, so that its maths renders offline; without it the book loads MathJax from a CDN.
MATHJAX = Path(os.environ.get("NBDEMO_MATHJAX", "/usr/share/javascript/mathjax"))
MATHJAX_PARTS = ["MathJax.js", "config/TeX-AMS_CHTML.js", "jax/input/TeX", "jax/output/CommonHTML",
                 "jax/output/PreviewHTML", "jax/element", "extensions", "fonts/HTML-CSS/TeX/woff", "localization/en"]


def executed(profile):
    """{Claim: (path, meta)} for every claim with a notebook, running those that are stale."""
    done = {}
    for c in CLAIMS.values():
        if c.notebook.exists():
            done[c] = runner.latest(c, profile) or runner.run(c, profile)
    return done


def stage(done, profile):
    """Write the book's sources to build/book/<profile>: static pages, toc, dashboard, findings, claim pages."""
    src = runner.BUILD / "book" / profile
    shutil.rmtree(src, ignore_errors=True)
    (src / "claims").mkdir(parents=True)
    for name in STATIC:
        shutil.copy(BOOK / name, src / name)
    for folder in ("_static", "_ext"):
        shutil.copytree(BOOK / folder, src / folder)
    config(src)
    summaries = {c: s for c in CLAIMS.values() if (s := evidence.assess(c, profile))}
    intro = (src / "intro.md").read_text().replace("{{dashboard}}", dashboard(done, profile, summaries))
    intro = intro.replace("{{citation}}", citation()).replace("{{rule}}", rules.RULE)
    intro = intro.replace("{{summary}}", summary(done, profile, summaries))
    for prefix in PAPERS:
        page = src / f"{prefix.lower()}.md"
        page.write_text(page.read_text() + chapter(prefix, done, summaries))
    (src / "intro.md").write_text(intro)
    (src / "findings.md").write_text(findings(done, summaries))
    sections, found = {}, findings_by_claim(done)
    for claim, (path, meta) in done.items():
        others = []
        for other, nb_path in store.kept(claim):
            nb, suffix = nbformat.read(nb_path, as_version=4), re.sub(r"[^A-Za-z0-9_-]", "-", other)  # a page's name
            nb = book_notebook(relabel(nb, suffix), nb.metadata["nbdemo"],
                               title=profile_title(claim, other, nb.metadata["nbdemo"]))
            nbformat.write(nb, src / "claims" / f"{claim.id}-{suffix}.ipynb")
            others.append((other, f"{claim.id}-{suffix}", nb.metadata["nbdemo"]))
        s = summaries.get(claim)
        stored = ""
        if s and store.path(claim, profile).exists():  # the stored results, downloadable from the page
            to = src / "claims" / "stored" / profile / f"{claim.id}.json"
            to.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(store.path(claim, profile), to)
            stored = (f"**Stored results:** {{download}}`{claim.id}.json <stored/{profile}/{claim.id}.json>` "
                      f"(`results/{profile}/{claim.id}.json` in the repository: every seed's rows and parameters)")
        nb = book_notebook(nbformat.read(path, as_version=4), meta, [brief_box(claim, s, meta, found.get(claim))],
                           collapsed(claim, s, others, meta, stored), verdict_line(claim, s, meta, found.get(claim)), s)
        nbformat.write(nb, src / "claims" / f"{claim.id}.ipynb")
        sections[claim] = [{"file": f"claims/{claim.id}", **({"sections": [{"file": f"claims/{doc}"} for _, doc, _ in others]}
                                                        if others else {})}]
    parts = []
    for prefix, (title, _) in PAPERS.items():
        entry = {"file": prefix.lower()}
        mine = [sec for c, secs in sections.items() if c.paper == prefix for sec in secs]
        parts.append({"caption": title, "chapters": [{**entry, "sections": mine} if mine else entry]})
    parts.append({"caption": "Findings", "chapters": [{"file": "findings"}]})
    toc = {"format": "jb-book", "root": "intro", "parts": parts}
    (src / "_toc.yml").write_text(yaml.safe_dump(toc, sort_keys=False, width=200))
    return src


def config(src):
    """Complete the staged _config.yml: the repository and the book's address where they are given (`urls`; else
    no repository button and no address), and MathJax served
    from the book (when MathJax is here), copied to the site's mathjax/ as an extra path: Jupyter Book would load
    every script of a static path on every page."""
    conf = yaml.safe_load((src / "_config.yml").read_text())
    sphinx = conf["sphinx"]["config"]
    repo, site = urls()["Repository"], urls()["Documentation"]
    if repo:
        conf["repository"] = {"url": repo, "branch": "main", "path_to_book": "book"}
    conf["html"].update(use_repository_button=bool(repo), use_issues_button=bool(repo))
    if site:
        conf["html"]["baseurl"] = site
    if (MATHJAX / "MathJax.js").exists():
        sphinx["html_extra_path"] = ["_extra"]
        for part in MATHJAX_PARTS:
            to = src / "_extra" / "mathjax" / part
            to.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if (MATHJAX / part).is_dir() else shutil.copy)(MATHJAX / part, to)
        sphinx["mathjax_path"] = "../mathjax/MathJax.js?config=TeX-AMS_CHTML"  # relative to _static
        # MyST-NB marks a notebook's page as not maths, and its maths as class `math`, for MathJax 3; this is MathJax 2
        sphinx["mathjax2_config"] = {"tex2jax": {"processClass": "math|output_area|tex2jax_process"}}
    else:
        print(f"book: no MathJax in {MATHJAX} (Debian's libjs-mathjax), so the book's maths loads it from a CDN")
    (src / "_config.yml").write_text(yaml.safe_dump(conf, sort_keys=False, allow_unicode=True))


def jupyter_book():
    """The `jupyter-book` script of this environment (jupyter_book 1.x cannot be run with `python -m`)."""
    return str(Path(sys.executable).with_name("jupyter-book"))


def build(profile="default", strict=False, done=None, out=None):
    """Build the HTML book into <out>/_build/html and return its index.html.

    done: {Claim: (executed notebook, its nbdemo metadata)}, by default `executed(profile)`, which runs the stale
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
