"""The book, built with warnings as errors and read back in headless Chromium.

The book is built from the committed notebooks that carry `metadata.nbdemo` (written by `nbdemo run --commit`), as
they are. Their fingerprints go stale whenever anything in nbdemo/ changes, and re-running them (about a minute
each) is the job of `nbdemo book`, not of a test, so the test hands `book.build` these notebooks itself and nothing
is executed; committed notebooks without that metadata are left out of the book, and show as "not reproduced yet".
Sources and HTML go to a temporary folder (runner.BUILD is patched), so `make book` and book/_build are untouched.
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
COLOURS = {R: "rgb(26, 127, 55)", N: "rgb(207, 34, 46)", rules.MIXED: "rgb(191, 135, 0)", I: "rgb(110, 119, 129)",
           "STALE": "rgb(87, 96, 106)"}
CONTROL_COLOURS = {N: COLOURS[R], R: COLOURS[N], rules.MIXED: COLOURS[rules.MIXED], I: COLOURS[I]}  # failing is good


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
    return webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chromium(tmp_path_factory)
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
    assert {html / "claims" / f"{c.id}.html" for c in built[1]} <= set(pages)


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
        assert len(pages[html / "claims" / f"{claim.id}.html"][2]) >= figures, claim.id


def test_every_plot_is_a_numbered_figure_with_a_caption(built, browser):
    """A plot on a claim page is a figure with its number and caption (the `mystnb.figure` metadata of the cell that
    draws it), so that the prose can refer to it and a reader knows what it shows."""
    html, bare = built[0].parent, {}
    for claim in built[1]:
        visit(browser, (html / "claims" / f"{claim.id}.html").as_uri())
        if n := browser.execute_script("""return [...document.querySelectorAll('.cell_output img')].filter(i => {
                const caption = i.closest('figure')?.querySelector('figcaption');
                return !(caption?.querySelector('.caption-number') && caption.innerText.trim().length > 40);}).length;"""):
            bare[claim.id] = n
    assert not bare


def test_dashboard_shows_outcomes_over_seeds_in_colour(built, browser):
    index, done, swept = built
    visit(browser, index.as_uri())
    rows = browser.execute_script("""
        return [...document.querySelectorAll('table.dashboard tbody tr')].map(tr =>
            [[...tr.cells].map(td => td.innerText.trim()), tr.cells[0].querySelector('a')?.href ?? null,
             [...tr.querySelectorAll('.outcome')].map(e => getComputedStyle(e).borderColor.includes('87, 96, 106')
                 ? 'rgb(87, 96, 106)' : getComputedStyle(e).backgroundColor),
             [...tr.querySelectorAll('.outcome.control')].map(e => getComputedStyle(e).backgroundColor)]);""")
    by_claim = {cells[0]: ([plain(c) for c in cells], href, colours + [control])
                for cells, href, colours, control in rows}
    assert list(by_claim) == list(CLAIMS)
    found = generated.findings_by_claim(done)
    for id_, (cells, href, colours) in by_claim.items():
        claim = CLAIMS[id_]
        cell = dict(zip(generated.DASHBOARD, cells))
        if claim in done:
            page = done[claim][1]["verdict"]["outcome"]
            differs = claim in swept and page != swept[claim][0]  # the seed-0 page is not the headline: said so
            stale = claim_page.stale_run(claim, done[claim][1])  # today's code would not make it: STALE
            assert cell["Seed 0"] == "STALE last stored: " * stale + page + " not the headline" * differs, id_
            assert COLOURS[page] in colours[:-1], id_
            assert href and local_path(href) == index.parent / "claims" / f"{id_}.html", id_
        else:
            assert cell["Seed 0"] == "not reproduced yet" and href is None, id_
        assert cell["Setting"] == generated.setting_word(claim), id_
        if claim in swept:
            headline, k, stale = swept[claim]
            marks = ["untested check"] * (claim == list(swept)[2]) + ["uninformative check"] * (headline == I)
            shown = headline + (f" ({', '.join(marks)})" if marks else "")
            if claim in found:  # a finding is shown beside the headline, REPRODUCED or not
                shown += f" + {why.FINDING_LABELS[found[claim][0]]}"
            assert cell["Over seeds"] == (f"STALE last stored: {shown}" if stale else shown), id_
            assert colours[0] == COLOURS["STALE" if stale else headline], id_
            low, high = rules.wilson(k, 5)
            assert cell["Reproduced"] == f"{k} of 5 seeds (95% interval {low:.2f} to {high:.2f})", id_
            control = CONTROLS[list(swept).index(claim)]
            if control:
                said = generated.CONTROL_SAYS[rules.headline(control)][1]
                assert cell["Control"] == f"{rules.headline(control)} ({said})", id_
                assert colours[-1] == [CONTROL_COLOURS[rules.headline(control)]], id_  # green when it fails
            else:
                assert cell["Control"] == "not run yet", id_
            assert cell["Revised"] == ("1 (1 declared)" if claim == list(swept)[0] else "none"), id_
        else:
            assert cell["Over seeds"] == "no sweep yet" and cell["Reproduced"] == "", id_
        # why, in one line, with its kind: the finding's first sentence, else what the evidence says
        if claim in found:
            kind, finding = found[claim]
            assert cell["Why"] == plain(f"{why.FINDING_LABELS[kind]} {why.lead(finding.source)}"), id_
        elif claim == list(swept)[0]:
            assert cell["Why"] == 'holds in the control too "claim"', id_
        elif claim in done and claim not in swept:
            assert cell["Why"].startswith(("every check holds in the run", "requirement unmet", "check fails")), id_
        else:
            assert cell["Why"] == "not run no stored run", id_
    assert "the notebook states a finding" in plain(browser.find_element("tag name", "main").text)
    text = plain(browser.find_element("tag name", "main").text)
    assert "REPRODUCED when the interval's lower bound is at least 0.5 (5 of 5, 9 of 10)" in text  # rules.RULE
    assert "is *untested by its control*" not in text and "is untested by its control" in text  # rendered
    assert "is uninformative" in text
    for prefix in PAPERS:
        assert f"{prefix} {sum(c.startswith(prefix + '-') for c in CLAIMS)}" in text  # the summary's scope


def test_claim_pages_open_with_the_outcome_over_seeds(built, browser):
    index, done, swept = built
    for claim, (headline, k, stale) in swept.items():
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        box = browser.find_element("css selector", ".admonition.seeds")
        box_text = plain(box.text)
        low, high = rules.wilson(k, 5)
        assert f"Over 5 seeds: {headline}, {k} of 5 reproduce (95% interval of the share {low:.2f} to {high:.2f})" \
            in box_text, claim.id
        tables = box.find_elements("css selector", "table")
        per_seed = tables[0].find_elements("css selector", "tbody tr")
        assert [r.text.split()[0] for r in per_seed] == ["0", "1", "2", "3", "4"], claim.id
        per_row = {cells[1]: cells for cells in ([td.text for td in r.find_elements("css selector", "td")] for r in
                   tables[1].find_elements("css selector", "tbody tr"))}
        assert per_row["fit"][2] == f"{5 - SWEEPS[list(swept).index(claim)][0].count(I)} of 5", claim.id
        assert per_row["claim"][4] == ">= 0.5 (ours: synthetic)", claim.id
        if headline == I:  # the check holds in 3 of 5 control seeds; raising its threshold past 1 fails every seed
            assert per_row["claim"][5] == "3 of 5 (uninformative)" and per_row["claim"][7] == "1 → NOT REPRODUCED"
            assert "The seeds alone give MIXED" in box_text and "a synthetic control" in box_text  # 4 of 5
            assert "INCONCLUSIVE (its rows alone: REPRODUCED)" in per_seed[0].text
        if claim == list(swept)[2]:  # a control declared and not run tests nothing
            assert per_row["claim"][5] == "untested: the control has not been run", claim.id
        assert ("Stale: this is the last stored headline, not a current one" in box_text) == bool(stale), claim.id
        departs = generated.departures(claim)
        assert ("Setting: a substitute" in box_text) == bool(departs), claim.id
        assert all(d.split()[0] in box_text for d in departs or []), claim.id
        page = done[claim][1]["verdict"]["outcome"]  # the seed-0 page that is not the headline says so
        assert ("It is not the headline over seeds" in box_text) == (page != headline), claim.id
        # each row's value in each seed, in a table that opens, and the stored results to download
        details = box.find_element("css selector", "details.per-seed")
        assert not details.get_attribute("open")
        details.find_element("tag name", "summary").click()
        cells = [[td.text for td in tr.find_elements("tag name", "td")]
                 for tr in details.find_elements("css selector", "tbody tr")]
        assert [c[0] for c in cells] == ["fit", "claim"], claim.id
        outcomes = SWEEPS[list(swept).index(claim)][0]
        assert cells[1][1:] == [("1" if o == R else "0 ✗") for o in outcomes], claim.id
        link = box.find_element("partial link text", f"{claim.id}.json").get_attribute("href")
        stored = json.loads(local_path(link).read_text())
        assert stored["claim"] == claim.id and len(stored["runs"]) == 5, claim.id
    others = [c for c in done if c not in swept]
    if others:
        visit(browser, (index.parent / "claims" / f"{others[0].id}.html").as_uri())
        assert "No sweep over seeds is stored" in browser.find_element("css selector", ".admonition.seeds").text


def test_claim_pages_show_the_verdicts_history_and_the_fresh_seeds(built, browser):
    """The history as a short table (states with their headline and what changed, declared revisions), revisions
    after results marked, no line number of the paper's text copy; which seeds are fresh."""
    index, _, swept = built
    first, second = list(swept)[:2]
    visit(browser, (index.parent / "claims" / f"{first.id}.html").as_uri())
    box = browser.find_element("css selector", ".admonition.seeds")
    rows = [[td.text for td in tr.find_elements("css selector", "td")]
            for tr in box.find_element("css selector", "table.history").find_elements("css selector", "tbody tr")]
    assert [r[:2] for r in rows] == [["2026-11-20", "aaaaaaa"], ["2026-11-21", "ccccccc"], ["2026-11-22", "bbbbbbb"]]
    assert rows[0][3] == "first stored" and rows[1][2] == "declared revision"
    assert rows[1][3] == "threshold: the check's threshold 0.5 (why: Fig. 3) revised after results"
    assert rows[2][3] == "threshold of a check (1) revised after results" and rows[2][2] == "INCONCLUSIVE 0 of 5"
    assert "The verdict's history (1 revisions after results)" in plain(box.text)
    assert "Fresh seeds: none yet. No seed has been run for the first time since the claim's last revision after " \
           "results (2026-11-22)." in plain(box.text)
    visit(browser, (index.parent / "claims" / f"{second.id}.html").as_uri())
    box = browser.find_element("css selector", ".admonition.seeds")
    assert "Fresh seeds: the claim has no revision after results" in plain(box.text) and not box.find_elements(
        "css selector", "table.history")


