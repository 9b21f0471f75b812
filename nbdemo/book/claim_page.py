"""Each claim's page: its notebook with the box that opens it (the outcome over seeds, fresh seeds, control,
evidence per row, thresholds inside metrics, the verdict's history), the verdict as a table, how to rerun it, and
its provenance; `nbdemo.book.staging` puts them into the notebook. The evidence comes whole from
`nbdemo.runs.evidence.assess`; this module only formats it."""
import html
import re

import nbformat

from nbdemo.book import why
from nbdemo.book.markup import badge, readable, slug, table, text
from nbdemo.book.pages import (STALE, control_badge, fresh_differs, is_stale, seed0_differs, setting_text, stale_run,
                               urls)
from nbdemo.claims.verdict import describe
from nbdemo.runs import params
from nbdemo.runs.evidence import brief, seeds_text


def _spread(x):
    if not x:
        return ""
    worst = f" (the worst of its {x['k']} values per seed)" if x["k"] > 1 else ""
    if x["n"] == 1:
        return f"{x['mean']:.3g}{worst}"
    return f"{x['mean']:.3g} ({x['min']:.3g} to {x['max']:.3g}, n = {x['n']}){worst}"


def _threshold(row):
    """A row's comparison and threshold, with its source: the paper's section, equation or figure, or ours and why."""
    src = row.get("source")  # rows stored before sources were recorded have none
    if not src:
        return row["expected"]
    where = paper_figure(src["where"]) if src["from"] == "paper" else f"ours: {src['why']}"
    return f"{row['expected']} ({where})"


def paper_figure(where):
    """A source in the paper as the reader should read it: "the paper's Fig. 3" (the book numbers its own figures
    "Figure PFC-1.2")."""
    return re.sub(r"(?<!paper's )\b(Figs?\.|Figures?\b|Tables?\b)", r"the paper's \1", where, count=1)


def _counted(runs, name):
    """A row whose statistic is a yes or no (a comparison by ==, or a boolean), over seeds: "finite in 5 of 5",
    "yes in 4 of 5; no in 1"; None for a row with a graded statistic."""
    rows = [r for rec in runs.values() for r in rec["rows"] if r["name"] == name]
    if not rows or not all(r.get("op") == "==" or isinstance(r.get("value"), bool) for r in rows):
        return None
    said = {}
    for r in rows:
        shown = {True: "yes", False: "no"}.get(r["value"], readable(r["measured"])) \
            if isinstance(r["value"], bool) else readable(r["measured"])
        said[shown] = said.get(shown, 0) + 1
    (first, k), *rest = sorted(said.items(), key=lambda x: -x[1])
    return f"{first} in {k} of {len(rows)}" + "".join(f"; {x} in {m}" for x, m in rest)


EVIDENCE = ["Kind", "Row", "Holds in", "Over seeds", "Threshold (source)", "Holds in control", "In control",
            "Headline flips at"]


def _flip(f):
    if f is None:
        return "no flip"
    return f"{f['at']:.3g} → {f['headline']}" + (" (sensitive)" if f["sensitive"] else "")


def evidence_table(s):
    """Per row: how often it holds over the seeds, its statistic over seeds (mean, min to max), its threshold and
    source, the same in the control (or why the control does not test it), and where a threshold of ours would flip
    the headline."""
    ctrl = s["control"]["rows"] if s["control"] else {}
    cruns = s["control"]["runs"] if s["control"] else {}
    rows = []
    for row, spread, cspread in s["effects"] or []:
        key, name = (row["kind"], row["name"]), row["name"]
        k, n = s["rows"].get(key, ("", ""))
        ck = ctrl.get(key)
        in_ctrl = f"untested: {s['untested'][name]}" if name in s["untested"] else \
            f"{ck[0]} of {ck[1]}" + (" (uninformative)" if name in s["uninformative"] else "") if ck else ""
        at = _flip(s["flips"][name]) if name in s["flips"] else ""
        rows.append([text(x) for x in (row["kind"], name, f"{k} of {n}" if n else "",
                                       _counted(s["runs"], name) or _spread(spread), _threshold(row), in_ctrl,
                                       _counted(cruns, name) or _spread(cspread), at)])
    return table(EVIDENCE, rows, "evidence")


def per_seed(runs, title):
    """Every row's value in each seed, as a table that opens (<details>)."""
    seeds = sorted(runs)
    names = list(dict.fromkeys(r["name"] for s in seeds for r in runs[s]["rows"]))
    value = {(s, r["name"]): readable(r["measured"]) + ("" if r["ok"] is not False else " ✗")
             for s in seeds for r in runs[s]["rows"]}
    rows = [[text(n)] + [html.escape(value.get((s, n), "")) for s in seeds] for n in names]
    return (f'<details class="per-seed"><summary>{title}</summary>'
            + table(["Row"] + [f"seed {s}" for s in seeds], rows, "per-seed") + "</details>")


