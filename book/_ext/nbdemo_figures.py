"""The book's figures (a Sphinx extension that the staged _config.yml loads), and no Thebe: each claim page numbers its own
figures ("Figure PFC-1.2", never a number across the book that could be taken for the paper's), and every image is a
link to its full size with its figure's caption as alt text."""
import posixpath
import re

from docutils import nodes
from sphinx.util.osutil import relative_uri

CLAIM_PAGE = re.compile(r"^claims/(.+)$")  # claims/PFC-1, claims/TFD-1-paper


def number_per_claim(app, env):
    """After Sphinx has numbered the figures across the book: number each claim page's figures 1, 2, ... after its
    name (numfig_format "Figure %s" then reads "Figure PFC-1.2", in captions and in {numref} alike)."""
    for doc, kinds in env.toc_fignumbers.items():
        if (m := CLAIM_PAGE.match(doc)) and kinds.get("figure"):
            order = sorted(kinds["figure"], key=kinds["figure"].get)
            kinds["figure"] = {fig: (m[1], i) for i, fig in enumerate(order, 1)}
    return []


def link_images(app, doctree, docname):
    """Each image of a page as a link to its full-size file, with its figure's caption as its alt text."""
    if app.builder.format != "html":
        return
    images = relative_uri(app.builder.get_target_uri(docname), "_images")
    for image in list(doctree.findall(nodes.image)):
        figure = next((p for p in _parents(image) if isinstance(p, nodes.figure)), None)
        caption = next(iter(figure.findall(nodes.caption)), None) if figure else None
        if caption:
            image["alt"] = caption.astext()
        uri = image.get("candidates", {}).get("*", image["uri"])
        if isinstance(image.parent, nodes.reference) or uri not in app.env.images:
            continue
        link = nodes.reference("", "", refuri=posixpath.join(images, app.env.images[uri][1]), internal=True,
                               classes=["full-size"])
        image.replace_self(link)
        link += image


def _parents(node):
    while node.parent is not None:
        node = node.parent
        yield node


def no_thebe(app, pagename, templatename, context, doctree):
    """No Thebe on any page: the book has no live kernel to offer, and sphinx-thebe's script, which Jupyter Book adds to
    every page, fails in the console without one."""
    if "script_files" in context:
        context["script_files"] = [js for js in context["script_files"] if "thebe" not in str(js)]


def setup(app):
    app.connect("html-page-context", no_thebe)
    app.connect("env-get-updated", number_per_claim, priority=900)  # after the toctree collector's numbering
    app.connect("doctree-resolved", link_images)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