def test_a_stale_claim_is_never_shown_as_current(built, browser):
    """A claim whose stored runs are stale shows STALE and its last stored headline, on the dashboard, its chapter
    and its page (a landing may come before the final sweep)."""
    index, _, swept = built
    claim = next(c for c, (_, _, stale) in swept.items() if stale)
    visit(browser, index.as_uri())
    row = next(tr for tr in browser.find_elements("css selector", "table.dashboard tbody tr")
               if tr.find_element("tag name", "td").text == claim.id)
    assert row.find_elements("tag name", "td")[1].text.startswith("STALE last stored: ")
    visit(browser, (index.parent / f"{claim.paper.lower()}.html").as_uri())
    row = next(tr for tr in browser.find_elements("css selector", "table.chapter tbody tr")
               if tr.find_element("tag name", "td").text == claim.id)
    assert row.find_elements("tag name", "td")[1].text.startswith("STALE last stored: ")
    visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
    box = browser.find_element("css selector", ".admonition.seeds")
    assert "box-stale" in box.get_attribute("class") and "Stale: this is the last stored headline" in box.text


@pytest.mark.parametrize("other", OTHERS, ids=lambda o: o[1])
def test_results_of_other_profiles_are_shown_beside_the_default(built, browser, other):
    index, done, _ = built
    claim, run, gpu = other
    if claim not in done:
        pytest.skip(f"{claim.id} has no committed notebook")
    visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
    box = browser.find_element("css selector", ".admonition.seeds")
    link = box.find_element("link text", run)
    page = f"{claim.id}-{run.replace('=', '-')}.html"
    assert gpu in box.text and local_path(link.get_attribute("href")).name == page
    visit(browser, link.get_attribute("href"))
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
    text = browser.find_element("tag name", "main").text
    tagged = [c for c, (path, _) in done.items() if any("finding" in cell.metadata.get("tags", [])
                                                       for cell in nbformat.read(path, as_version=4).cells)]
    for claim in tagged:
        assert f"{claim.id}: {claim.title}" in text, claim.id
    for claim, (headline, k, _) in swept.items():
        assert (f"{claim.id} {claim.title}: {headline}, {k} of 5 seeds reproduce" in text) == (headline != R)


