"""The book's generated pages, as Markdown and HTML: the dashboard and summary, the chapter tables, each claim's
boxes (outcome over seeds, control, evidence per row, verdict table, rerun, provenance), and the Findings page.

`done` ({Claim: (executed notebook, its nbdemo metadata)}) and the summaries are keyed by `Claim`."""
import html
import re
import tomllib
from collections import Counter

import nbformat
import yaml

from nbdemo.claims.registry import CLAIMS, PAPERS, ROOT
from nbdemo.claims.verdict import describe
from nbdemo.runs import evidence, params


def table(header, rows, cls=""):
    """An HTML table that wraps: each cell carries its column's name, so that _static/outcomes.css can stack a row
    into labelled lines where the column is narrow. Cells are HTML (escape text with `text`). One line, so that
    MyST passes it through whole."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td data-label="{h}">{c}</td>' for h, c in zip(header, row)) + "</tr>"
                   for row in rows)
    return (f'<div class="nbdemo-table"><table class="nbdemo {cls}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


LINE_REFS = [(r"\s*\(l\.\s?\d+(?:[-–]\d+)?\)", ""),  # "(l.325)"
             (r",\s*l\.\s?\d+(?:[-–]\d+)?\b", ""),  # "(§3.3, l.297-304)"
             (r"\bl\.\s?\d+(?:[-–]\d+)?[:,]\s*", ""),  # "(l.278: at ...", "l.49, Fig. 2a"
             (r"\s*\bl\.\s?\d+(?:[-–]\d+)?\b", "")]


def readable(s):
    """Text without the line numbers of the project's private text copies of the papers ("Fig. 7, l.180" reads
    "Fig. 7"): a reader can follow a section, equation or figure, not a line."""
    for pattern, by in LINE_REFS:
        s = re.sub(pattern, by, s)
    return re.sub(r"\s*\(\s*\)", "", s)  # "(l.170, l.178)" leaves "()"


def text(s):
    """Plain text as an HTML cell."""
    return html.escape(readable(str(s)))


def slug(label):
    return label.lower().replace(" ", "-")


def badge(label):
    """An outcome as a coloured label (styled by _static/outcomes.css)."""
    return f'<span class="outcome {slug(label)}">{label}</span>'


def over_seeds(s):
    """The dashboard's cell of a claim's headline over seeds, with its marks."""
    marks = [m for m, on in [("stale", s["stale"]), ("uninformative check", s["uninformative"]),
                             ("threshold-sensitive", any(f and f["sensitive"] for f in s["flips"].values()))] if on]
    return badge(s["headline"]) + (f" ({', '.join(marks)})" if marks else "")


def control_cell(s):
    """The dashboard's cell of a claim's control: its outcome over seeds, or why it has none."""
    decl = s["declared"] if s else None
    if decl is None:
        return "not declared"
    if decl["profile"] is None:
        return "none (see page)"
    c = s["control"]
    if not c:
        return "not run yet"
    return badge(c["headline"]) + (" (control reproduces!)" if c["headline"] == "REPRODUCED" else "")


DASHBOARD = ["Claim", "Over seeds", "Reproduced", "Control", "Setting", "Seed 0", "Runtime", "Title", "Paper figure"]


def departures(claim):
    """How the default profile departs from the paper's settings: ["width 64 (paper 1024)", ...] over the parameters
    that the `paper` profile sets; None for a claim without a paper profile."""
    paper = params.profiles(claim).get("paper")
    if paper is None:
        return None
    default = params.defaults(claim)
    return [f"{k} {default[k]} (paper {v})" for k, v in paper.items() if k in default and default[k] != v]


def setting_word(claim):
    """The dashboard's Setting cell: whether the default profile is the paper's setting or a substitute for it."""
    d = departures(claim)
    return "no paper profile" if d is None else "substitute" if d else "the paper's"


def setting_text(claim):
    """The claim page's sentence on the setting its outcome comes from."""
    d = departures(claim)
    if d is None:
        return "**Setting:** the default profile; the claim has no paper profile to compare it with."
    if not d:
        return "**Setting:** the default profile sets every parameter of the paper's profile as the paper does."
    return ("**Setting: a substitute.** The outcomes here come from the default profile, which departs from the "
            f"paper's settings (the `paper` profile) in: {'; '.join(text(x) for x in d)}. A result of a substitute "
            "setting is not a result about the paper's own.")


