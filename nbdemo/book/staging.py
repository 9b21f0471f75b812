"""A claim's page as the book stages it: the executed notebook made public (no line numbers of the papers' text
copies, no stderr, no path of the machine that ran it), with the claim page's boxes and verdict table
(`nbdemo.book.claim_page`) put in, its figures relabelled for a second profile's page, and its provenance last.
The committed notebook is not changed."""
import html
import re

import nbformat

from nbdemo.book.claim_page import verdict_cell
from nbdemo.book.markup import WORKSHOP, glue_keys, public, readable, text, unglued


WIDE = {"full-width", "full_width"}
PRIVATE_METADATA = {"papermill": ["input_path", "output_path"]}  # absolute paths of the machine that ran it


def _public(cell):
    """A code cell without line numbers of the paper's text copies, in its source and its text outputs, and
    without its stderr (warnings that name the machine's paths; the book hides stderr too: _config.yml)."""
    cell.source = readable(cell.source)
    # a wide cell is tagged `wide` here: the theme's script looks for a right sidebar that a claim page does not have
    # when it sees `full-width`, and fails in the console (_static/outcomes.css gives `wide` the full width)
    tags = cell.metadata.get("tags", [])
    if WIDE & set(tags):
        cell.metadata["tags"] = [t for t in tags if t not in WIDE] + ["wide"]
    cell.outputs = [out for out in cell.get("outputs", []) if out.get("name") != "stderr"]
    for out in cell.outputs:
        if "text" in out:
            out["text"] = readable(out["text"])
        for mime, data in out.get("data", {}).items():
            if mime.startswith("text/") or mime.endswith("text/plain"):
                out["data"][mime] = readable(data) if isinstance(data, str) else [readable(x) for x in data]


def _scrubbed(value):
    """Metadata (the run's stored record) with no line number of the paper's text copies in its strings."""
    if isinstance(value, str):
        return readable(value)
    if isinstance(value, dict):
        return type(value)({k: _scrubbed(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_scrubbed(v) for v in value]
    return value


def book_notebook(nb, meta, top=(), below=(), line=None, s=None, title=None):
    """A claim's page in two layers. On top: its title (or `title`), `line` (`verdict_line`), the claim as the
    notebook states it, the `top` cells (`brief_box`) and the notebook's first figure; below, collapsed: the `below`
    cells (`sections`), then the notebook itself (its code, prose and seed-0 figures, the verdict as a table after
    its verdict cell, whose printed text is kept behind a toggle) and its provenance. Without `below` the notebook
    is shown open (another profile's run). No line numbers of the paper's text copy or workshop in its prose
    (`public`), code or outputs, and no path of the machine that ran it in its metadata; a value its prose names
    and its stored run did not record reads as such (`unglued`). The committed notebook is not changed."""
    keys = glue_keys(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = unglued(public_prose(cell.source), keys)
        elif cell.cell_type == "code":
            _public(cell)
    for key, fields in PRIVATE_METADATA.items():
        for field in fields:
            nb.metadata.get(key, {}).pop(field, None)
    nb.metadata = _scrubbed(nb.metadata)
    at = next((i for i, cell in enumerate(nb.cells) if "nbval-check-output" in cell.metadata.get("tags", [])), None)
    if at is not None and meta["verdict"]:
        nb.cells[at].metadata["tags"] = nb.cells[at].metadata["tags"] + ["hide-output"]
        nb.cells.insert(at + 1, verdict_cell(meta, s))
    first, *body = nb.cells
    head, _, claim = first.source.partition("\n")
    heading = [nbformat.v4.new_markdown_cell(f"# {title}" if title else head)]
    if line is not None:
        heading.append(line)
    if claim.strip():
        heading.append(nbformat.v4.new_markdown_cell(claim.strip()))
    if not below:
        nb.cells = heading + list(top) + body + [provenance_cell(meta)]
        return nb
    figure = next((c for c in body if "figure" in c.metadata.get("mystnb", {})), None)
    body = [c for c in body if c is not figure]
    for cell in body:  # no section inside the collapsed notebook: a heading there would close it
        if cell.cell_type == "markdown":
            cell.source = re.sub(r"^#{1,6}\s+(.+)$", r"**\1**", cell.source, flags=re.M)
    notebook = [nbformat.v4.new_markdown_cell('<details class="section notebook"><summary>The notebook: its code, '
                                              'prose and seed-0 figures</summary>'), *body,
                nbformat.v4.new_markdown_cell("</details>")]
    if figure:  # its code is in the notebook's download; here the figure alone
        figure.metadata["tags"] = figure.metadata.get("tags", []) + ["hide-input"]
    nb.cells = heading + ([figure] if figure else []) + list(top) + list(below) + notebook + [provenance_cell(meta, True)]
    return nb


def public_prose(source):
    """A notebook's markdown as a reader sees it: the papers by name and no line numbers (`readable`), and a line
    that names the workshop made `public`; its markup kept."""
    return "\n".join(public(line) if WORKSHOP.search(line) else line for line in readable(source).split("\n"))


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


def provenance_cell(meta, collapsed=False):
    """A markdown cell stating how the page's outputs were made, appended to the executed notebook: with the lock
    of its environment (`nbdemo.runs.lock`), the packages installed apart from it counted in one line (their list
    collapsed), and the profile's stored seeds made under another lock than the book's. collapsed: a section that
    opens. Every value is escaped (`text`)."""
    from nbdemo.claims.registry import get
    from nbdemo.runs import lock, store
    p = meta.get("provenance") or {}
    others = lock.other_locks(store.load(get(meta["claim"]), meta["profile"], meta["overrides"]))
    params = ", ".join(text(f"{k}={v!r}", code=True) for k, v in sorted(meta["parameters"].items()))
    unlocked = [x for x in str(p.get("unlocked") or "").split("; ") if x]
    lines = [f"- profile {text(meta['profile'], code=True)}, overrides {text(meta['overrides'] or 'none', code=True)}",
             f"- parameters {params}",
             f"- commit {text(meta['commit'], code=True)}, started {text(meta['started'], True)}, wall time "
             f"{text(meta['wall_s'], True)} s",
             f"- device {text(p.get('device'), code=True)}" + (f" ({text(p['gpu'], True)})" if p.get("gpu") else "") +
             f", torch {text(p.get('torch'), True)}, python {text(p.get('python'), True)}, "
             f"{text(p.get('threads'), True)} threads" + (f", CPU {text(p['cpu'], True)}" if p.get("cpu") else ""),
             f"- environment: {lock.shown({**p, 'unlocked': None})}"]
    if unlocked:
        lines.append(f"- {len(unlocked)} packages differ from the lock: <details class=\"packages\"><summary>the list"
                     f"</summary>{html.escape('; '.join(unlocked))}</details>")
    if others:
        lines.append(f"- stored runs of this profile not made under the book's lock: {others}")
    box = "```{admonition} Provenance of this run\n" + "\n".join(lines) + "\n```"
    if collapsed:
        box = f'<details class="section provenance"><summary>Provenance of this run</summary>\n\n{box}\n\n</details>'
    return nbformat.v4.new_markdown_cell(box)
