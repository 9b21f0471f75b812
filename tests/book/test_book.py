"""The book, built with warnings as errors and read back in headless Chromium.

The book is built from the committed notebooks that carry `metadata.nbdemo` (written by `nbdemo run --commit`), as
they are. Their fingerprints go stale whenever anything in nbdemo/ changes, and re-running them (about a minute
each) is the job of `nbdemo book`, not of a test, so the test hands `book.build` these notebooks itself and nothing
is executed; committed notebooks without that metadata are left out of the book, and show as "not reproduced yet".
Sources and HTML go to a temporary folder (runner.BUILD is patched), so `make book` and book/_build are untouched.

The book is built once, and each page loaded once (the claim pages once per window width, `looks`): the tests assert
on what those visits read. Under pytest-xdist these tests run together on one worker (tests/conftest.py).
"""
import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
import yaml
from filelock import FileLock
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.support.wait import WebDriverWait

from nbdemo.book import build as book
from nbdemo.book import claim_page, findings, markup, staging, why
from nbdemo.book import pages as generated
from nbdemo.claims.registry import CLAIMS, PAPERS, ROOT
from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from nbdemo.runs import history, params, rules, runner, store

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]
R, N, I = REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE
# synthetic sweeps of the first committed claims: outcomes per seed -> (headline, reproduced, stale seeds), and
# their controls' outcomes per seed (None: not run). The first claim's check holds in 3 of 5 control seeds, so it is
# uninformative and the claim INCONCLUSIVE although 4 of 5 seeds reproduce (k = 0 after the control); the second
# reproduces in every seed, and its control fails in every seed (a control that does what it should); the third
# claim's control is declared but not run, so its check is untested, and one of its seeds is stale. The first claim
# has a history (HISTORY): two states, the second with a threshold moved, and a declared revision.
SWEEPS = [([R, R, R, N, R], (I, 0, [])), ([R] * 5, (R, 5, [])), ([N] * 5, (N, 0, [4]))]
CONTROLS = [[R, R, R, N, N], [N] * 5, None]
# the synthetic claims' runs judged with their controls (the first claim's check holds in its control, so a run that
# reproduces is INCONCLUSIVE), the seeds that decide (the first claim has none: its last revision after results came
# after every seed), and so their headline (`deciding`) and their tally over every stored seed (`every`)
JUDGED, FRESH = [[I, I, I, N, I], [R] * 5, [N] * 5], [[], range(5), range(5)]


def deciding(i):
    return rules.tally([JUDGED[i][seed] for seed in FRESH[i]], rules.FRESH_SEEDS)


def every(i):
    return rules.tally(JUDGED[i])


COLOURS = {R: "rgb(26, 127, 55)", N: "rgb(207, 34, 46)", rules.MIXED: "rgb(191, 135, 0)", I: "rgb(110, 119, 129)",
           "STALE": "rgb(87, 96, 106)", rules.UNCONFIRMED: "rgb(255, 255, 255)"}
# a control's colours are none of the claims': blue when it fails as it should, purple when it reproduces
CONTROL_COLOURS = {N: "rgb(9, 105, 218)", R: "rgb(130, 80, 223)", rules.MIXED: COLOURS[rules.MIXED], I: COLOURS[I]}


def plain(s):
    """Text as the browser shows it, with Sphinx's typographic quotes made straight again."""
    return s.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"')
# executed notebooks of other profiles kept in results/ (`nbdemo run --keep`): a named profile, and one with overrides
OTHERS = [(CLAIMS["TFD-1"], "paper", "NVIDIA H100 80GB HBM3"), (CLAIMS["TFD-1"], "paper-steps=600", "NVIDIA H200")]


def committed():
    """{Claim: (notebook, its nbdemo metadata)} for the committed notebooks that were executed by the runner."""
    done = {}
    for c in CLAIMS.values():
        meta = c.notebook.exists() and runner.summary(nbformat.read(c.notebook, as_version=4))
        if meta:
            done[c] = (c.notebook, meta)
    return done


@pytest.fixture(scope="module")
def built(tmp_path_factory, fake_meta, worker_id):
    """Build the book strictly (-W -n --keep-going) from the committed notebooks, with synthetic sweep results for
    three claims (one of them with a stale seed) and one paper-profile notebook in a temporary results store.
    Under pytest-xdist the workers share one build: the first to take the lock builds, the others read its path."""
    done = committed()
    assert done, "no committed notebook carries metadata.nbdemo; run `nbdemo run <claim> --commit`"
    swept = dict(zip(done, [(outcomes, expected, control) for (outcomes, expected), control in zip(SWEEPS, CONTROLS)]))
    expected = {c: expected for c, (_, expected, _) in swept.items()}
    shared = tmp_path_factory.mktemp("book") if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    with FileLock(shared / "book.lock"):
        if not (shared / "book.index").exists():
            index = build_book(shared / "book", done, swept, fake_meta)
            (shared / "book.index").write_text(str(index))
    return Path((shared / "book.index").read_text()), done, expected


def build_book(tmp, done, swept, fake_meta):
    tmp.mkdir(exist_ok=True)  # a build that failed on the other worker is overwritten
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runner, "BUILD", tmp)
        mp.setattr(store, "RESULTS", tmp / "results")
        mp.setattr(history, "REVISIONS", tmp / "revisions")  # the claims' own revision records are not these tests'
        shutil.copytree(params.PROFILES, tmp / "profiles", dirs_exist_ok=True)
        mp.setattr(params, "PROFILES", tmp / "profiles")
        for claim, (outcomes, (_, _, stale), control) in swept.items():
            named = {**params.profile_file(claim), "control": {"seed": 0}, "control about": "a synthetic control"}
            named.pop("no control", None)
            (tmp / "profiles" / f"{claim.id}.yml").write_text(yaml.safe_dump(named))
            for seed, outcome in enumerate(outcomes):
                store.store(claim, fake_meta(claim, seed, outcome, fresh=seed not in stale))
            for seed, outcome in enumerate(control or []):
                store.store(claim, fake_meta(claim, seed, outcome, profile="control"), "control")
        synthetic_history(next(iter(swept)))
        for claim, run, gpu in OTHERS:
            nb = nbformat.read(done[claim][0], as_version=4)
            nb.metadata["nbdemo"] = {**nb.metadata["nbdemo"], "profile": run.split("-")[0],
                                     "provenance": {**nb.metadata["nbdemo"]["provenance"], "device": "cuda", "gpu": gpu}}
            (tmp / "results" / run).mkdir(parents=True)
            nbformat.write(nb, tmp / "results" / run / f"{claim.id}.ipynb")
        return book.build(strict=True, done=done, out=tmp / "out")