def dashboard(done, profile, summaries):
    rows = []
    for c in CLAIMS.values():
        s = summaries.get(c)
        if c in done:
            link = f'<a class="reference internal" href="claims/{c.id}.html">{c.id}</a>'
            seed0 = badge(v["outcome"]) if (v := done[c][1]["verdict"]) else "no verdict"
        else:
            link, seed0 = c.id, "not reproduced yet"
        rows.append([link, over_seeds(s) if s else "no sweep yet", f"{s['reproduced']} of {s['n']} seeds" if s else "",
                     control_cell(s), setting_word(c), seed0, f"{s['wall_s']:.0f} s" if s else "", text(c.title),
                     text(c.figure)])
    head = (f"Each claim runs over seeds in the `{profile}` profile. {evidence.RULE} A run is INCONCLUSIVE when one of "
            "its requirements fails (the run did not reach the regime the claim is about), otherwise REPRODUCED "
            f"when every check holds, otherwise NOT REPRODUCED. {evidence.RULE} *Control* is the outcome of the "
            "claim's negative control over the same seeds, which must not reproduce. *Setting* says whether the default "
            "profile is the paper's setting or a substitute for it (the claim's page lists how it departs). *Seed 0* is "
            "the outcome "
            "of the run shown on the claim's page; *runtime* is the median over the seeds, one run at a time on "
            "the 2-core machine.\n\n")
    return head + table(DASHBOARD, rows, "dashboard") + "\n"


def counts(claims, summaries):
    """"3 REPRODUCED, 1 MIXED, 2 without a sweep yet": the claims' headlines over seeds, counted."""
    heads = Counter(summaries[c]["headline"] for c in claims if c in summaries)
    unswept = sum(c not in summaries for c in claims)
    return ", ".join([f"{k} {badge(h)}" for h, k in heads.most_common()] +
                     ([f"{unswept} without a sweep yet"] if unswept else []))


def summary(done, profile, summaries):
    """The reproducibility summary that opens the book: scope, setting, outcomes over seeds, main findings."""
    papers = [f"{prefix} {sum(c.paper == prefix for c in CLAIMS.values())}" for prefix in PAPERS]
    per_paper = "\n".join(f"  - {{doc}}`{prefix} <{prefix.lower()}>`: {counts([c for c in CLAIMS.values() if c.paper == prefix], summaries)}"
                          for prefix in PAPERS)
    found = finding_cells(done)
    kinds = "\n".join(f"  - {title}: {', '.join(c.id for c, _ in found[kind])}" for kind, (title, _) in FINDING_KINDS.items()
                      if found[kind])
    return (f"- **Scope:** {len(CLAIMS)} claims of four papers ({', '.join(papers)}), one notebook each, each ending "
            "in a verdict whose rows (requirements, checks, notes) and thresholds were fixed before the results were "
            "seen, run over seeds beside a negative control (or the reason a claim has none).\n"
            f"- **Setting:** every outcome over seeds in this book comes from the `{profile}` profile, a substitute for the "
            "papers' settings that runs on a 2-core CPU in about a minute per run (Fashion-MNIST, MNIST-1D or "
            "synthetic data, smaller networks, fewer steps); each notebook's `paper` profile holds the paper's own "
            "settings, for a GPU. A claim that does not reproduce here is not thereby refuted.\n"
            f"- **Outcomes over seeds:** {counts(list(CLAIMS.values()), summaries)}.\n{per_paper}\n"
            f"- **Main findings** ({{doc}}`findings`), by claim:\n{kinds or '  - none tagged yet'}\n")


def chapter(prefix, done, summaries):
    """The end of a paper's chapter page: its claims, each with its outcome over seeds."""
    claims = [c for c in CLAIMS.values() if c.paper == prefix]
    rows = [[f'<a class="reference internal" href="claims/{c.id}.html">{c.id}</a>' if c in done else c.id,
             over_seeds(summaries[c]) if c in summaries else "no sweep yet", text(c.title), text(c.figure)]
            for c in claims]
    return (f"\n## The claims and their outcomes\n\nOver seeds, in this book's default setting: "
            f"{counts(claims, summaries)}.\n\n" + table(["Claim", "Over seeds", "Title", "Paper figure"], rows, "chapter")
            + "\n")


def _spread(x):
    if not x:
        return ""
    worst = f" (worst of {x['k']})" if x["k"] > 1 else ""
    if x["n"] == 1:
        return f"{x['mean']:.3g}{worst}"
    return f"{x['mean']:.3g} ({x['min']:.3g} to {x['max']:.3g}, n = {x['n']}){worst}"


