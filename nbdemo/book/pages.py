"""The book's generated pages: the dashboard, the summary that opens the book, the chapters' tables of claims, and
the book's addresses and citation. Each claim's evidence comes whole from `nbdemo.runs.evidence.assess` (its
"summary", keyed by `Claim`); these functions only format it. `done` is {Claim: (executed notebook, its nbdemo
metadata)}."""
import os
from collections import Counter

import yaml

from nbdemo.book import why
from nbdemo.book.findings import FINDING_KINDS, finding_cells
from nbdemo.book.markup import badge, table, tally_text, text
from nbdemo.claims.registry import CLAIMS, PAPERS, ROOT
from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from nbdemo.runs import params, rules, store


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


def tag(name, shown=None):
    """A tag after a headline; the legend under the table spells out its meaning (`why.TAGS`), on the page itself."""
    return f'<span class="tag" data-tag="{name}">{shown or name}</span>'


def stale_run(claim, meta):
    """Whether the run on a claim's page is not what today's code and parameters would make (its fingerprint)."""
    try:
        return meta.get("fingerprint") != store.expected_fingerprint(claim, meta["parameters"].get("seed", 0),
                                                                     meta["profile"], meta["overrides"])
    except params.ParameterError:  # its parameters are no longer the notebook's
        return True


STALE = '<span class="outcome stale">STALE</span> last stored: '


def over_seeds(s, finding=None):
    """The cell of a claim's headline over seeds, with its tags, and the finding its notebook states beside it (a
    stale headline is shown as the last stored)."""
    marks = [tag(m, shown) for m, shown, on in [
        ("untested check", None, s["untested"]), ("uninformative check", None, s["uninformative"]),
        ("threshold-sensitive", None, s["sensitive"]),
        ("fresh seeds alone", f"fresh seeds alone: {fresh_differs(s)}", fresh_differs(s))] if on]
    head = badge(s["headline"]) + (f" ({', '.join(marks)})" if marks else "")
    if finding:
        head += f' <span class="finding-beside">+ {tag("finding", why.finding_label(finding[0], s["headline"]))}</span>'
    return STALE + head if is_stale(s) else head


def tags_legend(shown):
    """The meaning of each tag that the text shown carries."""
    used = [name for name in why.TAGS if f'data-tag="{name}"' in shown]
    return ("**Tags:** " + "; ".join(f"*{name}*: {why.TAGS[name]}" for name in used) + ".") if used else ""


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
    return control_badge(c["headline"])


# a control should not reproduce: its badge is coloured by whether it did what a control should
CONTROL_SAYS = {NOT_REPRODUCED: ("good", "fails, as a control should"), REPRODUCED: ("bad", "reproduces: no evidence"),
                rules.MIXED: ("mixed", "partly reproduces"), INCONCLUSIVE: ("none", "did not reach the regime")}


def control_badge(headline):
    """A control's outcome coloured by what a control should do (blue when it fails, purple when it reproduces): not
    in the colours of the claims' own outcomes."""
    good, said = CONTROL_SAYS.get(headline, ("none", ""))
    return (f'<span class="outcome control control-{good}">{headline}</span>' + (f" ({said})" if said else ""))


def revised_cell(s):
    """The dashboard's count of a claim's revisions after results."""
    h = s["history"]
    if not h or not h["revised"]:
        return "none"
    return f"{h['revised']} ({h['declared']} declared)"


DASHBOARD = ["Claim", "Over seeds", "Why", "Reproduced", "Control", "Revised", "Setting", "Seed 0", "Runtime", "Title"]


def titled(claim):
    """A claim's title with the paper's figure it reproduces: "Two-phase phenomenon (the paper's Fig. 1a-b, 2a)"."""
    return text(f"{claim.title} (the paper's {claim.figure})")


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


def run_outcome(s, meta):
    """The one outcome of the run on a page: the rule's, its control included (`rules.run_outcome`, as the claim's
    stored runs are judged), where the store holds the page's seed; else the run's own verdict."""
    if not (meta and meta.get("verdict")):
        return None
    seed = meta["parameters"].get("seed", 0)
    outcomes = (s or {}).get("outcomes") or {}
    return outcomes.get(seed, outcomes.get(str(seed), meta["verdict"]["outcome"]))


def seed0_differs(s, meta):
    """The outcome of the run on a claim's page (`run_outcome`) where it is not the claim's headline, else None."""
    o = run_outcome(s, meta)
    return o if s and o and s["headline"] not in (rules.TOO_FEW, rules.UNCONFIRMED) and o != s["headline"] else None


def findings_by_claim(done):
    """{Claim: (finding kind, its first cell tagged `finding`)}."""
    out = {}
    for kind, cells in finding_cells(done).items():
        for claim, cell in cells:
            out.setdefault(claim, (kind, cell))
    return out


def robust_text(s, short=False):
    """"robust", or what the headline depends on, with the headline under each reading that changes it; "" (short:
    "no alternative declared") where no alternative reading is declared."""
    if s.get("robust") is None:
        return "no alternative declared" if short else ""
    if s["robust"]:
        n = len(s.get("alternatives") or {})
        return "robust" if short else f"robust: each of its {n} declared alternative readings gives it too"
    return "depends on " + "; ".join(
        f"{text(row)} ({', '.join(f'{text(alt)}: {badge(h)}' for alt, h in alts.items())})"
        for row, alts in (s.get("depends") or {}).items())