def synthetic_history(claim):
    """Two states of the claim's store, the second with its check's threshold moved after a declared revision."""
    now = store.path(claim).read_bytes()
    before = re.sub(rb'("name": "claim",\s+"value": [^,]+,\s+"op": ">=",\s+"threshold": )0.5', rb"\g<1>0.4", now)
    control = store.path(claim, "control").read_bytes()
    states = [{**history.state(body, control, params.defaults(claim), params.profile_file(claim)), "at": at,
               "commit": commit}
              for body, at, commit in [(before, "2026-11-20T00:00:00+00:00", "aaaaaaa"),
                                       (now, "2026-11-22T00:00:00+00:00", "bbbbbbb")]]
    revision = {**history._revision({"date": "2026-11-21", "kind": "threshold", "what": "the check's threshold 0.5",
                                     "why": "Fig. 3 (l.45)"}), "at": "2026-11-21T00:00:00+00:00", "commit": "ccccccc"}
    history.merge(claim, states, [revision])


def chromium(tmp_path_factory, *flags):
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("needs Debian's chromium and chromium-driver (`make system` as root installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + list(flags) + [f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"]:
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # the console, for `read`
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory)
    driver.set_window_size(1400, 900)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def offline(tmp_path_factory):
    """A browser with the network off: every request goes to a proxy that is not there (file:// pages still load)."""
    driver = chromium(tmp_path_factory, "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>")
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


def opened(browser):
    """Open a claim page's collapsed parts (its <details class="section">), for a test that reads what is inside."""
    browser.execute_script("document.querySelectorAll('details.section').forEach(d => d.open = true)")


PAGE = """return [[...document.querySelectorAll('[id]')].map(e => e.id),
    [...document.querySelectorAll('a[href]')].map(a => a.href).filter(h => h.startsWith('file:')),
    [...document.images].map(i => [i.src, i.complete ? i.naturalWidth : 0]),
    document.body.textContent + [...document.querySelectorAll('[href], [src]')].map(e =>
        e.getAttribute('href') || e.getAttribute('src')).join('')];"""


def crawl(browser, index):
    """Visit every HTML page reachable from index.html; return {page: (ids, links, images, text, prose)} as the
    browser sees them.

    links are absolute file:// URLs of the book; images are (src, naturalWidth) once the page has loaded; text is the
    body's text content followed by every href and src; prose is the main text without code and outputs (PROSE).
    """
    root, seen, todo = index.parent, {}, [index.as_uri()]
    while todo:
        url = todo.pop()
        page = local_path(url)
        if page in seen:
            continue
        page = visit(browser, url)
        seen[page] = browser.execute_script(PAGE) + [browser.execute_script(PROSE)]
        todo += [h.split("#")[0] for h in seen[page][1]
                 if h.split("#")[0].endswith(".html") and local_path(h).is_relative_to(root)]
    return seen


@pytest.fixture(scope="module")
def pages(built, browser):
    return crawl(browser, built[0])


# What the tests read on the claim pages, {width: {name: (look, expanded)}}: a look is a function of the browser on a
# claim page that has loaded, registered for the window widths it is taken at, and for the page as it opens or with
# its collapsed parts open (expanded, `opened`).
LOOKS = {}


def look(*widths, expanded=False):
    def register(fn):
        for width in widths:
            LOOKS.setdefault(width, {})[fn.__name__] = fn, expanded
        return fn
    return register


@pytest.fixture(scope="module")
def looks(built, browser):
    """{(look, width): {claim id: what the look read}}: each claim page loaded once per width, every look taken, those
    of the page as it opens first."""
    seen = {}
    try:
        for width, named in LOOKS.items():
            browser.set_window_size(width, 900)
            for claim, page in claim_pages(built):
                browser.get_log("browser")  # the console's messages so far are of the pages before
                visit(browser, page.as_uri())
                for now_expanded in (False, True):
                    if now_expanded:
                        opened(browser)
                    for name, (fn, expanded) in named.items():
                        if expanded == now_expanded:
                            seen.setdefault((name, width), {})[claim.id] = fn(browser)
    finally:
        browser.set_window_size(1400, 900)
    return seen


def test_every_claim_page_is_in_the_book(built, pages):
    html = built[0].parent
    assert html / "intro.html" in pages
    assert {html / "claims" / f"{c.id}.html" for c in built[1]} <= set(pages)


def test_every_internal_link_resolves(pages):
    broken = []
    for page, (_, links, *_) in pages.items():
        for link in links:
            target, fragment = local_path(link), urlsplit(link).fragment
            if not target.exists() or (fragment and target in pages and unquote(fragment) not in pages[target][0]):
                broken.append(f"{page.name} -> {link}")
    assert not broken


def test_every_image_loaded_and_every_figure_shown(built, pages):
    html, done = built[0].parent, built[1]
    assert not [(page.name, src) for page, (_, _, images, *_) in pages.items() for src, width in images if width <= 0]
    for claim, (path, _) in done.items():
        figures = sum("image/png" in out.get("data", {}) for cell in nbformat.read(path, as_version=4).cells
                      for out in cell.get("outputs", []))
        assert len(pages[html / "claims" / f"{claim.id}.html"][2]) >= figures, claim.id


@look(1400, expanded=True)
def bare_plots(browser):
    return browser.execute_script("""return [...document.querySelectorAll('.cell_output img')].filter(i => {
        const caption = i.closest('figure')?.querySelector('figcaption');
        return !(caption?.querySelector('.caption-number') && caption.innerText.trim().length > 40);}).length;""")


def test_every_plot_is_a_numbered_figure_with_a_caption(built, looks):
    """A plot on a claim page is a figure with its number and caption (the `mystnb.figure` metadata of the cell that
    draws it), so that the prose can refer to it and a reader knows what it shows."""
    assert len(looks["bare_plots", 1400]) == len(built[1])
    assert not {claim: n for claim, n in looks["bare_plots", 1400].items() if n}