def _threshold(row):
    """A row's comparison and threshold, with its source: the paper's section, equation or figure, or ours and why."""
    src = row.get("source")  # rows stored before sources were recorded have none
    if not src:
        return row["expected"]
    where = src["where"] if src["from"] == "paper" else f"ours: {src['why']}"
    return f"{row['expected']} ({where})"


EVIDENCE = ["Kind", "Row", "Holds in", "Over seeds", "Threshold (source)", "Holds in control", "In control",
            "Headline flips at"]


def evidence_table(s):
    """Per row: how often it holds over the seeds, its statistic over seeds (mean, min to max), its threshold and
    source, the same in the control, and where a threshold of ours would flip the headline."""
    ctrl = s["control"]["rows"] if s["control"] else {}
    rows = []
    for row, spread, cspread in s["effects"] or []:
        key = (row["kind"], row["name"])
        k, n = s["rows"].get(key, ("", ""))
        ck = ctrl.get(key)
        in_ctrl = f"{ck[0]} of {ck[1]}" + (" (uninformative)" if row["name"] in s["uninformative"] else "") if ck \
            else ""
        f = s["flips"].get(row["name"])
        at = "" if row["name"] not in s["flips"] else "no flip" if f is None else \
            f"{f['at']:.3g} → {f['headline']}" + (" (sensitive)" if f["sensitive"] else "")
        rows.append([text(x) for x in (row["kind"], row["name"], f"{k} of {n}" if n else "", _spread(spread),
                                       _threshold(row), in_ctrl, _spread(cspread), at)])
    return table(EVIDENCE, rows, "evidence")


VERDICT = ["Result", "Kind", "Row", "Measured", "Threshold (source)"]
MARKS = {True: "PASS", False: "FAIL", None: "–"}


def verdict_cell(meta):
    """The verdict of the run on the page as a table that wraps. The notebook prints it as monospace text (what
    nbval compares), which the book keeps behind a toggle."""
    v = meta["verdict"]
    rows = [[f'<span class="outcome {slug(MARKS[r["ok"]]) if r["ok"] is not None else "note"}">{MARKS[r["ok"]]}</span>',
             text(r["kind"]), text(r["name"]), text(r["measured"]), text(_threshold(r))] for r in v["rows"]]
    head = (f"**Verdict of the run on this page** (seed {meta['parameters'].get('seed')}, profile "
            f"`{meta['profile']}`): {badge(v['outcome'])} {describe(v['rows']).removeprefix(v['outcome'])}")
    return nbformat.v4.new_markdown_cell(head + "\n\n" + table(VERDICT, rows, "verdict"),
                                         metadata={"tags": ["verdict-table"]})


def control_text(s):
    decl = s["declared"]
    if decl is None:
        return "**Negative control:** none declared yet."
    if decl["profile"] is None:
        return f"**Negative control:** none. {readable(decl['about'])}"
    c = s["control"]
    runs = (f"Over {c['n']} seeds the control is {badge(c['headline'])} ({c['reproduced']} of {c['n']} reproduce)."
            if c else "The control has not been run yet (`nbdemo sweep CLAIM --profile control --seeds 0-4`).")
    useless = (f" Checks that hold in the control too, and so are no evidence: {'; '.join(s['uninformative'])}."
               if s["uninformative"] else "")
    return f"**Negative control** (profile `control`): {readable(decl['about'])} {runs}{useless}"


def seeds_box(claim, s, others, meta):
    """The box that opens a claim page: the outcome over seeds and per seed, the setting it comes from, which seed
    the page shows, the control, and per row its threshold, source, pass counts, statistic over seeds and flip point."""
    if not s:
        body = "No sweep over seeds is stored for this claim yet (`nbdemo sweep CLAIM --seeds 0-4`)."
    else:
        stale = f" Stale seeds (their code or parameters changed since): {s['stale']}." if s["stale"] else ""
        judged = (f" The seeds alone give {badge(s['over_seeds'])}; a check that the control passes too makes it "
                  f"{badge(s['headline'])}." if s["over_seeds"] != s["headline"] else "")
        seeds = table(["Seed", "Outcome", "Wall time"], [[seed, badge(r["outcome"]), f"{r['wall_s']:.0f} s"]
                                                         for seed, r in s["runs"].items()], "seeds")
        body = (f"**Over {s['n']} seeds: {badge(s['headline'])}** ({s['reproduced']} of {s['n']} reproduce).{judged}"
                f"{stale}\n\n{seeds}\n\n{control_text(s)}\n\n{evidence_table(s)}\n\n{evidence.RULE} {evidence.RULE}")
    if meta["verdict"]:
        body += (f"\n\nThe run on this page is seed {meta['parameters'].get('seed')} of the `{meta['profile']}` "
                 f"profile: {badge(meta['verdict']['outcome'])}.")
    body += f"\n\n{setting_text(claim)}"
    if others:
        body += "\n\nOther profiles: " + ", ".join(
            f"{{doc}}`{p} <{doc}>` ({badge(m['verdict']['outcome']) if m['verdict'] else 'no verdict'}, "
            f"{(m['provenance'] or {}).get('gpu') or (m['provenance'] or {}).get('device')}, {m['wall_s']:.0f} s)"
            for p, doc, m in others)
    colour = slug(s["headline"]) if s else "none"
    return nbformat.v4.new_markdown_cell(f"```{{admonition}} Outcome over seeds\n:class: seeds box-{colour}\n{body}\n```")


