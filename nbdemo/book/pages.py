"""The book's generated pages: the dashboard, the summary that opens the book, the chapters' tables of claims, and
the book's addresses and citation. Each claim's evidence comes whole from `nbdemo.runs.evidence.assess` (its
"summary", keyed by `Claim`); these functions only format it. `done` is {Claim: (executed notebook, its nbdemo
metadata)}."""
import tomllib
from collections import Counter

import yaml

from nbdemo.book.findings import FINDING_KINDS, finding_cells
from nbdemo.book.markup import badge, interval, table, text
from nbdemo.claims.registry import CLAIMS, PAPERS, ROOT
from nbdemo.claims.verdict import REPRODUCED
from nbdemo.runs import params, rules


def is_stale(s):
    """Whether a claim's headline rests on stored runs (its own or its control's) that today's code or parameters
    would not make: it is shown as the last stored headline, never as current."""
    return bool(s["stale"] or s["stale_control"])


def fresh_differs(s):
    """The headline of the seeds first run after the claim's last revision, where they are enough for one and it
    differs from the headline over all seeds; else None."""
    fresh = s["history"]["fresh"] if s["history"] else None
    return fresh["headline"] if fresh and fresh["n"] >= rules.MIN_SEEDS and fresh["headline"] != s["headline"] \
        else None


def over_seeds(s):
    """The cell of a claim's headline over seeds, with its marks (a stale headline is shown as the last stored)."""
    marks = [m for m, on in [("untested check", s["untested"]), ("uninformative check", s["uninformative"]),
                             ("threshold-sensitive", s["sensitive"]),
                             (f"fresh seeds alone: {fresh_differs(s)}", fresh_differs(s))] if on]
    head = badge(s["headline"]) + (f" ({', '.join(marks)})" if marks else "")
    return f'<span class="outcome stale">STALE</span> last stored: {head}' if is_stale(s) else head


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
    return badge(c["headline"]) + (" (control reproduces!)" if c["headline"] == REPRODUCED else "")


def revised_cell(s):
    """The dashboard's count of a claim's revisions after results."""
    h = s["history"]
    if not h or not h["revised"]:
        return "none"
    return f"{h['revised']} ({h['declared']} declared)"


DASHBOARD = ["Claim", "Over seeds", "Reproduced", "Control", "Revised", "Setting", "Seed 0", "Runtime", "Title",
             "Paper figure"]


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
        rows.append([link, over_seeds(s) if s else "no sweep yet", interval(s) if s else "", control_cell(s),
                     revised_cell(s) if s else "", setting_word(c), seed0, f"{s['wall_s']:.0f} s" if s else "",
                     text(c.title), text(c.figure)])
    head = (f"Each claim runs over seeds in the `{profile}` profile, and its headline over them follows "
            "{ref}`the rule below <rule>`. *Reproduced* counts the seeds that reproduce, with the 95% interval of "
            "their share. A run is INCONCLUSIVE when one of its requirements fails (the run did not reach the regime "
            "the claim is about), otherwise REPRODUCED when every check holds and one of them is tested and failed "
            "by the control, otherwise NOT REPRODUCED. *Control* is the outcome of the claim's negative control over "
            "seeds 0-4, which must not reproduce. *Revised* counts the changes of a check, threshold, requirement, "
            "reading, setting or control made after an earlier result of the claim was stored (the claim's page "
            "lists its history). A STALE headline is the last one stored: the code or parameters have changed "
            "since, and the sweep has not been rerun. *Setting* says whether the default profile is the paper's "
            "setting or a substitute for it. *Seed 0* is the outcome of the run shown on the claim's page; "
            "*runtime* is the median over the seeds, one run at a time on the 2-core machine.\n\n")
    return head + table(DASHBOARD, rows, "dashboard") + "\n"


def counts(claims, summaries):
    """"3 REPRODUCED, 1 MIXED, 2 without a sweep yet": the claims' headlines over seeds, counted."""
    heads = Counter(summaries[c]["headline"] for c in claims if c in summaries)
    unswept = sum(c not in summaries for c in claims)
    stale = sum(is_stale(summaries[c]) for c in claims if c in summaries)
    return ", ".join([f"{k} {badge(h)}" for h, k in heads.most_common()] +
                     ([f"{unswept} without a sweep yet"] if unswept else []) +
                     ([f"{stale} of them stale (the last stored headline)"] if stale else []))


def summary(done, profile, summaries):
    """The reproducibility summary that opens the book: scope, setting, outcomes over seeds, main findings."""
    papers = [f"{prefix} {sum(c.paper == prefix for c in CLAIMS.values())}" for prefix in PAPERS]
    per_paper = "\n".join(f"  - {{doc}}`{prefix} <{prefix.lower()}>`: "
                          f"{counts([c for c in CLAIMS.values() if c.paper == prefix], summaries)}" for prefix in PAPERS)
    found = finding_cells(done)
    kinds = "\n".join(f"  - {title}: {', '.join(c.id for c, _ in found[kind])}"
                      for kind, (title, _) in FINDING_KINDS.items() if found[kind])
    return (f"- **Scope:** {len(CLAIMS)} claims of four papers ({', '.join(papers)}), one notebook each, each ending "
            "in a verdict whose rows (requirements, checks, notes) and thresholds were fixed before the results were "
            "seen, run over seeds beside a negative control (or the reason a claim has none). Each claim's page "
            "lists the revisions made after results, and the seeds first run after the last of them.\n"
            f"- **Setting:** every outcome over seeds in this book comes from the `{profile}` profile, a substitute "
            "for the papers' settings that runs on a 2-core CPU in about a minute per run (Fashion-MNIST, MNIST-1D or "
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


def urls():
    """{"Repository", "Documentation"}: the addresses of the repository and of the published book (pyproject.toml)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]


def citation():
    """The BibTeX entry of this book, from CITATION.cff."""
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    return (f"```bibtex\n@software{{nbdemo,\n  title   = {{{{{cff['title']}}}}},\n"
            f"  author  = {{{{{cff['authors'][0]['name']}}}}},\n  version = {{{cff['version']}}},\n"
            f"  url     = {{{cff['url']}}},\n  note    = {{code: {cff['repository-code']}}}\n}}\n```")