def test_dashboard_shows_outcomes_over_seeds_in_colour(built, browser):
    """A row per claim, its title in the first column; the headline of its fresh seeds with k of n, robust or what
    it depends on, why, its control (coloured by what a control should do, in colours of its own), its revisions
    after results, its tally over every stored seed, its setting; every term defined on the page."""
    index, done, swept = built
    visit(browser, index.as_uri())
    rows = browser.execute_script("""
        return [...document.querySelectorAll('table.dashboard tbody tr')].map(tr =>
            [[...tr.cells].map(td => td.innerText.trim()), tr.cells[0].querySelector('a')?.href ?? null,
             [...tr.cells[1].querySelectorAll('.outcome')].map(e => getComputedStyle(e).borderStyle == 'dashed'
                 ? 'rgb(87, 96, 106)' : getComputedStyle(e).backgroundColor),
             [...tr.querySelectorAll('.outcome.control')].map(e => getComputedStyle(e).backgroundColor)]);""")
    by_claim = {cells[0].split()[0]: ([plain(c) for c in cells], href, colours, control)
                for cells, href, colours, control in rows}
    assert list(by_claim) == list(CLAIMS)
    found = generated.findings_by_claim(done)
    for id_, (cells, href, colours, control_colours) in by_claim.items():
        claim = CLAIMS[id_]
        cell = dict(zip(generated.DASHBOARD, cells))
        assert plain(claim.title) in cell["Claim"], id_  # the title in the first column
        if claim in done:
            assert href and local_path(href) == index.parent / "claims" / f"{id_}.html", id_
        else:
            assert href is None and cell["Headline (fresh seeds)"] == "not reproduced yet", id_
        assert cell["Setting"] == generated.setting_word(claim), id_
        if claim in swept:
            i = list(swept).index(claim)
            head, all_seeds, stale = deciding(i), every(i), swept[claim][2]
            said = cell["Headline (fresh seeds)"]
            assert said.startswith("STALE last stored: " * bool(stale) + head["headline"]), id_
            assert f"{head['k']} of {head['n']} " in said and "seeds reproduce (95% interval" in said, id_
            assert colours[0] == COLOURS["STALE" if stale else head["headline"]], id_
            assert cell["Over every stored seed"].startswith(
                f"{all_seeds['headline']} {all_seeds['k']} of {all_seeds['n']} seeds reproduce"), id_
            control = CONTROLS[i]
            if control:
                said = generated.CONTROL_SAYS[rules.headline(control)][1]
                assert cell["Control"] == f"{rules.headline(control)} ({said})", id_
                assert control_colours == [CONTROL_COLOURS[rules.headline(control)]], id_
                assert control_colours[0] not in (COLOURS[R], COLOURS[N]), id_  # one meaning per colour
            else:
                assert cell["Control"] == "not run yet", id_
            assert cell["Revised after results"] == ("1 (1 declared)" if i == 0 else "none"), id_
            assert cell["Robust?"] == "no alternative declared", id_
        elif claim in done:
            assert cell["Headline (fresh seeds)"] == "no sweep yet", id_
        if claim in found:  # why, in one line, with its kind: the finding's first sentence
            kind, finding = found[claim]
            headline = deciding(list(swept).index(claim))["headline"] if claim in swept else None
            assert cell["Why"].startswith(plain(why.finding_label(kind, headline))), id_
        elif claim not in done:
            assert cell["Why"] == "not run no stored run", id_
    text = plain(browser.find_element("tag name", "main").text)
    assert "REPRODUCED when the interval's lower bound is at least 0.5" in text  # rules.RULE
    for term in ["Headline (fresh seeds):", "Robust?", "Why:", "Control:", "Revised after results:",
                 "Over every stored seed:", "Setting:", "UNCONFIRMED", "STALE"]:
        assert term in text, term  # every term defined on the page
    assert not browser.find_elements("css selector", "table.dashboard [title]")  # not in tooltips
    for prefix in PAPERS:
        assert f"{prefix} {sum(c.startswith(prefix + '-') for c in CLAIMS)}" in text  # the summary's scope


def test_claim_pages_open_with_the_outcome_over_seeds(built, browser):
    """The evidence over seeds, collapsed under the top of the page: the headline, one outcome per seed (the rule's,
    its control included, and why where its rows alone say otherwise), the rows, each row's value in each seed, the
    stored results to download."""
    index, done, swept = built
    for claim, (_, _, stale) in swept.items():
        i = list(swept).index(claim)
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        box = browser.find_element("css selector", ".admonition.seeds")
        assert not box.is_displayed(), claim.id  # collapsed
        opened(browser)
        box_text = plain(box.text)
        head = deciding(i)
        assert f"Headline: {'STALE last stored: ' * bool(stale)}{head['headline']} {head['k']} of {head['n']}" \
            in box_text, claim.id
        tables = box.find_elements("css selector", "table")
        per_seed = tables[0].find_elements("css selector", "tbody tr")
        assert [r.text.split()[0] for r in per_seed] == ["0", "1", "2", "3", "4"], claim.id
        assert [r.find_element("css selector", ".outcome").text for r in per_seed] == JUDGED[i], claim.id
        per_row = {cells[1]: cells for cells in ([td.text for td in r.find_elements("css selector", "td")] for r in
                   tables[1].find_elements("css selector", "tbody tr"))}
        assert per_row["fit"][2] == f"{5 - SWEEPS[i][0].count(I)} of 5", claim.id
        assert per_row["claim"][4] == ">= 0.5 (ours: synthetic)", claim.id
        if i == 0:  # the check holds in 3 of 5 control seeds, so a seed whose rows reproduce is INCONCLUSIVE: said why
            assert per_row["claim"][5] == "3 of 5 (uninformative)"
            assert "a synthetic control" in box_text
            assert "INCONCLUSIVE (by its rows alone REPRODUCED: every check holds, but none of them is tested and " \
                   "failed by the negative control" in plain(per_seed[0].text)
        if i == 2:  # a control declared and not run tests nothing
            assert per_row["claim"][5] == "untested: the control has not been run", claim.id
        assert ("Stale: this is the last stored headline, not a current one" in box_text) == bool(stale), claim.id
        departs = generated.departures(claim)
        assert ("Setting: a substitute" in box_text) == bool(departs), claim.id
        assert all(d.split()[0] in box_text for d in departs or []), claim.id
        # each row's value in each seed, in a table that opens, and the stored results to download
        details = box.find_element("css selector", "details.per-seed")
        assert not details.get_attribute("open")
        details.find_element("tag name", "summary").click()
        cells = [[td.text for td in tr.find_elements("tag name", "td")]
                 for tr in details.find_elements("css selector", "tbody tr")]
        assert [c[0] for c in cells] == ["fit", "claim"], claim.id
        assert cells[1][1:] == [("1" if o == R else "0 ✗") for o in SWEEPS[i][0]], claim.id
        link = box.find_element("partial link text", f"{claim.id}.json").get_attribute("href")
        stored = json.loads(local_path(link).read_text())
        assert stored["claim"] == claim.id and len(stored["runs"]) == 5, claim.id
    others = [c for c in done if c not in swept]
    if others:
        visit(browser, (index.parent / "claims" / f"{others[0].id}.html").as_uri())
        opened(browser)
        assert "No sweep over seeds is stored" in browser.find_element("css selector", ".admonition.seeds").text