def rerun_box(claim):
    """How to rerun the claim: its one command, in the default profile and the paper's, and its notebook."""
    paper = "paper" in params.profiles(claim)
    lines = ["# the default profile: a 2-core CPU, about a minute", f"nbdemo run {claim.id}",
             *(["# the paper's settings, for a GPU", f"nbdemo run {claim.id} --profile paper"] if paper else []),
             "# the outcome over seeds", f"nbdemo sweep {claim.id} --seeds 0-4"]
    notebook = f"{urls()['Repository']}/blob/main/notebooks/{claim.id}.ipynb"
    body = ("```bash\n" + "\n".join(lines) + "\n```\n\n"
            f"From a clone of the repository, after `make setup`, with `.venv/bin` on the PATH (README). The notebook: [{claim.id}.ipynb]({notebook}) "
            "in the repository, or this page's download button (.ipynb).")
    return nbformat.v4.new_markdown_cell("````{admonition} Rerun this claim\n:class: rerun\n" + body + "\n````")


def book_notebook(nb, meta, box=None):
    """A claim's page: its notebook with the box (`seeds_box`) first, the verdict as a table after the verdict cell
    (whose printed text is kept behind a toggle), the provenance last, and no line numbers of the paper's text
    copy in its prose. The committed notebook is not changed."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = readable(cell.source)
    at = next((i for i, cell in enumerate(nb.cells) if "nbval-check-output" in cell.metadata.get("tags", [])), None)
    if at is not None and meta["verdict"]:
        nb.cells[at].metadata["tags"] = nb.cells[at].metadata["tags"] + ["hide-output"]
        nb.cells.insert(at + 1, verdict_cell(meta))
    if box:
        nb.cells.insert(1, box)
    nb.cells.append(provenance_cell(meta))
    return nb


def relabel(nb, suffix):
    """The notebook with its figures' names, and the references to them, ending in `-<suffix>`: another profile's
    run of a claim is a second page of the same notebook, and Sphinx wants each label once in the book."""
    figures = [fig for cell in nb.cells if "name" in (fig := cell.metadata.get("mystnb", {}).get("figure", {}))]
    if not figures:
        return nb
    names = "|".join(re.escape(fig["name"]) for fig in figures)
    for fig in figures:
        fig["name"] += f"-{suffix}"
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = re.sub(rf"(?<=[<`])({names})(?=[>`])", rf"\1-{suffix}", cell.source)
    return nb


FINDING_KINDS = {
    "finding-false": ("The paper's statement is false or vacuous where its premises hold",
                      "Each of these holds whatever the setting: a counterexample, an empty bound, a quantity that is "
                      "constant by construction, or a solver that does not reach what the paper says it reaches."),
    "finding-substitute": ("Not reproduced in this book's substitute setting",
                           "Each of these is a result of the default profile's setting, which the finding names (a "
                           "smaller network, Fashion-MNIST or synthetic data, fewer steps). It is not a refutation of "
                           "the paper, whose own setting may behave otherwise; the paper profile is how to find out."),
    "finding-inconclusive": ("Inconclusive: the run did not reach the claim's regime",
                             "Each of these says what would reach the regime."),
}


def finding_cells(done):
    """{kind (a key of FINDING_KINDS, or None): [(claim, markdown cell tagged `finding`)]}."""
    found = {kind: [] for kind in [*FINDING_KINDS, None]}
    for claim, (path, _) in done.items():
        for cell in nbformat.read(path, as_version=4).cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type == "markdown" and "finding" in tags:
                found[next((t for t in tags if t in FINDING_KINDS), None)].append((claim, cell))
    return found


def glued_from(claim, source):
    """A claim's markdown with its glue roles pointing at the claim's page (`{glue:text}`x:.3g`` reads
    `{glue:text}`claims/PFC-5.ipynb::x:.3g``), so that a cell copied onto another page shows the run's numbers."""
    return re.sub(r"(\{glue(?::\w+)?\}`)(?![^`]*::)", rf"\1claims/{claim.id}.ipynb::", source)


