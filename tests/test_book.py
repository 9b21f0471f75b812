"""The book, built with warnings as errors and read back in headless Chromium.

The book is built from the committed notebooks that carry `metadata.nbdemo` (written by `nbdemo run --commit`), as
they are. Their fingerprints go stale whenever anything in nbdemo/ changes, and re-running them (about a minute
each) is the job of `nbdemo book`, not of a test, so the test hands `book.build` these notebooks itself and nothing
is executed; committed notebooks without that metadata are left out of the book, and show as "not reproduced yet".
Sources and HTML go to a temporary folder (runner.BUILD is patched), so `make book` and book/_build are untouched.
"""
import json
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.wait import WebDriverWait

from nbdemo import book, runner
from nbdemo.claims import CLAIMS

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SWEEP_SEEDS, SWEEP_HOLDS = [0, 1, 2], 2


def committed():
    """{claim: (notebook, its nbdemo metadata)} for the committed notebooks that were executed by the runner."""
    done = {}
    for c in CLAIMS.values():
        meta = c.notebook.exists() and runner.summary(nbformat.read(c.notebook, as_version=4))
        if meta:
            done[c.id] = (c.notebook, meta)
    return done


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Build the book strictly (-W -n --keep-going); a sweep result is written for one claim, for the seeds column."""
    done = committed()
    assert done, "no committed notebook carries metadata.nbdemo; run `nbdemo run <claim> --commit`"
    tmp = tmp_path_factory.mktemp("book")
    swept = next(iter(done))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "BUILD", tmp)
        path = runner.sweep_path(swept, "default")
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps({"claim": swept, "seeds": SWEEP_SEEDS, "holds": SWEEP_HOLDS}))
        index = book.build(strict=True, done=done, out=tmp / "out")
    return index, done, swept


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (`make system` as root installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    yield driver
    driver.quit()


def local_path(url):
    return Path(unquote(urlsplit(url).path))


def visit(browser, url):
    """Open url, wait until the page it ends on has loaded (index.html redirects to intro.html), return its path."""
    browser.get(url)
    WebDriverWait(browser, 30).until(lambda b: b.execute_script(
        "return document.readyState == 'complete' && !document.querySelector('meta[http-equiv=Refresh]')"))
    return local_path(browser.current_url)


def crawl(browser, index):
    """Visit every HTML page reachable from index.html; return {page: (ids, links, images)} as the browser sees them.

    links are absolute file:// URLs of the book; images are (src, naturalWidth) once the page has loaded.
    """
    root, seen, todo = index.parent, {}, [index.as_uri()]
    while todo:
        url = todo.pop()
        page = local_path(url)
        if page in seen:
            continue
        page = visit(browser, url)
        seen[page] = browser.execute_script("""
            return [[...document.querySelectorAll('[id]')].map(e => e.id),
                    [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => h.startsWith('file:')),
                    [...document.images].map(i => [i.src, i.complete ? i.naturalWidth : 0])];""")
        todo += [h.split("#")[0] for h in seen[page][1]
                 if h.split("#")[0].endswith(".html") and local_path(h).is_relative_to(root)]
    return seen


@pytest.fixture(scope="module")
def pages(built, browser):
    return crawl(browser, built[0])


def test_every_claim_page_is_in_the_book(built, pages):
    html = built[0].parent
    assert html / "intro.html" in pages
    assert {html / "claims" / f"{c}.html" for c in built[1]} <= set(pages)


def test_every_internal_link_resolves(pages):
    broken = []
    for page, (_, links, _) in pages.items():
        for link in links:
            target, fragment = local_path(link), urlsplit(link).fragment
            if not target.exists() or (fragment and target in pages and unquote(fragment) not in pages[target][0]):
                broken.append(f"{page.name} -> {link}")
    assert not broken


def test_every_image_loaded_and_every_figure_shown(built, pages):
    html, done = built[0].parent, built[1]
    assert not [(page.name, src) for page, (_, _, images) in pages.items() for src, width in images if width <= 0]
    for claim, (path, _) in done.items():
        figures = sum("image/png" in out.get("data", {}) for cell in nbformat.read(path, as_version=4).cells
                      for out in cell.get("outputs", []))
        assert len(pages[html / "claims" / f"{claim}.html"][2]) >= figures, claim


def test_dashboard_lists_every_claim_with_its_verdict(built, browser):
    index, done, swept = built
    visit(browser, index.as_uri())
    rows = browser.execute_script("""
        return [...document.querySelectorAll('table tbody tr')].map(tr =>
            [[...tr.cells].map(td => td.innerText.trim()), tr.cells[0].querySelector('a')?.href ?? null]);""")
    by_claim = {cells[0]: (cells, href) for cells, href in rows}
    assert list(by_claim) == list(CLAIMS)
    for claim, (cells, href) in by_claim.items():
        if claim in done:
            meta = done[claim][1]
            assert cells[3] == runner.verdict_text(meta["verdict"]), claim
            assert href and local_path(href) == index.parent / "claims" / f"{claim}.html", claim
        else:
            assert cells[3] == "not reproduced yet" and href is None, claim
    assert by_claim[swept][0][6] == f"holds in {SWEEP_HOLDS} of {len(SWEEP_SEEDS)} seeds"


def test_claim_pages_state_their_provenance(built, browser):
    index, done, _ = built
    for claim, (_, meta) in done.items():
        visit(browser, (index.parent / "claims" / f"{claim}.html").as_uri())
        boxes = [e.text for e in browser.find_elements("css selector", ".admonition") if "Provenance" in e.text]
        assert len(boxes) == 1, claim
        facts = [meta["commit"], f"{meta['wall_s']} s", f"device {meta['provenance']['device']}",
                 f"torch {meta['provenance']['torch']}"] + [f"{k}={v!r}" for k, v in meta["parameters"].items()]
        for fact in facts:
            assert fact in boxes[0], (claim, fact)
