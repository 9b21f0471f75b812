"""Assemble the Jupyter Book: executed notebooks, the claims dashboard, and the offline HTML build."""
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import nbformat
import yaml

from . import results, runner
from .claims import CLAIMS, PAPERS, ROOT

BOOK = ROOT / "book"
STATIC = ["_config.yml", "intro.md", "references.bib"] + [f"{p.lower()}.md" for p in PAPERS]


def executed(profile):
    """{claim: (path, meta)} for every claim with a notebook, running those that are stale."""
    done = {}
    for c in CLAIMS.values():
        if c.notebook.exists():
            done[c.id] = runner.latest(c.id, profile) or runner.run(c.id, profile)
    return done


def badge(label):
    """An outcome as a coloured label (styled by _static/outcomes.css)."""
    return f'<span class="outcome {label.lower().replace(" ", "-")}">{label}</span>'


def dashboard(done, profile, summaries):
    rows = ["| Claim | Title | Paper figure | Over seeds | Reproduced | Seed-0 page | Runtime |",
            "|---|---|---|---|---|---|---|"]
    for c in CLAIMS.values():
        s = summaries.get(c.id)
        over = badge(s["headline"]) + (" (stale)" if s["stale"] else "") if s else "no sweep yet"
        k_of_n = f"{s['reproduced']} of {s['n']} seeds" if s else ""
        wall = f"{s['wall_s']:.0f} s" if s else ""
        if c.id in done:
            page = done[c.id][1]["verdict"]
            rows.append(f"| {{doc}}`{c.id} <claims/{c.id}>` | {c.title} | {c.figure} | {over} | {k_of_n} | "
                        f"{badge(page['outcome']) if page else 'no verdict'} | {wall} |")
        else:
            rows.append(f"| {c.id} | {c.title} | {c.figure} | {over} | {k_of_n} | not reproduced yet | |")
    lines = []
    for prefix, (title, _) in PAPERS.items():
        heads = Counter(s["headline"] for c, s in summaries.items() if c.startswith(prefix + "-"))
        n = sum(c.startswith(prefix + "-") for c in CLAIMS)
        lines.append(f"- **{prefix}** ({n} claims): " + (", ".join(f"{k} {badge(h)}" for h, k in heads.items())
                                                        or "no sweep yet"))
    head = (f"Each claim runs over seeds in the `{profile}` profile. {results.RULE} A run is INCONCLUSIVE when one of "
            "its requirements fails (the run did not reach the regime the claim is about), otherwise REPRODUCED "
            "when every check holds, otherwise NOT REPRODUCED. *Seed-0 page* is the outcome of the run shown on "
            "the claim's page; *runtime* is the median over the seeds, two runs at a time on the 2-core machine.\n\n")
    return head + "\n".join(lines) + "\n\n" + "\n".join(rows) + "\n"


def seeds_box(s, others):
    """The box that opens a claim page: the outcome over seeds, per-seed outcomes and per-row pass counts."""
    if not s:
        body = "No sweep over seeds is stored for this claim yet (`nbdemo sweep CLAIM --seeds 0-4`)."
    else:
        stale = f" Stale seeds (their code or parameters changed since): {s['stale']}." if s["stale"] else ""
        seeds = "\n".join(f"| {seed} | {badge(r['outcome'])} | {r['wall_s']:.0f} s |" for seed, r in s["runs"].items())
        rows = "\n".join(f"| {kind} | {name} | {k} of {n} |" for (kind, name), (k, n) in s["rows"].items())
        body = (f"**Over {s['n']} seeds: {badge(s['headline'])}** ({s['reproduced']} of {s['n']} reproduce).{stale}\n\n"
                f"| seed | outcome | wall time |\n|---|---|---|\n{seeds}\n\n"
                f"| kind | row | holds in |\n|---|---|---|\n{rows}\n\n{results.RULE}")
    if others:
        body += "\n\nOther profiles: " + ", ".join(
            f"{{doc}}`{p} <{doc}>` ({badge(m['verdict']['outcome']) if m['verdict'] else 'no verdict'}, "
            f"{(m['provenance'] or {}).get('gpu') or (m['provenance'] or {}).get('device')}, {m['wall_s']:.0f} s)"
            for p, doc, m in others)
    return nbformat.v4.new_markdown_cell("```{admonition} Outcome over seeds\n:class: seeds\n" + body + "\n```")