def findings(done, summaries):
    """The Findings page, by kind of finding: the cells each notebook tags `finding` with `finding-false`,
    `finding-substitute` or `finding-inconclusive`, then the claims whose headline over seeds is not REPRODUCED."""
    parts = ["# Findings\n", "What the reproduction found that the papers do not say, as each claim's notebook states it "
             "(cells tagged `finding`), grouped by the kind of finding, and then every claim whose outcome over seeds "
             f"(of at least {evidence.MIN_SEEDS}) is not REPRODUCED.\n"]
    found = finding_cells(done)
    cells = {kind: [(f"### {claim.id}: {claim.title}\n\n{glued_from(claim, readable(cell.source))}\n\n"
                     f"See {{doc}}`the notebook <claims/{claim.id}>`.\n") for claim, cell in found[kind]]
             for kind in found}
    other = cells.pop(None)
    for kind, (title, about) in FINDING_KINDS.items():
        if cells[kind]:
            parts += [f"## {title}\n\n{about}\n"] + cells[kind]
    if other:
        parts += ["## Other findings\n"] + other
    parts.append("## Claims that did not reproduce over seeds\n")
    missed = {c: s for c, s in summaries.items() if s["headline"] not in ("REPRODUCED", evidence.TOO_FEW) and c in done}

    def line(c, s):
        why = [f"requirement “{name}” met in {k} of {n} seeds" for (kind, name), (k, n) in s["rows"].items()
               if kind == "requirement" and k < n]
        why += [f"check “{name}” holds in the control" for name in s["uninformative"]]
        return (f"- {{doc}}`{c.id} <claims/{c.id}>` {c.title}: {badge(s['headline'])}, {s['reproduced']} of "
                f"{s['n']} seeds reproduce" + (f" ({'; '.join(why)})" if s["headline"] == "INCONCLUSIVE" else ""))
    groups = [("Not reproduced, in the default profile's substitute setting (see each page for the setting)",
               [c for c, s in missed.items() if s["headline"] != "INCONCLUSIVE"]),
              ("Inconclusive: a requirement failed, or a check also holds in the control",
               [c for c, s in missed.items() if s["headline"] == "INCONCLUSIVE"])]
    for title, claims in groups:
        if claims:
            parts.append(f"### {title}\n\n" + "\n".join(line(c, missed[c]) for c in claims) + "\n")
    if not missed:
        parts.append("None.")
    return "\n".join(parts) + "\n"


def provenance_cell(meta):
    """A markdown cell stating how the page's outputs were made, appended to the executed notebook: with the lock
    of its environment (`nbdemo.runs.lock`), and the profile's stored seeds made under another lock than the book's."""
    from nbdemo.claims.registry import get
    from nbdemo.runs import lock, store
    p = meta.get("provenance") or {}
    others = lock.other_locks(store.load(get(meta["claim"]), meta["profile"], meta["overrides"]))
    params = ", ".join(f"`{k}={v!r}`" for k, v in sorted(meta["parameters"].items()))
    lines = [f"- profile `{meta['profile']}`, overrides `{meta['overrides'] or 'none'}`",
             f"- parameters {params}",
             f"- commit `{meta['commit']}`, started {meta['started']}, wall time {meta['wall_s']} s",
             f"- device `{p.get('device')}`" + (f" ({p['gpu']})" if p.get("gpu") else "") +
             f", torch {p.get('torch')}, python {p.get('python')}, {p.get('threads')} threads"
             + (f", CPU {p['cpu']}" if p.get("cpu") else ""),
             f"- environment: {lock.shown(p)}"]
    if others:
        lines.append(f"- stored runs of this profile not made under the book's lock: {others}")
    return nbformat.v4.new_markdown_cell("```{admonition} Provenance of this run\n" + "\n".join(lines) + "\n```")


def urls():
    """{"Repository", "Documentation"}: the addresses of the repository and of the published book (pyproject.toml)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]


def citation():
    """The BibTeX entry of this book, from CITATION.cff."""
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    return (f"```bibtex\n@software{{nbdemo,\n  title   = {{{{{cff['title']}}}}},\n"
            f"  author  = {{{{{cff['authors'][0]['name']}}}}},\n  version = {{{cff['version']}}},\n"
            f"  url     = {{{cff['url']}}},\n  note    = {{code: {cff['repository-code']}}}\n}}\n```")
