"""What the book publishes is text, and nothing of the workshop: every value from the store, the history, the
revisions or a profile is escaped where it reaches HTML or markdown (hostile strings in every field), the records'
prose reads with the papers named by author and year and without line numbers, local paths, reviews, issue numbers
or notes on machines, and no committed notebook carries IPython's history-database error. No book is built here
(tests/book/test_book.py builds one and checks its HTML for the same words)."""
import re
import shutil
from html.parser import HTMLParser

import nbformat
import pytest
import yaml
from markdown_it import MarkdownIt

from nbdemo.book import claim_page, markup, staging
from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.runs import evidence, history, kernels, params, store

HOSTILE = "<img src=x onerror=alert(1)>"
HOSTILE_MD = "`{raw}` $x$ [a](javascript:alert(1)) *b* <script>alert(2)</script>"

# what a reader of the results must not meet: local paths, reviews and their tickets, issue numbers, sessions and
# rounds, "the lead", uncommitted commits, machines lent or queued, the papers cited by the numbers of their text
# files, line numbers of those files, and IPython's errors
WORKSHOP = re.compile(
    r"(?<![\w.:/])/(?:tmp|work|home|root)/|\bissues?\s#?\d+\b|\(#\d+\)|\bBLOCKING\b|\bMINOR:|\breview(?:ed|er)?\b|"
    r"\bR\d+ item\b|\bsession \d+|\bthe lead\b|\bround \d+\b|not committed|\bqueued\b|\blent (?:GPU )?machine|"
    r"(?<![\w.,/-])00[0-3](?:\s+(?:l\.|§)|\s*[);])|\bl\.\s?\d+|ERROR! Session", re.I)


class Tags(HTMLParser):
    """The elements and attributes of an HTML text."""
    def __init__(self):
        super().__init__()
        self.tags, self.attrs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += [name for name, _ in attrs]


def live(html):
    """The tags and event handlers a piece of HTML makes that no page of the book makes itself."""
    parser = Tags()
    parser.feed(html)
    return sorted({t for t in parser.tags if t in ("img", "script", "a", "iframe")} |
                  {a for a in parser.attrs if a.startswith("on") or a == "href"})


def rendered(md):
    """Markdown as MyST renders it, near enough: the directives' fences (```{admonition}, :class:) dropped, so that
    their bodies are read as markdown, HTML allowed."""
    body = "\n".join(line for line in md.split("\n") if not re.match(r"\s*(`{3,}|:class:)", line))
    return MarkdownIt("commonmark").render(body)


def test_text_is_escaped_for_html_and_for_markdown():
    assert live(markup.text(HOSTILE)) == [] and "&lt;img" in markup.text(HOSTILE)
    assert live(rendered(markup.text(HOSTILE_MD, markdown=True))) == []
    assert "<code>" not in rendered(markup.text(HOSTILE_MD, markdown=True))  # no code span, role or maths either
    assert "alert(2)" in rendered(markup.text(HOSTILE_MD, markdown=True))  # shown as text
    assert live(markup.badge(HOSTILE)) == [] and re.fullmatch(r"[a-z0-9-]+", markup.slug(HOSTILE))


def test_every_field_of_the_history_is_escaped():
    """A commit, code, date, headline, count or change in results/history/<CLAIM>.json holding a tag shows it as text."""
    state = {"at": HOSTILE, "commit": HOSTILE, "code": HOSTILE, "headline": HOSTILE, "k": HOSTILE, "n": HOSTILE,
             "changes": [("check", HOSTILE, None), ("check", "x", HOSTILE)], "revised": True}
    revision = {"revision": True, "revised": True, "date": HOSTILE, "commit": HOSTILE, "kind": HOSTILE,
                "what": HOSTILE, "why": HOSTILE, "at": HOSTILE}
    html = claim_page.history_table({"items": [state, {**state, "headline": "x" + HOSTILE}, revision], "revised": 2})
    assert live(html) == [] and html.count("&lt;img") >= 9


@pytest.fixture
def hostile_claim(tmp_path, monkeypatch, fake_meta):
    """A claim whose stored runs and control, and whose profile's texts, hold hostile strings in every field."""
    claim = CLAIMS["TFD-1"]
    named = {**params.profile_file(claim), "control": {"seed": 0}, "control about": HOSTILE + HOSTILE_MD}
    named.pop("no control", None)
    shutil.copytree(params.PROFILES, tmp_path / "profiles")
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")
    monkeypatch.setattr(history, "REVISIONS", tmp_path / "revisions")
    monkeypatch.setattr(params, "PROFILES", tmp_path / "profiles")
    (tmp_path / "profiles" / f"{claim.id}.yml").write_text(yaml.safe_dump(named))

    def hostile(meta):
        for row in meta["verdict"]["rows"]:
            row.update(name=row["name"] + HOSTILE, measured=HOSTILE, expected=HOSTILE + HOSTILE_MD,
                       source={"from": "paper", "where": HOSTILE, "why": HOSTILE})
        meta.update(commit=HOSTILE, started=HOSTILE, provenance={"device": HOSTILE, "gpu": HOSTILE,
                                                                  "torch": HOSTILE, "unlocked": HOSTILE})
        return meta
    for seed in range(5):
        store.store(claim, hostile(fake_meta(claim, seed)))
        store.store(claim, hostile(fake_meta(claim, seed, "NOT REPRODUCED", profile="control")), "control")
    meta = hostile(fake_meta(claim, 0))
    meta.update(profile="default", parameters={"seed": 0, "x": HOSTILE}, overrides={"x": HOSTILE})
    return claim, evidence.assess(claim), meta