def test_claim_pages_show_the_verdicts_history_and_the_fresh_seeds(built, browser):
    """The history, collapsed, a line each: the states where the headline moved and every revision after results,
    marked, no line number of the paper's text copy; which seeds are fresh."""
    index, _, swept = built
    first, second = list(swept)[:2]
    visit(browser, (index.parent / "claims" / f"{first.id}.html").as_uri())
    opened(browser)
    section = browser.find_element("css selector", "details.section.history")
    rows = [[td.text for td in tr.find_elements("css selector", "td")]
            for tr in section.find_element("css selector", "table.history").find_elements("css selector", "tbody tr")]
    assert [r[:2] for r in rows] == [["2026-11-20", "aaaaaaa"], ["2026-11-21", "ccccccc"], ["2026-11-22", "bbbbbbb"]]
    assert rows[0][3] == "first stored" and rows[1][2] == "declared revision"
    assert rows[1][3] == "threshold: the check's threshold 0.5 revised after results"
    assert rows[2][3] == "threshold of a check (1) revised after results" and re.fullmatch(r"[A-Z ]+ \d+ of \d+", rows[2][2])
    assert "1 revisions after results" in plain(section.text)
    box = browser.find_element("css selector", ".admonition.seeds")
    assert "Fresh seeds: none yet. No seed has been run for the first time since the claim's last revision after " \
           "results (2026-11-21)." in plain(box.text)
    visit(browser, (index.parent / "claims" / f"{second.id}.html").as_uri())
    opened(browser)
    box = browser.find_element("css selector", ".admonition.seeds")
    assert "Fresh seeds: the claim has no revision after results" in plain(box.text)
    assert not browser.find_elements("css selector", "table.history")


def test_a_stale_claim_is_never_shown_as_current(built, browser):
    """A claim whose stored runs are stale shows STALE and its last stored headline, on the dashboard, its chapter
    and its page (a landing may come before the final sweep)."""
    index, _, swept = built
    claim = next(c for c, (_, _, stale) in swept.items() if stale)
    visit(browser, index.as_uri())
    row = next(tr for tr in browser.find_elements("css selector", "table.dashboard tbody tr")
               if tr.find_element("tag name", "td").text.split()[0] == claim.id)
    assert row.find_elements("tag name", "td")[1].text.startswith("STALE last stored: ")
    visit(browser, (index.parent / f"{claim.paper.lower()}.html").as_uri())
    row = next(tr for tr in browser.find_elements("css selector", "table.chapter tbody tr")
               if tr.find_element("tag name", "td").text == claim.id)
    assert row.find_elements("tag name", "td")[1].text.startswith("STALE last stored: ")
    visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
    assert plain(browser.find_element("css selector", "p.verdict-line").text).startswith("STALE last stored: ")
    opened(browser)
    box = browser.find_element("css selector", ".admonition.seeds")
    assert "box-stale" in box.get_attribute("class") and "Stale: this is the last stored headline" in box.text


@pytest.mark.parametrize("other", OTHERS, ids=lambda o: o[1])
def test_results_of_other_profiles_are_shown_beside_the_default(built, browser, other):
    """Another profile's run is listed under its claim and titled as a run of that profile, in the sidebar too."""
    index, done, _ = built
    claim, run, gpu = other
    if claim not in done:
        pytest.skip(f"{claim.id} has no committed notebook")
    visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
    opened(browser)
    section = browser.find_element("css selector", "details.section.others")
    link = section.find_element("partial link text", f"{claim.id}, run of the {run} profile")
    page = f"{claim.id}-{run.replace('=', '-')}.html"
    assert gpu in link.text and local_path(link.get_attribute("href")).name == page
    visit(browser, link.get_attribute("href"))
    assert browser.find_element("css selector", "article h1").text.startswith(f"{claim.id}, run of the {run} profile")
    assert gpu in next(e.text for e in browser.find_elements("css selector", ".admonition") if "Provenance" in e.text)


def test_another_profiles_page_gets_its_own_figure_names():
    """The paper profile's page is a second copy of the claim's notebook: its figures and the references to them are
    renamed, so that each label is once in the book (a strict build fails on a duplicate)."""
    nb = staging.relabel(nbformat.read(CLAIMS["PFC-1"].notebook, as_version=4), "paper")
    names = [c.metadata["mystnb"]["figure"]["name"] for c in nb.cells if "figure" in c.metadata.get("mystnb", {})]
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    assert names and all(n.endswith("-paper") for n in names)
    assert "<fig-pfc-1-1-paper>" in prose and "<fig-pfc-1-1>" not in prose


def test_a_value_the_stored_run_did_not_record_reads_so():
    """A notebook's prose may name a glued value that its stored run did not record (its text changed after it was
    run, before the next sweep): the page says so instead of failing the strict build (myst-nb warns on the key)."""
    out = nbformat.v4.new_output("display_data", {"application/papermill.record/text/plain": "0.5"},
                                 metadata={"scrapbook": {"name": "a", "mime_prefix": "application/papermill.record/"}})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("glue('a', 0.5)", outputs=[out])])
    assert markup.glue_keys(nb) == {"a"}
    assert markup.unglued("{glue:text}`a:.2g` and {glue:text}`b:.2g`, {glue}`b`, {glue:text}`claims/X.ipynb::b`",
                          {"a"}) == (f"{{glue:text}}`a:.2g` and {markup.UNRECORDED}, {markup.UNRECORDED}, "
                                     "{glue:text}`claims/X.ipynb::b`")