def inner_text(s):
    """The thresholds of ours inside the metrics, each with the headline when it is moved by ±10%, or declared and
    not varied."""
    if not s["inner"]:
        return ""
    said = [f"{text(key)}: {badge(v['lower'])} at −10%, {badge(v['higher'])} at +10%"
            + (" (**sensitive**)" if v["sensitive"] else "") if v else f"{text(key)}: declared, not varied"
            for key, v in s["inner"].items()]
    return "**Thresholds of ours inside the metrics**, with the headline when each is moved:\n\n" + \
        "\n".join(f"- {x}" for x in said)


HISTORY = ["When", "Commit", "Headline", "What changed"]


def history_table(h):
    """The verdict's history as a short table: each state its store has held (with its headline and what changed
    since the one before) and each declared revision, the revisions after results marked."""
    rows = []
    for e in h["items"]:
        mark = ""
        if e["revised"]:
            mark = " <strong>revised after results</strong>" + ("" if e.get("revision") or e["declared"] else
                                                                " (not declared)")
        if e.get("revision"):
            rows.append([text(e["date"]), e["commit"] or "not recorded yet", "declared revision",
                         f"{text(e['kind'])}: {text(e['what'])} (why: {text(e['why'])}){mark}"])
        else:
            said = "; ".join(brief(e["changes"])) or "first stored"
            rows.append([e["at"][:10], e["commit"] or f"{e['code'] or ''} (not committed)",
                         f"{badge(e['headline'])} {e['k']} of {e['n']}", text(said) + mark])
    return table(HISTORY, rows, "history")


def fresh_text(s):
    """Which seeds were first run after the claim's last revision after results, and their own tally."""
    h = s["history"]
    if not h:
        return ""
    fresh, since = h["fresh"], h["fresh"]["since"]
    if since is None:
        return ("**Fresh seeds:** the claim has no revision after results: every seed was run after its checks and "
                "setting were fixed.")
    when = f"the claim's last revision after results ({since[:10]})"
    if not fresh["seeds"]:
        return f"**Fresh seeds:** none yet. No seed has been run for the first time since {when}."
    differs = fresh_differs(s)
    return (f"**Fresh seeds:** seeds {seeds_text(fresh['seeds'])} were first run after {when}: {fresh['k']} of "
            f"{fresh['n']} reproduce, {badge(fresh['headline'])} by the same rule"
            + (f", **which is not the headline over all seeds** ({badge(s['headline'])})." if differs else "."))


VERDICT = ["Result", "Kind", "Row", "Measured", "Threshold (source)"]
MARKS = {True: "PASS", False: "FAIL", None: "–"}


def verdict_cell(meta):
    """The verdict of the run on the page as a table that wraps. The notebook prints it as monospace text (what
    nbval compares), which the book keeps behind a toggle."""
    v = meta["verdict"]
    rows = [[f'<span class="outcome {slug(MARKS[r["ok"]]) if r["ok"] is not None else "note"}">{MARKS[r["ok"]]}</span>',
             text(r["kind"]), text(r["name"]), text(r["measured"]), text(_threshold(r))] for r in v["rows"]]
    head = (f"**Verdict of the run on this page** (seed {meta['parameters'].get('seed')}, profile "
            f"`{meta['profile']}`): {badge(v['outcome'])} {describe(v['rows']).removeprefix(v['outcome'])}")
    return nbformat.v4.new_markdown_cell(head + "\n\n" + table(VERDICT, rows, "verdict"),
                                         metadata={"tags": ["verdict-table"]})


def control_text(s):
    decl = s["declared"]
    if decl is None:
        return "**Negative control:** none declared yet."
    if decl["profile"] is None:
        return f"**Negative control:** none. {readable(decl['about'])}"
    c = s["control"]
    runs = (f"Over {c['n']} seeds the control is {control_badge(c['headline'])}, {c['k']} of {c['n']} reproduce."
            if c else "The control has not been run yet (`nbdemo sweep CLAIM --profile control --seeds 0-4`).")
    untested = (f" Checks the control does not test (no evidence either way): {'; '.join(s['untested'])}."
                if s["untested"] else "")
    useless = (f" Checks that hold in the control too, and so are no evidence: {'; '.join(s['uninformative'])}."
               if s["uninformative"] else "")
    return f"**Negative control** (profile `control`): {readable(decl['about'])} {runs}{untested}{useless}"


def stale_text(s):
    if not is_stale(s):
        return ""
    ctrl = f", control seeds {seeds_text(s['stale_control'])}" if s["stale_control"] else ""
    seeds = f"seeds {seeds_text(s['stale'])}" if s["stale"] else ""
    return (f"**Stale: this is the last stored headline, not a current one.** The code or parameters of "
            f"{', '.join(filter(None, [seeds, ctrl.lstrip(', ')]))} changed since they were run; "
            "`nbdemo sweep CLAIM --seeds 0-9` (and `--profile control --seeds 0-4`) makes them current.")