def findings(done, summaries):
    """The Findings page: the cells each notebook tags `finding`, then the claims that did not reproduce."""
    parts = ["# Findings\n", "What the reproduction found that the papers do not say, as each claim's notebook states it "
             "(cells tagged `finding`), and then every claim whose outcome over seeds (of at least "
             f"{results.MIN_SEEDS}) is not REPRODUCED.\n"]
    for claim, (path, _) in done.items():
        for cell in nbformat.read(path, as_version=4).cells:
            if cell.cell_type == "markdown" and "finding" in cell.metadata.get("tags", []):
                parts.append(f"## {claim}: {CLAIMS[claim].title}\n\n{cell.source}\n\n"
                             f"See {{doc}}`the notebook <claims/{claim}>`.\n")
    parts.append("## Claims that did not reproduce over seeds\n")
    missed = [f"- {{doc}}`{c} <claims/{c}>` {CLAIMS[c].title}: {badge(s['headline'])}, {s['reproduced']} of {s['n']} "
              "seeds reproduce" for c, s in summaries.items()
              if s["headline"] not in ("REPRODUCED", results.TOO_FEW) and c in done]
    parts.append("\n".join(missed) if missed else "None.")
    return "\n".join(parts) + "\n"


def provenance_cell(meta):
    """A markdown cell stating how the page's outputs were made, appended to the executed notebook."""
    p = meta.get("provenance") or {}
    params = ", ".join(f"`{k}={v!r}`" for k, v in sorted(meta["parameters"].items()))
    lines = [f"- profile `{meta['profile']}`, overrides `{meta['overrides'] or 'none'}`",
             f"- parameters {params}",
             f"- commit `{meta['commit']}`, started {meta['started']}, wall time {meta['wall_s']} s",
             f"- device `{p.get('device')}`" + (f" ({p['gpu']})" if p.get("gpu") else "") +
             f", torch {p.get('torch')}, python {p.get('python')}, {p.get('threads')} threads"]
    return nbformat.v4.new_markdown_cell("```{admonition} Provenance of this run\n" + "\n".join(lines) + "\n```")


def other_profiles(claim):
    """[(profile, its executed notebook)] committed in results/ for the profiles other than the default."""
    return [(p, nb) for p in runner.profiles(claim) if p != "default" and (nb := results.executed(claim, p))]


def stage(done, profile):
    """Write the book's sources to build/book/<profile>: static pages, toc, dashboard, findings, claim pages."""
    src = runner.BUILD / "book" / profile
    shutil.rmtree(src, ignore_errors=True)
    (src / "claims").mkdir(parents=True)
    for name in STATIC:
        shutil.copy(BOOK / name, src / name)
    shutil.copytree(BOOK / "_static", src / "_static")
    summaries = {c: s for c in CLAIMS if (s := results.summary(c, profile))}
    intro = (src / "intro.md").read_text().replace("{{dashboard}}", dashboard(done, profile, summaries))
    (src / "intro.md").write_text(intro)
    (src / "findings.md").write_text(findings(done, summaries))
    sections = {}
    for claim, (path, meta) in done.items():
        others = []
        for other, nb_path in other_profiles(claim):
            nb = nbformat.read(nb_path, as_version=4)
            nb.cells.append(provenance_cell(nb.metadata["nbdemo"]))
            nbformat.write(nb, src / "claims" / f"{claim}-{other}.ipynb")
            others.append((other, f"{claim}-{other}", nb.metadata["nbdemo"]))
        nb = nbformat.read(path, as_version=4)
        nb.cells.insert(1, seeds_box(summaries.get(claim), others))
        nb.cells.append(provenance_cell(meta))
        nbformat.write(nb, src / "claims" / f"{claim}.ipynb")
        sections[claim] = [{"file": f"claims/{claim}", **({"sections": [{"file": f"claims/{doc}"} for _, doc, _ in others]}
                                                        if others else {})}]
    parts = []
    for prefix, (title, _) in PAPERS.items():
        chapter = {"file": prefix.lower()}
        mine = [sec for c, secs in sections.items() if c.startswith(prefix + "-") for sec in secs]
        parts.append({"caption": title, "chapters": [{**chapter, "sections": mine} if mine else chapter]})
    parts.append({"caption": "Findings", "chapters": [{"file": "findings"}]})
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