def test_findings_page_gathers_the_tagged_cells_and_the_claims_that_did_not_reproduce(built, browser):
    index, done, swept = built
    visit(browser, (index.parent / "findings.html").as_uri())
    text = plain(browser.find_element("tag name", "main").text)
    tagged = [c for c, (path, _) in done.items() if any("finding" in cell.metadata.get("tags", [])
                                                       for cell in nbformat.read(path, as_version=4).cells)]
    for claim in tagged:
        assert f"{claim.id}: {claim.title}" in text, claim.id
    for i, claim in enumerate(swept):
        head = deciding(i)
        listed = f"{claim.id} {claim.title}: {head['headline']}, {head['k']} of {head['n']} "
        assert (listed in text) == (head["headline"] not in (R, rules.UNCONFIRMED, rules.TOO_FEW)), claim.id
        if head["headline"] == rules.UNCONFIRMED:
            assert f"{claim.id} {claim.title}: {head['k']} of {head['n']} " in text, claim.id  # the tally so far


@look(1400, expanded=True)
def provenance(browser):
    return [e.text for e in browser.find_elements("css selector", ".admonition") if "Provenance" in e.text]


def test_claim_pages_state_their_provenance(built, looks):
    _, done, _ = built
    for claim, (_, meta) in done.items():
        boxes = looks["provenance", 1400][claim.id]
        assert len(boxes) == 1, claim.id
        facts = [meta["commit"], f"{meta['wall_s']} s", f"device {meta['provenance']['device']}",
                 f"torch {meta['provenance']['torch']}"] + [f"{k}={v!r}" for k, v in meta["parameters"].items()]
        for fact in facts:
            assert fact in boxes[0], (claim.id, fact)


WIDTHS = (1400, 1280, 420)
OUTSIDE = """
    const w = document.documentElement.clientWidth, bad = [];
    for (const e of document.querySelectorAll(arguments[0])) {
        const r = e.getBoundingClientRect(), box = e.closest('.nbdemo-table')?.getBoundingClientRect() ?? {right: w};
        if (e.innerText.trim() && (r.width == 0 || r.left < 0 || r.right > Math.min(w, box.right) + 0.5))
            bad.push([e.innerText, r.left, r.right, box.right]);
    }
    return [w, document.documentElement.scrollWidth, bad];"""


def outside(browser, selector):
    """The elements matching selector that have text and are hidden or not wholly inside the viewport's width and
    their table's column (a table wider than the column runs under the sidebar); fails when the page scrolls
    sideways."""
    return within(*browser.execute_script(OUTSIDE, selector))


def within(width, scroll, bad):
    assert scroll <= width, f"the page is {scroll} px wide in a {width} px viewport"
    return bad


@pytest.fixture(params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request, browser):
    browser.set_window_size(request.param, 900)
    yield request.param
    browser.set_window_size(1400, 900)


def test_dashboard_shows_every_column_without_scrolling_sideways(built, browser, width):
    index = built[0]
    visit(browser, index.as_uri())
    assert not outside(browser, "table.dashboard td")
    cells = browser.execute_script("return [...document.querySelectorAll('table.dashboard tbody tr')]"
                                   ".map(tr => [...tr.cells].map(td => td.dataset.label))")
    assert all(labels == generated.DASHBOARD for labels in cells) and len(cells) == len(CLAIMS)
    if width > 1000:  # the column is wide enough for the header row
        assert not outside(browser, "table.dashboard th")


@look(*WIDTHS, expanded=True)
def tables(browser):
    table = browser.find_element("css selector", "table.verdict")
    return (browser.execute_script(OUTSIDE, ".admonition.seeds .outcome, table.nbdemo td"),
            [[td.text for td in tr.find_elements("css selector", "td")]
             for tr in table.find_elements("css selector", "tbody tr")],
            browser.find_element("css selector", ".tag_nbval-check-output .cell_output").is_displayed())