def seeds_box(claim, s, others, meta, stored=""):
    """The box that opens a claim page: the outcome over seeds with its interval, whether it is stale, the fresh
    seeds, the outcome per seed, the control, the evidence per row and per seed, the link to the stored results
    (stored: markdown), the thresholds inside metrics, the history, the setting it comes from, and which seed the
    page shows (and whether it is the headline)."""
    if not s:
        body = "No sweep over seeds is stored for this claim yet (`nbdemo sweep CLAIM --seeds 0-4`)."
    else:
        judged = (f" The seeds alone give {badge(s['over_seeds'])}; judged against the control, "
                  f"{badge(s['headline'])}." if s["over_seeds"] != s["headline"] else "")
        seeds = table(["Seed", "Outcome", "Wall time"], [
            [seed, badge(o) + ("" if o == (own := s["runs"][seed]["outcome"]) else f" (its rows alone: {own})"),
             f"{s['runs'][seed]['wall_s']:.0f} s"] for seed, o in s["outcomes"].items()], "seeds")
        parts = [f"**Over {s['n']} seeds: {badge(s['headline'])}**, {s['k']} of {s['n']} reproduce (95% interval of "
                 f"the share {s['low']:.2f} to {s['high']:.2f}).{judged}",
                 stale_text(s), fresh_text(s), seeds, control_text(s), evidence_table(s),
                 per_seed(s["runs"], f"Each row's value in each of the {s['n']} seeds (✗: fails)")
                 + (per_seed(s["control"]["runs"], "... and in each seed of the control") if s["control"] else ""),
                 stored, inner_text(s),
                 f"**The verdict's history** ({s['history']['revised']} revisions after results):\n\n"
                 + history_table(s["history"]) if s["history"] and s["history"]["items"] else "",
                 "The headline follows {ref}`the book's rule <rule>`."]
        body = "\n\n".join(p for p in parts if p)
    if meta["verdict"]:
        body += (f"\n\nThe run on this page is seed {meta['parameters'].get('seed')} of the `{meta['profile']}` "
                 f"profile: {badge(meta['verdict']['outcome'])}.")
        if seed0_differs(s, meta):
            body += (f" **It is not the headline over seeds** ({badge(s['headline'])}): this page's figures and "
                     "verdict are one seed's.")
    body += f"\n\n{setting_text(claim)}"
    if others:
        body += "\n\nOther profiles: " + ", ".join(
            f"{{doc}}`{p} <{doc}>` ({badge(m['verdict']['outcome']) if m['verdict'] else 'no verdict'}, "
            f"{(m['provenance'] or {}).get('gpu') or (m['provenance'] or {}).get('device')}, {m['wall_s']:.0f} s)"
            for p, doc, m in others)
    colour = "stale" if s and is_stale(s) else slug(s["headline"]) if s else "none"
    return nbformat.v4.new_markdown_cell(f"```{{admonition}} Outcome over seeds\n:class: seeds box-{colour}\n{body}\n```")


def rerun_box(claim):
    """How to rerun the claim: its one command, in the default profile and the paper's, and its notebook."""
    paper = "paper" in params.profiles(claim)
    lines = ["# the default profile: a 2-core CPU, about a minute", f"nbdemo run {claim.id}",
             *(["# the paper's settings, for a GPU", f"nbdemo run {claim.id} --profile paper"] if paper else []),
             "# the outcome over seeds", f"nbdemo sweep {claim.id} --seeds 0-4"]
    repo = urls()["Repository"]
    notebook = f"[{claim.id}.ipynb]({repo}/blob/main/notebooks/{claim.id}.ipynb)" if repo else \
        f"`notebooks/{claim.id}.ipynb`"
    body = ("```bash\n" + "\n".join(lines) + "\n```\n\n"
            f"From a clone of the repository, after `make setup`, with `.venv/bin` on the PATH (README). The notebook: "
            f"{notebook} in the repository, or this page's download button (.ipynb).")
    return nbformat.v4.new_markdown_cell("````{admonition} Rerun this claim\n:class: rerun\n" + body + "\n````")


def verdict_line(claim, s, meta, finding=None):
    """The line that opens a claim page, under its title: the headline over seeds, or the page's own run's outcome
    where there is no sweep (either STALE and the last stored where it is not current), and why, in one line
    (`why.reason`)."""
    if s:
        head = f"{badge(s['headline'])} over {s['n']} seeds, {s['k']} of {s['n']} reproduce"
        head = STALE + head if is_stale(s) else head
    elif meta and meta["verdict"]:
        head = f"{badge(meta['verdict']['outcome'])} in seed 0 alone (no sweep over seeds yet)"
        head = STALE + head if stale_run(claim, meta) else head
    else:
        head = "not run yet"
    if differs := seed0_differs(s, meta):
        head += f' <span class="differs">(the run on this page: {differs})</span>'
    line = f'<p class="verdict-line">{head}. Why: {why.cell(*why.reason(s, meta, finding))}</p>'
    return nbformat.v4.new_markdown_cell(line, metadata={"tags": ["verdict-line"]})
