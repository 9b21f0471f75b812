"""A claim's page as the book stages it: the executed notebook made public (no line numbers of the papers' text
copies, no stderr, no path of the machine that ran it), with the claim page's boxes and verdict table
(`nbdemo.book.claim_page`) put in, its figures relabelled for a second profile's page, and its provenance last.
The committed notebook is not changed."""
import re

import nbformat

from nbdemo.book.claim_page import verdict_cell
from nbdemo.book.markup import glue_keys, readable, unglued


PRIVATE_METADATA = {"papermill": ["input_path", "output_path"]}  # absolute paths of the machine that ran it


def _public(cell):
    """A code cell without line numbers of the paper's text copies, in its source and its text outputs, and
    without its stderr (warnings that name the machine's paths; the book hides stderr too: _config.yml)."""
    cell.source = readable(cell.source)
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


def book_notebook(nb, meta, boxes=(), line=None):
    """A claim's page: its notebook with `line` (`verdict_line`) under its title and the boxes (`seeds_box`,
    `rerun_box`) after its first cell, the verdict as a table after the verdict cell (whose printed text is kept
    behind a toggle), the provenance last, no line numbers of the paper's text copy in its prose, code or outputs,
    and no path of the machine that ran it in its metadata; a value its prose names and its stored run did not
    record reads as such (`unglued`). The committed notebook is not changed."""
    keys = glue_keys(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = unglued(readable(cell.source), keys)
        elif cell.cell_type == "code":
            _public(cell)
    for key, fields in PRIVATE_METADATA.items():
        for field in fields:
            nb.metadata.get(key, {}).pop(field, None)
    nb.metadata = _scrubbed(nb.metadata)
    at = next((i for i, cell in enumerate(nb.cells) if "nbval-check-output" in cell.metadata.get("tags", [])), None)
    if at is not None and meta["verdict"]:
        nb.cells[at].metadata["tags"] = nb.cells[at].metadata["tags"] + ["hide-output"]
        nb.cells.insert(at + 1, verdict_cell(meta))
    nb.cells[1:1] = list(boxes)
    if line is not None:
        title, _, rest = nb.cells[0].source.partition("\n")
        if title.startswith("# ") and rest.strip():
            nb.cells[0].source = title
            nb.cells.insert(1, nbformat.v4.new_markdown_cell(rest.strip()))
        nb.cells.insert(1, line)
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