@pytest.mark.parametrize("px", WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def test_claim_pages_show_outcome_and_measured_values_without_scrolling_sideways(built, looks, px):
    _, done, _ = built
    for claim, (_, meta) in done.items():
        fit, rows, printed = looks["tables", px][claim.id]
        assert not within(*fit), (claim.id, px)
        assert [(r[0], r[2], r[3]) for r in rows] == [
            (claim_page.MARKS[r["ok"]], markup.readable(r["name"]), markup.readable(r["measured"])) for r in meta["verdict"]["rows"]]
        # the printed text table (what nbval compares) is kept, behind a toggle
        assert not printed


def test_maths_renders_with_the_network_off(built, offline):
    """MathJax is served from the book (Debian's libjs-mathjax), so MLI-9's maths is typeset offline."""
    index, done, _ = built
    if not (book.MATHJAX / "MathJax.js").exists():
        pytest.skip("needs Debian's libjs-mathjax (`make system` as root installs it)")
    claim = CLAIMS["MLI-9"]
    if claim not in done:
        pytest.skip("MLI-9 has no committed notebook")
    visit(offline, (index.parent / "claims" / "MLI-9.html").as_uri())
    scripts = offline.execute_script("return [...document.scripts].map(s => s.src).filter(s => /mathjax/i.test(s))")
    assert scripts and all(s.startswith("file:") for s in scripts), scripts
    count = "return [document.querySelectorAll('.math').length, document.querySelectorAll('.math:has(.MathJax_CHTML)').length]"
    WebDriverWait(offline, 30).until(lambda b: (n := b.execute_script(count))[0] and n[0] == n[1])
    text = offline.find_element("tag name", "main").text
    assert "\\(" not in text and "\\[" not in text


def test_bibliography_entries_link_to_the_papers(built, browser):
    index = built[0]
    visit(browser, index.as_uri())
    links = {a.get_attribute("href") for a in browser.find_elements("css selector", ".citation a")}
    for eprint in ("2112.00980", "2105.05553", "2405.00985", "2210.01019"):
        assert f"https://arxiv.org/abs/{eprint}" in links, eprint


PROSE = """const main = document.querySelector('main').cloneNode(true);
    main.querySelectorAll('pre, code, .cell_input, .cell_output').forEach(e => e.remove());
    return main.innerText;"""


def test_no_page_refers_to_lines_of_the_papers_text_copies(pages):
    """"l.278" points at a line of the project's private text copy of a paper, which no reader has (code may keep
    them in comments, and the printed verdict of a cell keeps them)."""
    found = {}
    for page, (*_, prose) in pages.items():
        if refs := re.findall(r".{20}\bl\.\s?\d+.{0,10}", prose):
            found[page.name] = refs
    assert not found
    assert markup.readable("peaks (§3.3, l.297-304), then (l.325) falls: l.49, Fig. 2a (Fig. 7, l.180)") == \
        "peaks (§3.3), then falls: Fig. 2a (Fig. 7)"
    assert findings.glued_from(CLAIMS["PFC-5"], "norm {glue:text}`gd:.2g`, {glue}`claims/PFC-6.ipynb::x`") == \
        "norm {glue:text}`claims/PFC-5.ipynb::gd:.2g`, {glue}`claims/PFC-6.ipynb::x`"  # a finding copied elsewhere
    assert markup.readable("'learned in the first phase' (l.170, l.178): not already") == \
        "'learned in the first phase': not already"
    assert markup.readable('v.check("x", r, ">", 0, source=paper("§3, Fig. 2a", 45))') == \
        'v.check("x", r, ">", 0, source=paper("§3, Fig. 2a"))'  # code cells: the line stays in the stored row


@look(1400, expanded=True)
def rerun_box(browser):
    return (browser.find_element("css selector", ".admonition.rerun").text,
            bool(browser.find_elements("css selector", ".admonition.rerun a[href^=http]")))


def test_claim_pages_say_how_to_rerun_them(built, looks):
    """The exact commands: the headline's seeds, the control's, the run on the page, the paper's profile."""
    _, done, swept = built
    for claim in done:
        box, linked = looks["rerun_box", 1400][claim.id]
        assert f"nbdemo run {claim.id}\n" in box and f"nbdemo sweep {claim.id} --seeds " in box, claim.id
        if claim in swept:
            assert f"nbdemo sweep {claim.id} --seeds 0-4" in box, claim.id
            assert (f"nbdemo sweep {claim.id} --profile control --seeds 0-4" in box) == bool(
                CONTROLS[list(swept).index(claim)]), claim.id
        assert (f"nbdemo run {claim.id} --profile paper" in box) == ("paper" in params.profiles(claim)), claim.id
        # no repository address was given to this build: the notebook is named, not linked to an invented address
        assert f"notebooks/{claim.id}.ipynb in the repository" in box, claim.id
        assert not linked, claim.id


INVENTED = ["github.com/nbdemo", "nbdemo.github.io", "The nbdemo authors"]  # the placeholders this book once showed


def test_without_addresses_the_book_shows_no_repository_and_no_invented_address(built, browser, monkeypatch):
    """The build was given no address ($NBDEMO_REPOSITORY, $NBDEMO_SITE unset): no repository or issue button, no
    canonical address, no placeholder anywhere in the site; the citation has no url. Given them, the staged
    configuration and the citation carry them, once."""
    index = built[0]
    visit(browser, index.as_uri())
    hrefs = browser.execute_script("return [...document.querySelectorAll('a')].map(a => a.href)")
    assert not [h for h in hrefs if "github.com" in h]
    assert not browser.find_elements("css selector", "link[rel=canonical]")
    text = browser.find_element("tag name", "main").text
    assert "How to cite" in text and "@software{nbdemo" in text and "url" not in text.split("@software")[1]
    site = index.parent
    assert not {(f.name, p) for f in site.rglob("*") if f.suffix in (".html", ".ipynb", ".txt", ".bib")
                for p in INVENTED if p in f.read_text(errors="ignore")}
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert not {"repository-code", "url"} & cff.keys() and not any(p in str(cff) for p in INVENTED)
    monkeypatch.setenv("NBDEMO_REPOSITORY", "https://example.org/someone/repo")
    monkeypatch.setenv("NBDEMO_SITE", "https://someone.example.org/repo")
    src = built[0].parents[3] / "staged"
    (src).mkdir(exist_ok=True)
    shutil.copy(book.BOOK / "_config.yml", src / "_config.yml")
    book.config(src)
    conf = yaml.safe_load((src / "_config.yml").read_text())
    assert conf["repository"]["url"] == "https://example.org/someone/repo" and conf["html"]["use_repository_button"]
    assert conf["html"]["baseurl"] == "https://someone.example.org/repo/"
    assert "url     = {https://someone.example.org/repo/}" in generated.citation()
    assert "code: https://example.org/someone/repo" in generated.citation()


def test_the_book_opens_with_a_reproducibility_summary_and_each_chapter_lists_its_claims(built, browser):
    index, done, swept = built
    visit(browser, index.as_uri())
    first = browser.find_element("css selector", "main section section")
    assert first.find_element("tag name", "h2").text.startswith("Reproducibility summary")
    text = first.text
    assert f"{len(CLAIMS)} claims of four papers" in text and "Setting:" in text and "Main findings" in text
    headlines = [deciding(i)["headline"] for i in range(len(swept))]
    for h in set(headlines):
        assert f"{headlines.count(h)} {h}" in text, h
    assert f"{len(CLAIMS) - len(swept)} without a sweep yet" in text
    for prefix in PAPERS:
        visit(browser, (index.parent / f"{prefix.lower()}.html").as_uri())
        rows = browser.find_elements("css selector", "table.chapter tbody tr")
        assert [r.find_element("tag name", "td").text for r in rows] == [c for c in CLAIMS if c.startswith(prefix + "-")]
    for i, claim in enumerate(swept):  # the outcome box is coloured by the headline (grey where unconfirmed)
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        colour = browser.execute_script(
            "return getComputedStyle(document.querySelector('.admonition.seeds')).borderLeftColor")
        headline = deciding(i)["headline"]
        assert colour == ("rgb(140, 149, 159)" if headline == rules.UNCONFIRMED and not swept[claim][2] else
                          COLOURS["STALE" if swept[claim][2] else headline]), claim.id


def claim_pages(built):
    index, done, _ = built
    return [(claim, index.parent / "claims" / f"{claim.id}.html") for claim in done]


@look(420)
def verdict_line(browser):
    line = browser.find_element("css selector", "p.verdict-line")
    return browser.execute_script("const r = arguments[0].getBoundingClientRect(); return r.bottom + window.scrollY",
                                  line), line.text


def test_each_claim_page_opens_with_its_verdict_and_why_within_the_first_screen_of_a_phone(built, looks):
    """Under the title, one line: the headline over seeds (STALE and the last stored where it is not current), or
    seed 0's outcome where there is no sweep, and why; its bottom within the first 800 px at 420 px."""
    _, done, swept = built
    for claim, _ in claim_pages(built):
        bottom, text = looks["verdict_line", 420][claim.id]
        assert bottom <= 800, (claim.id, bottom)
        text = plain(text)
        if claim in swept:
            head, stale = deciding(list(swept).index(claim)), swept[claim][2]
            said = f"{head['headline']} {head['k']} of {head['n']} "
            assert text.startswith(f"STALE last stored: {said}" if stale else said), (claim.id, text)
        else:  # the seed-0 run alone, STALE where today's code would not make it
            said = f"{done[claim][1]['verdict']['outcome']} in seed 0 alone"
            stale = claim_page.stale_run(claim, done[claim][1])
            assert text.startswith(f"STALE last stored: {said}" if stale else said), (claim.id, text)
        assert "Why: " in text and len(text.split("Why: ")[1]) > 10, (claim.id, text)


MATHS = """
    const w = document.documentElement.clientWidth, bad = [];
    for (const m of document.querySelectorAll('div.math, .MJXc-display, .MathJax_Display')) {
        const r = m.getBoundingClientRect(), scrolls = ['auto', 'scroll'].includes(getComputedStyle(m).overflowX);
        if (r.right > w + 0.5 || (m.scrollWidth > m.clientWidth + 1 && !scrolls)) bad.push([m.innerText.slice(0, 60),
            r.width, m.scrollWidth]);
        for (let p = m.parentElement; p && p.tagName != 'MAIN'; p = p.parentElement) {  // clipped by a box above
            const q = p.getBoundingClientRect();
            if (getComputedStyle(p).overflowX == 'hidden' && r.right > q.right + 0.5 && !scrolls)
                bad.push([m.innerText.slice(0, 60), 'clipped by', p.className]);
        }
    }
    return bad;"""


@look(420)
def maths(browser):
    """(display equations, those that overflow or are clipped) once MathJax has typeset the page; None without
    MathJax."""
    if not (book.MATHJAX / "MathJax.js").exists():
        return None
    count = "return [document.querySelectorAll('.math').length, document.querySelectorAll('.math:has(.MathJax_CHTML)').length]"
    WebDriverWait(browser, 30).until(lambda b: (n := b.execute_script(count))[0] == n[1])
    return browser.execute_script("return document.querySelectorAll('div.math').length"), browser.execute_script(MATHS)


def test_display_maths_scrolls_and_is_never_clipped_on_a_phone(looks):
    """At 420 px every display equation fits its column or scrolls inside its own box, once MathJax has typeset it
    (MathJax served by the book, as `make system` installs it)."""
    if not (book.MATHJAX / "MathJax.js").exists():
        pytest.skip("needs Debian's libjs-mathjax (`make system` as root installs it)")
    seen = looks["maths", 420]
    assert sum(displays for displays, _ in seen.values()) and not {c: bad for c, (_, bad) in seen.items() if bad}


@look(1400, expanded=True)
def figures(browser):
    return browser.execute_script("""return [...document.querySelectorAll('.cell_output figure')].filter(f =>
        f.querySelector('img')).map(f => {const img = f.querySelector('img');
        return [f.querySelector('.caption-number')?.innerText.trim(), f.querySelector('.caption-text')?.innerText,
                img.alt, img.closest('a')?.href, img.src];});""")


def test_figures_are_numbered_per_claim_link_to_their_full_size_and_carry_their_caption(built, browser, looks):
    """"Figure PFC-1.2": each claim page numbers its own figures; each image is a link to its file at full size, and
    its alt text is its caption."""
    for claim, _ in claim_pages(built):
        figures = looks["figures", 1400][claim.id]
        assert [n for n, *_ in figures] == [f"Figure {claim.id}.{i}" for i in range(1, len(figures) + 1)], claim.id
        for number, caption, alt, href, src in figures:  # the alt text is the caption's (its maths as TeX)
            assert alt.split()[0] == caption.split()[0] and len(alt) > 20 and ".png" not in alt, (claim.id, number)
            assert href == src and local_path(href).exists(), (claim.id, number)
    visit(browser, (built[0].parent / "claims" / "TFD-1-paper.html").as_uri())
    numbers = browser.execute_script("return [...document.querySelectorAll('.caption-number')].map(e => e.innerText)")
    assert all(n.startswith("Figure TFD-1-paper.") for n in numbers)


def png_dpi(path):
    from PIL import Image
    with Image.open(path) as image:
        return image.info.get("dpi", (72, 72))[0]


@look(420)
def images(browser):
    """(src, width shown, natural width) of each figure, and whether the page fits the window's width."""
    return (browser.execute_script("""return [...document.querySelectorAll('.cell_output figure img')].map(i =>
        [i.src, i.getBoundingClientRect().width, i.naturalWidth]);"""),
            browser.execute_script("return document.documentElement.scrollWidth <= document.documentElement.clientWidth"))


def test_figures_stay_legible_on_a_phone(built, looks):
    """At 420 px a figure is shown at least at the scale at which its tick labels (matplotlib's 10 pt at the PNG's
    dpi) are 9 px high, scrolling sideways in its own box where it is wider than the column; the page itself does
    not scroll sideways."""
    small = {}
    for claim, _ in claim_pages(built):
        shown_images, fits = looks["images", 420][claim.id]
        for src, shown, natural in shown_images:
            tick = 10 * png_dpi(local_path(src)) / 72 * shown / natural
            if tick < 9:
                small.setdefault(claim.id, []).append(round(tick, 1))
        assert fits, claim.id
    assert not small


def test_claim_pages_use_the_full_width_of_a_wide_screen(built, browser):
    _, _, swept = built
    claim = next(iter(swept))
    visit(browser, (built[0].parent / "claims" / f"{claim.id}.html").as_uri())
    width = browser.execute_script("return document.querySelector('table.evidence').getBoundingClientRect().width")
    assert width >= 0.6 * 1400, width


def test_booleans_read_as_counts_over_seeds():
    """A yes-or-no statistic over seeds reads "finite in 5 of 5", not a mean of -1."""
    finite = {"name": "training stayed finite", "op": "==", "value": -1.0, "measured": "finite", "ok": True}
    runs = {s: {"rows": [finite if s else {**finite, "value": 30.0, "measured": "diverged at step 30", "ok": False}]}
            for s in range(5)}
    assert claim_page._counted(runs, "training stayed finite") == "finite in 4 of 5; diverged at step 30 in 1"
    flag = {"name": "flag", "op": ">=", "value": True, "measured": "True", "ok": True}
    assert claim_page._counted({0: {"rows": [flag]}, 1: {"rows": [{**flag, "value": False}]}}, "flag") == \
        "yes in 1 of 2; no in 1"
    assert claim_page._counted({0: {"rows": [{**flag, "value": 0.3}]}}, "flag") is None


PRIVATE = [re.compile(r"\bl\.\s?\d+"), re.compile(r"(?<![\w.:/])/(?:work|tmp|home|root|Users|mnt|opt)/")]


def published(built):
    """The built site's pages and the notebooks its download buttons serve."""
    site = built[0].parent
    return [*site.rglob("*.html"), *site.rglob("_sources/**/*.ipynb")]


def test_nothing_private_in_the_built_site_or_its_notebooks(built, browser, pages):
    """No line number of the papers' private text copies ("l.45") in the text of any page, code and outputs
    included, nor in a published .ipynb; no absolute path of the machine that built or ran it in either."""
    found = {}
    for path in published(built):
        body = path.read_text(errors="ignore")
        if path.suffix == ".html":  # read in the crawl, or else (a page no link reaches) now
            body = pages[path][3] if path in pages else (visit(browser, path.as_uri()), browser.execute_script(PAGE))[1][3]
        if hits := [m[0] for p in PRIVATE for m in p.finditer(body)]:
            found[path.name] = hits[:5]
    assert not found
    assert any(p.suffix == ".ipynb" for p in published(built))
    nb = nbformat.read(next(p for p in published(built) if p.suffix == ".ipynb"), as_version=4)
    assert "input_path" not in nb.metadata.get("papermill", {})


def test_tags_are_explained_where_they_appear(built, browser):
    """Every tag after a headline (dashboard, chapters) is spelled out in the legend under the table, on the page
    itself and not in a tooltip, which a phone cannot show."""
    index, _, swept = built
    pages = [index] + [index.parent / f"{p.lower()}.html" for p in PAPERS]
    seen = set()
    for page in pages:
        visit(browser, page.as_uri())
        text = plain(browser.find_element("tag name", "main").text)
        for name in browser.execute_script("return [...document.querySelectorAll('span.tag')].map(a => a.dataset.tag)"):
            assert f"{name}: {plain(why.TAGS[name])}" in text, (page.name, name)
            seen.add(name)
        assert not browser.find_elements("css selector", "abbr[title], span.tag[title]"), page.name
    assert {"uninformative check", "untested check", "finding"} <= seen


# ---------------------------------------------------------------- a claim page a researcher reads in five minutes

READER = """
    const article = document.querySelector('article') || document.querySelector('main');
    const first = article.querySelector('details');
    const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
    let words = 0;
    while (walker.nextNode()) {
        const n = walker.currentNode;
        if (first && (first.contains(n) || (first.compareDocumentPosition(n) & Node.DOCUMENT_POSITION_FOLLOWING))) break;
        const e = n.parentElement;
        if (!e || e.closest('script, style, .MathJax_Preview, .headerlink') ||
            !e.checkVisibility({visibilityProperty: true, opacityProperty: true})) continue;
        words += n.textContent.split(/\\s+/).filter(w => /[\\p{L}\\p{N}]/u.test(w)).length;
    }
    const figure = article.querySelector('figure img, .cell_output img');
    const rgba = s => { const m = s.match(/[\\d.]+/g).map(Number); return [m[0], m[1], m[2], m.length > 3 ? m[3] : 1]; };
    const colours = () => { const line = document.querySelector('p.verdict-line');
        let e = line, back = [255, 255, 255, 1];
        for (; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor); if (c[3] > 0) { back = c; break; } }
        return [rgba(getComputedStyle(line).color), back]; };
    const light = colours();
    document.documentElement.dataset.theme = 'dark';
    const dark = colours();
    document.documentElement.dataset.theme = 'light';
    return {words: words, collapsed: !!first, figure: figure ? figure.getBoundingClientRect().top + window.scrollY : null,
            light: light, dark: dark};"""


def contrast(fore, back):
    """The WCAG contrast ratio of two sRGB colours."""
    def lum(c):
        c = [x / 255 for x in c[:3]]
        c = [x / 12.92 if x <= 0.04045 else ((x + 0.055) / 1.055) ** 2.4 for x in c]
        return 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
    a, b = sorted([lum(fore), lum(back)], reverse=True)
    return (a + 0.05) / (b + 0.05)


@look(1400)
def read(browser):
    return {**browser.execute_script(READER), "errors": [
        e["message"][:200] for e in browser.get_log("browser") if e["level"] == "SEVERE"]}


@pytest.fixture(scope="module")
def reader(looks):
    """Each claim page at 1400 px as it opens: the visible words before the first collapsed part, the first figure's
    top, the verdict line's colours in the light and the dark theme, and the console's errors."""
    return looks["read", 1400]


def test_a_claim_page_opens_with_at_most_1500_words_before_its_collapsed_parts(reader):
    assert all(m["collapsed"] for m in reader.values())
    assert not {c: m["words"] for c, m in reader.items() if m["words"] > 1500}


def test_a_claim_pages_first_figure_is_within_its_first_two_screens(reader):
    assert not {c: m["figure"] for c, m in reader.items() if m["figure"] is not None and m["figure"] > 1800}


def test_no_claim_page_logs_an_error_in_the_console(reader):
    assert not {c: m["errors"] for c, m in reader.items() if m["errors"]}


def test_the_verdict_line_reads_in_the_light_and_the_dark_theme(reader):
    low = {(c, theme): round(contrast(*m[theme]), 2) for c, m in reader.items() for theme in ("light", "dark")
           if contrast(*m[theme]) < 4.5}
    assert not low


def test_the_built_site_and_its_notebooks_carry_no_workshop(built):
    """No local path, review, issue number, session, round, uncommitted commit, lent machine, paper cited by the
    number of its text file, line number of it, or IPython error in any page's text or published .ipynb; no Thebe."""
    from .test_public import WORKSHOP
    found = {}
    for path in published(built):
        body = path.read_text(errors="ignore")
        if path.suffix == ".html":
            assert "sphinx-thebe.js" not in body, path.name
            body = html_text(body)
        if hits := [m[0] for m in WORKSHOP.finditer(body)]:
            found[path.name] = hits[:5]
    assert not found


def html_text(body):
    """An HTML page's text, as near as a regular expression gets: no scripts, styles or tags, entities read."""
    import html
    body = re.sub(r"(?s)<(script|style)\b.*?</\1>", " ", body)
    return html.unescape(re.sub(r"<[^>]+>", " ", body))
