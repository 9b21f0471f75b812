"""The markup that every generated page uses: tables that wrap, outcome badges, and text without the line numbers
of the project's private text copies of the papers."""
import html
import re


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
             (r"\s*\bl\.\s?\d+(?:[-–]\d+)?\b", ""),
             (r"(\bpaper\(\s*\"[^\"\n]*\")\s*,\s*\d+\s*\)", r"\1)")]  # code: paper("Fig. 2a", 45)


def readable(s):
    """Text (or code) without the line numbers of the project's private text copies of the papers ("Fig. 7, l.180"
    reads "Fig. 7", `paper("Fig. 7", 180)` reads `paper("Fig. 7")`: the stored row keeps the line), and with a
    paper named by its authors and year where a record names it by the number of its text copy ("003 §6" reads
    "Wang et al. 2023, §6"): a reader can follow a section, equation or figure, not a line. Brackets left empty by the
    removal go too ("(l.170, l.178)"), and no others (code keeps its calls' "()")."""
    s = FILE_CITE.sub(lambda m: PAPER_NAMES[m[1]] + (", " if m[2] else ""), s)
    for pattern, by in LINE_REFS:
        s = re.sub(pattern, by + "\0", s)
    return re.sub(r"\s*\(\s*(?:\0\s*)+\)", "", s).replace("\0", "")


# the papers by the numbers of their text copies, as the records of the work cite them: "(003 §6)", "000 l.72"
PAPER_NAMES = {"000": "Liu et al. 2022", "001": "Hacohen & Weinshall 2022", "002": "Wang, Gai & Zhang 2024",
               "003": "Wang et al. 2023"}
FILE_CITE = re.compile(r"(?<![\w.,/-])(00[0-3])(?:(?=\s*[);:](?!\d))|(\s*(?=l\.\s?\d|§|app\.|Figs?\b|Eqs?\b|Tables?\b|"
                       r"Thm\b|Theorem|Lemma|Sec\b|Sec\.|Prop|Cor|Def|Assumption|Claim)))")

# the workshop: how the work was done, which a reader of the results has no use for (and cannot follow): local paths,
# reviews and their tickets, issue and pull-request numbers, sessions, rounds, which machine was lent or queued
WORKSHOP = re.compile(
    r"(?<![\w.:/])/(?:tmp|work|home|root|Users|mnt|opt)/[^\s,;)]*|\b[Ii]ssues?\s#?\d+|\(#\d+\)|#\d+\b|"
    r"\b(?:BLOCKING|MAJOR|MINOR)\b|\b[Bb]locking\s\d+|\b[Rr]eview(?:ed|er|ers|s)?\b|\b[Ss]essions?\s\d+|\bthe lead\b|"
    r"\brounds?\s(?:\d+|of\s(?:the\s)?review)|\b(?:this|the last|a later|an earlier)\sround\b|\bR\d+\sitem|"
    r"\(not committed\)|\bqueued\b|\blent\s(?:GPU\s)?machine|[Rr]ecorded after the fact")
ABBREVIATIONS = ["Fig", "Figs", "Eq", "Eqs", "Sec", "al", "app", "Prop", "Thm", "Tab", "e.g", "i.e", "vs", "cf", "no"]
CLAUSES = re.compile(r"(?<=;)\s+|(?<=\.)" + "".join(rf"(?<!\b{re.escape(a)}\.)" for a in ABBREVIATIONS) + r"\s+")
PARENS = re.compile(r"\s*\((?:[^()]|\([^()]*\))*\)")


def public(s):
    """Prose from the records of the work (revisions, history, the store's texts) as a reader sees it: `readable`,
    and without the workshop (`WORKSHOP`): a bracket that names any of it goes whole, then a sentence or clause that
    does, then whatever is left of it."""
    s = re.sub(r"\b[Ii]ssues?\s#?\d+(?:/\d+)*(?:\s*\([^)]*\))?:\s*", "", readable(str(s)))  # "Issue 38: a rule" -> "a rule"
    s = PARENS.sub(lambda m: "" if WORKSHOP.search(m[0]) else m[0], s)
    if WORKSHOP.search(s):
        s = " ".join(p for p in CLAUSES.split(s) if not WORKSHOP.search(p))
    s = re.sub(r"[;,]\s*\)", ")", WORKSHOP.sub("", s))
    return re.sub(r"[ \t]{2,}", " ", re.sub(r"[ \t]+([.,;:)])", r"\1", s)).strip(" ;,")


# a glue role of the page's own notebook, {glue:text}`key:.2g` (not `path::key`, another page's), and its key
GLUE = re.compile(r"\{glue(?::\w*)?\}`(?![^`]*::)([^`:]+)(?::[^`]*)?`")
UNRECORDED = "*(not recorded by the stored run)*"


def glue_keys(nb):
    """The keys a notebook's stored outputs glue (myst-nb's scrapbook names)."""
    return {out["metadata"]["scrapbook"]["name"] for cell in nb.cells for out in cell.get("outputs", [])
            if "scrapbook" in out.get("metadata", {})}


def unglued(source, keys):
    """Markdown whose glue roles name only keys in keys: a role naming a value the stored run did not record (the
    notebook's prose changed after it was run) reads UNRECORDED, instead of failing the book's build."""
    return GLUE.sub(lambda m: m[0] if m[1] in keys else UNRECORDED, source)


MARKDOWN = re.compile(r"([\\`*_\[\]{}()#+!|~$^:-])")  # what markdown, MyST's roles and dollar maths read


def text(s, markdown=False, code=False, whole=True):
    """The one way a value from the store, the history, the revisions or a profile reaches a page: `public`, and
    escaped, so that it reads as text and nothing in it becomes a tag, an attribute or a script. markdown: for a
    value put into markdown (not into an HTML block), whose punctuation is escaped too, so that no role, link, maths
    or code span can be made of it. code: a value (a parameter, a commit) as a markdown code span, shown as it is
    (no line numbers, no typographic quotes), fenced by more backticks than it holds. whole=False: a piece of a
    text made `public` already, escaped as it is (its spaces kept)."""
    if code:
        s = readable(" ".join(str(s).split()))
        fence = "`" * (max(map(len, re.findall(r"`+", s)), default=0) + 1)
        return f"{fence} {s} {fence}" if s.startswith("`") or s.endswith("`") else f"{fence}{s}{fence}"
    s = public(s) if whole else str(s)
    return html.escape(MARKDOWN.sub(r"\\\1", s) if markdown else s)


def slug(label):
    return re.sub(r"[^a-z0-9-]", "", str(label).lower().replace(" ", "-"))


def badge(label):
    """An outcome as a coloured label (styled by _static/outcomes.css)."""
    return f'<span class="outcome {slug(label)}">{html.escape(str(label))}</span>'


def tally_text(t, fresh=True):
    """"9 of 10 fresh seeds reproduce (95% interval 0.60 to 0.98), 1 more inconclusive": a tally of the rule's,
    whose n counts the conclusive runs."""
    extra = f", {t['inconclusive']} more inconclusive" if t.get("inconclusive") else ""
    return (f"{t['k']} of {t['n']} {'fresh ' if fresh else ''}seeds reproduce (95% interval {t['low']:.2f} to "
            f"{t['high']:.2f}){extra}")
