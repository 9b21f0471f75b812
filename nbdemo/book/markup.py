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
    reads "Fig. 7", `paper("Fig. 7", 180)` reads `paper("Fig. 7")`: the stored row keeps the line): a reader can follow a section, equation or figure, not a line. Brackets left empty by the
    removal go too ("(l.170, l.178)"), and no others (code keeps its calls' "()")."""
    for pattern, by in LINE_REFS:
        s = re.sub(pattern, by + "\0", s)
    return re.sub(r"\s*\(\s*(?:\0\s*)+\)", "", s).replace("\0", "")


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


def text(s):
    """Plain text as an HTML cell."""
    return html.escape(readable(str(s)))


def slug(label):
    return label.lower().replace(" ", "-")


def badge(label):
    """An outcome as a coloured label (styled by _static/outcomes.css)."""
    return f'<span class="outcome {slug(label)}">{label}</span>'


def interval(s):
    """"4 of 5 seeds (95% interval 0.38 to 0.96)": k of n and the Wilson interval of a `rules.tally`."""
    return f"{s['k']} of {s['n']} seeds (95% interval {s['low']:.2f} to {s['high']:.2f})"