def test_claim_pages_state_their_provenance(built, browser):
    index, done, _ = built
    for claim, (_, meta) in done.items():
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        boxes = [e.text for e in browser.find_elements("css selector", ".admonition") if "Provenance" in e.text]
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
    width, scroll, bad = browser.execute_script(OUTSIDE, selector)
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


def test_claim_pages_show_outcome_and_measured_values_without_scrolling_sideways(built, browser, width):
    index, done, _ = built
    for claim, (_, meta) in done.items():
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        assert not outside(browser, ".admonition.seeds .outcome, table.nbdemo td"), (claim.id, width)
        table = browser.find_element("css selector", "table.verdict")
        rows = [[td.text for td in tr.find_elements("css selector", "td")]
                for tr in table.find_elements("css selector", "tbody tr")]
        assert [(r[0], r[2], r[3]) for r in rows] == [
            (claim_page.MARKS[r["ok"]], markup.readable(r["name"]), markup.readable(r["measured"])) for r in meta["verdict"]["rows"]]
        # the printed text table (what nbval compares) is kept, behind a toggle
        assert not browser.find_element("css selector", ".tag_nbval-check-output .cell_output").is_displayed()


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


def test_no_page_refers_to_lines_of_the_papers_text_copies(browser, pages):
    """"l.278" points at a line of the project's private text copy of a paper, which no reader has (code may keep
    them in comments, and the printed verdict of a cell keeps them)."""
    found = {}
    for page in pages:
        visit(browser, page.as_uri())
        if refs := re.findall(r".{20}\bl\.\s?\d+.{0,10}", browser.execute_script(PROSE)):
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