def test_every_field_of_the_store_and_the_profile_is_escaped_on_a_claim_page(hostile_claim):
    claim, s, meta = hostile_claim
    assert s, "the hostile store was not read"
    cells = [claim_page.verdict_line(claim, s, meta), claim_page.brief_box(claim, s, meta),
             *claim_page.sections(claim, s, [("p" + HOSTILE, "doc", meta)], meta), claim_page.verdict_cell(meta, s),
             staging.provenance_cell(meta, True)]
    for cell in cells:
        assert live(rendered(cell.source)) == [], cell.source[:300]


def public_strings():
    """What the book shows of the records: each revision's kind, what and why, and each state's changes."""
    for claim in CLAIMS.values():
        revisions = ROOT / "results" / "revisions" / f"{claim.id}.yml"
        if revisions.exists():
            for rev in history.declared(revisions.read_text()):
                yield claim.id, claim_page.one_line(rev["what"])
                yield claim.id, markup.public(rev["why"])
        s_items = history.load(claim)
        for i, state in enumerate(s_items["states"][1:], 1):
            yield claim.id, markup.public("; ".join(evidence.brief(evidence.changes(s_items["states"][i - 1], state))))


def test_the_records_read_without_the_workshop_and_cite_the_papers_by_name():
    """The revisions and the history keep their records as written (a revision's date, kind and what are its
    identity); what the book shows of them has none of the workshop and no file number of a paper."""
    found = {(claim, m[0]) for claim, said in public_strings() for m in WORKSHOP.finditer(said)}
    assert not found, sorted(found)[:20]
    raw = "\n".join(p.read_text() for p in (ROOT / "results" / "revisions").glob("*.yml"))
    assert WORKSHOP.search(raw)  # the stored records are as they were: the filter is what reads them


def test_the_public_filter():
    said = markup.public("Made after review of 2026-11-26 (session 5); seeds 5-9 decide. The paper's Fig. 4 (000 l.92) "
                         "and (003 l.37, §6) say so (review /tmp/review/TFD.md, TFD-3 BLOCKING 3; issue 39).")
    assert said == ("seeds 5-9 decide. The paper's Fig. 4 (Liu et al. 2022) and (Wang et al. 2023, §6) say so.")
    assert markup.public("60,000 images, lr 0.001 and 10 000 steps") == "60,000 images, lr 0.001 and 10 000 steps"


def test_the_published_notebooks_carry_no_workshop():
    """Every committed notebook as the book publishes it (`book_notebook`: prose, code, outputs, metadata)."""
    found = {}
    for claim in CLAIMS.values():
        if not claim.notebook.exists():
            continue
        nb = nbformat.read(claim.notebook, as_version=4)
        meta = nb.metadata.get("nbdemo")
        if not meta:
            continue
        text = nbformat.writes(staging.book_notebook(nb, meta))
        if hits := [m[0] for m in WORKSHOP.finditer(text)]:
            found[claim.id] = hits[:5]
    assert not found


def test_no_committed_notebook_carries_ipythons_history_error():
    assert not [c.id for c in CLAIMS.values() if c.notebook.exists() and "ERROR! Session" in c.notebook.read_text()]


def test_kernels_start_without_ipythons_history_database():
    km, folder = kernels.kernel_manager()
    try:
        assert "--HistoryManager.enabled=False" in km.format_kernel_cmd()
    finally:
        folder.cleanup()


def test_the_book_names_its_author_as_the_citation_does():
    conf = yaml.safe_load((ROOT / "book" / "_config.yml").read_text())
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert conf["author"] == cff["authors"][0]["name"].split(" (")[0] and "Jupyter Book" not in conf["author"]


def test_a_finding_copied_onto_the_findings_page_glues_from_its_claims_page():
    """myst-nb reads `{glue:text}`path::key`` without a format as the key `path:` with the format `key`: a value
    without a format is glued by `{glue}` from the claim's page."""
    from nbdemo.book.findings import glued_from
    assert glued_from(CLAIMS["PFC-4"], "{glue:text}`n` and {glue:text}`x:.2g`") == \
        "{glue}`claims/PFC-4.ipynb::n` and {glue:text}`claims/PFC-4.ipynb::x:.2g`"