def all_seeds_cell(s):
    every = s.get("all_seeds")
    return f"{badge(every['headline'])} {tally_text(every, fresh=False)}" if every else ""


DASHBOARD = ["Claim", "Headline (fresh seeds)", "Robust?", "Why", "Control", "Revised after results",
             "Over every stored seed", "Setting"]


def dashboard(done, profile, summaries):
    rows, found = [], findings_by_claim(done)
    for c in CLAIMS.values():
        s, meta = summaries.get(c), done[c][1] if c in done else None
        name = f"{c.id}</a> {titled(c)}" if meta else f"{c.id} {titled(c)}"
        link = f'<a class="reference internal" href="claims/{c.id}.html">{name}' if meta else name
        head = over_seeds(s, found.get(c)) + f"<br>{tally_text(s, fresh=(s.get('fresh') or {}).get('since') is not None)}" \
            if s else "no sweep yet" if meta else "not reproduced yet"
        rows.append([link, head, robust_text(s, short=True) if s else "", why.cell(*why.reason(s, meta, found.get(c))),
                     control_cell(s), revised_cell(s) if s else "", all_seeds_cell(s) if s else "", setting_word(c)])
    head = (f"Every claim is run over seeds in the `{profile}` profile. The terms of the table:\n\n"
            "- **A run** is INCONCLUSIVE when one of its requirements fails (it did not reach the regime the claim is "
            "about); otherwise REPRODUCED when every check holds and at least one of them is tested and failed by "
            "the claim's negative control; otherwise NOT REPRODUCED. Every count below uses this one outcome per "
            "run, the negative control included.\n"
            "- **Headline (fresh seeds):** the outcome over the *fresh* seeds, those first run after the claim's last "
            "revision after results, by {ref}`the rule below <rule>`: *k of n* counts the fresh seeds that reproduce "
            "among the *conclusive* ones (REPRODUCED or NOT REPRODUCED), with the 95% interval of that share and the "
            "inconclusive runs beside them. UNCONFIRMED: fewer fresh seeds than a headline needs; the tally so far "
            "is shown. STALE: the last headline stored, which today's code or parameters would not make.\n"
            "- **Robust?** *robust* when every alternative reading the claim declares (another threshold, statistic "
            "or window for one of its rows) gives the same headline; *depends on* names the rows whose alternatives "
            "change it, with the headline under each; *no alternative declared* otherwise.\n"
            "- **Why:** the reason in one line, after its kind in small capitals: the finding its notebook states, "
            "else the requirement unmet, the check that fails, or the check its control does not test or passes "
            "too.\n"
            "- **Control:** the outcome of the claim's negative control over its seeds. A control must *not* "
            "reproduce: blue when it fails as it should, purple when it reproduces (then it is no evidence), amber "
            "when it partly does, grey when it did not reach its regime. Green and red are kept for the claims' own "
            "outcomes.\n"
            "- **Revised after results:** how many changes of a check, threshold, requirement, reading, setting or "
            "control were made after an earlier result of the claim was stored, and how many of them were declared; "
            "each is a line in the claim page's history.\n"
            "- **Over every stored seed:** the same tally over every seed stored for the current design, fresh or "
            "not.\n"
            "- **Setting:** whether the default profile is the paper's setting or a substitute for it.\n\n")
    body = table(DASHBOARD, rows, "dashboard")
    return head + body + "\n\n" + tags_legend(body) + "\n"


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
            "in a verdict of rows (requirements, checks, notes) with their thresholds, run over seeds beside a "
            "negative control (or the reason a claim has none). Some rows and thresholds were revised after results "
            "had been seen: the dashboard counts those revisions, each claim's page lists them, and a headline is "
            "decided only by the fresh seeds, those first run after the last of them.\n"
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
             over_seeds(summaries[c]) if c in summaries else "no sweep yet", titled(c)] for c in claims]
    body = table(["Claim", "Over seeds", "Title"], rows, "chapter")
    return (f"\n## The claims and their outcomes\n\nOver seeds, in this book's default setting: "
            f"{counts(claims, summaries)}.\n\n" + body + "\n\n" + tags_legend(body) + "\n")


def urls():
    """{"Repository", "Documentation"}: the addresses of the repository and of the published book, given once, when
    the book is built (`make book REPOSITORY=... SITE=...`, which sets $NBDEMO_REPOSITORY and $NBDEMO_SITE); None
    where none is given: the book then shows no repository button and no address."""
    return {"Repository": os.environ.get("NBDEMO_REPOSITORY", "").rstrip("/") or None,
            "Documentation": (os.environ.get("NBDEMO_SITE", "").rstrip("/") + "/") if os.environ.get("NBDEMO_SITE")
            else None}


def citation():
    """The BibTeX entry of this book, from CITATION.cff and the addresses given at build time (`urls`; none: no
    url or note field)."""
    cff, u = yaml.safe_load((ROOT / "CITATION.cff").read_text()), urls()
    fields = [("title", f"{{{cff['title']}}}"), ("author", f"{{{cff['authors'][0]['name']}}}"),
              ("version", cff["version"]), ("url", u["Documentation"]),
              ("note", u["Repository"] and f"code: {u['Repository']}")]
    return ("```bibtex\n@software{nbdemo,\n" + ",\n".join(f"  {k:<7} = {{{v}}}" for k, v in fields if v)
            + "\n}\n```")