def test_claim_pages_say_how_to_rerun_them(built, browser):
    index, done, _ = built
    for claim in done:
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        box = browser.find_element("css selector", ".admonition.rerun").text
        assert f"nbdemo run {claim.id}\n" in box and f"nbdemo sweep {claim.id} --seeds 0-4" in box, claim.id
        assert (f"nbdemo run {claim.id} --profile paper" in box) == ("paper" in params.profiles(claim)), claim.id
        # no repository address was given to this build: the notebook is named, not linked to an invented address
        assert f"notebooks/{claim.id}.ipynb in the repository" in box, claim.id
        assert not browser.find_elements("css selector", ".admonition.rerun a[href^=http]"), claim.id


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
    headlines = [h for h, _, _ in swept.values()]
    for h in set(headlines):
        assert f"{headlines.count(h)} {h}" in text, h
    assert f"{len(CLAIMS) - len(swept)} without a sweep yet" in text
    for prefix in PAPERS:
        visit(browser, (index.parent / f"{prefix.lower()}.html").as_uri())
        rows = browser.find_elements("css selector", "table.chapter tbody tr")
        assert [r.find_element("tag name", "td").text for r in rows] == [c for c in CLAIMS if c.startswith(prefix + "-")]
    for claim, (headline, _, _) in swept.items():  # the outcome box is coloured by the headline over seeds
        visit(browser, (index.parent / "claims" / f"{claim.id}.html").as_uri())
        colour = browser.execute_script(
            "return getComputedStyle(document.querySelector('.admonition.seeds')).borderLeftColor")
        assert colour == COLOURS["STALE" if swept[claim][2] else headline], claim.id


def claim_pages(built):
    index, done, _ = built
    return [(claim, index.parent / "claims" / f"{claim.id}.html") for claim in done]


def test_each_claim_page_opens_with_its_verdict_and_why_within_the_first_screen_of_a_phone(built, browser):
    """Under the title, one line: the headline over seeds (STALE and the last stored where it is not current), or
    seed 0's outcome where there is no sweep, and why; its bottom within the first 800 px at 420 px."""
    _, done, swept = built
    browser.set_window_size(420, 900)
    try:
        for claim, page in claim_pages(built):
            visit(browser, page.as_uri())
            line = browser.find_element("css selector", "p.verdict-line")
            bottom = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return r.bottom + "
                                            "window.scrollY", line)
            assert bottom <= 800, (claim.id, bottom)
            text = plain(line.text)
            if claim in swept:
                headline, k, stale = swept[claim]
                said = f"{headline} over 5 seeds, {k} of 5 reproduce"
                assert text.startswith(f"STALE last stored: {said}" if stale else said), (claim.id, text)
            else:  # the seed-0 run alone, STALE where today's code would not make it
                said = f"{done[claim][1]['verdict']['outcome']} in seed 0 alone"
                stale = claim_page.stale_run(claim, done[claim][1])
                assert text.startswith(f"STALE last stored: {said}" if stale else said), (claim.id, text)
            assert "Why: " in text and len(text.split("Why: ")[1]) > 10, (claim.id, text)
    finally:
        browser.set_window_size(1400, 900)


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


def test_display_maths_scrolls_and_is_never_clipped_on_a_phone(built, browser):
    """At 420 px every display equation fits its column or scrolls inside its own box, once MathJax has typeset it
    (MathJax served by the book, as `make system` installs it)."""
    if not (book.MATHJAX / "MathJax.js").exists():
        pytest.skip("needs Debian's libjs-mathjax (`make system` as root installs it)")
    browser.set_window_size(420, 900)
    count = "return [document.querySelectorAll('.math').length, document.querySelectorAll('.math:has(.MathJax_CHTML)').length]"
    bad, displays = {}, 0
    try:
        for claim, page in claim_pages(built):
            visit(browser, page.as_uri())
            WebDriverWait(browser, 30).until(lambda b: (n := b.execute_script(count))[0] == n[1])
            displays += browser.execute_script("return document.querySelectorAll('div.math').length")
            if found := browser.execute_script(MATHS):
                bad[claim.id] = found
    finally:
        browser.set_window_size(1400, 900)
    assert displays and not bad


def test_figures_are_numbered_per_claim_link_to_their_full_size_and_carry_their_caption(built, browser):
    """"Figure PFC-1.2": each claim page numbers its own figures; each image is a link to its file at full size, and
    its alt text is its caption."""
    for claim, page in claim_pages(built):
        visit(browser, page.as_uri())
        figures = browser.execute_script("""return [...document.querySelectorAll('.cell_output figure')].filter(f =>
            f.querySelector('img')).map(f => {const img = f.querySelector('img');
            return [f.querySelector('.caption-number')?.innerText.trim(), f.querySelector('.caption-text')?.innerText,
                    img.alt, img.closest('a')?.href, img.src];});""")
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


def test_figures_stay_legible_on_a_phone(built, browser):
    """At 420 px a figure is shown at least at the scale at which its tick labels (matplotlib's 10 pt at the PNG's
    dpi) are 9 px high, scrolling sideways in its own box where it is wider than the column; the page itself does
    not scroll sideways."""
    browser.set_window_size(420, 900)
    small = {}
    try:
        for claim, page in claim_pages(built):
            visit(browser, page.as_uri())
            images = browser.execute_script("""return [...document.querySelectorAll('.cell_output figure img')].map(i =>
                [i.src, i.getBoundingClientRect().width, i.naturalWidth]);""")
            for src, shown, natural in images:
                tick = 10 * png_dpi(local_path(src)) / 72 * shown / natural
                if tick < 9:
                    small.setdefault(claim.id, []).append(round(tick, 1))
            assert browser.execute_script("return document.documentElement.scrollWidth <= "
                                          "document.documentElement.clientWidth"), claim.id
    finally:
        browser.set_window_size(1400, 900)
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


def test_nothing_private_in_the_built_site_or_its_notebooks(built, browser):
    """No line number of the papers' private text copies ("l.45") in the text of any page, code and outputs
    included, nor in a published .ipynb; no absolute path of the machine that built or ran it in either."""
    found = {}
    for path in published(built):
        body = path.read_text(errors="ignore")
        if path.suffix == ".html":
            visit(browser, path.as_uri())
            body = browser.find_element("tag name", "body").get_attribute("textContent") + "".join(
                browser.execute_script("return [...document.querySelectorAll('[href], [src]')].map(e => "
                                       "e.getAttribute('href') || e.getAttribute('src'))"))
        if hits := [m[0] for p in PRIVATE for m in p.finditer(body)]:
            found[path.name] = hits[:5]
    assert not found
    assert any(p.suffix == ".ipynb" for p in published(built))
    nb = nbformat.read(next(p for p in published(built) if p.suffix == ".ipynb"), as_version=4)
    assert "input_path" not in nb.metadata.get("papermill", {})


def test_tags_are_explained_where_they_appear(built, browser):
    """Every tag after a headline (dashboard, chapters) carries its meaning on hover and in the legend under the
    table; a finding beside a REPRODUCED headline is shown with it."""
    index, _, swept = built
    pages = [index] + [index.parent / f"{p.lower()}.html" for p in PAPERS]
    seen = set()
    for page in pages:
        visit(browser, page.as_uri())
        text = plain(browser.find_element("tag name", "main").text)
        for tag, title in browser.execute_script(
                "return [...document.querySelectorAll('abbr.tag')].map(a => [a.innerText, a.title])"):
            name = next(n for n in why.TAGS if plain(why.TAGS[n]) == plain(title))
            assert f"{name}: {plain(title)}" in text, (page.name, tag)
            seen.add(name)
    assert {"uninformative check", "untested check", "finding"} <= seen
    reproduced = next(c for c, (h, _, _) in swept.items() if h == R)
    if reproduced not in generated.findings_by_claim(built[1]):
        return
    visit(browser, index.as_uri())
    row = next(tr for tr in browser.find_elements("css selector", "table.dashboard tbody tr")
               if tr.find_element("tag name", "td").text == reproduced.id)
    assert "REPRODUCED + finding" in row.find_elements("tag name", "td")[1].text
