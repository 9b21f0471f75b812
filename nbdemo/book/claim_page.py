"""Each claim's page: its notebook with the box that opens it (the outcome over seeds, fresh seeds, control,
evidence per row, thresholds inside metrics, the verdict's history), the verdict as a table, how to rerun it, and
its provenance; `nbdemo.book.staging` puts them into the notebook. The evidence comes whole from
`nbdemo.runs.evidence.assess`; this module only formats it."""
import html
import re

import nbformat

from nbdemo.book import why
from nbdemo.book.markup import badge, public, readable, slug, table, tally_text, text
from nbdemo.book.pages import (STALE, control_badge, departures, fresh_differs, is_stale, seed0_differs, setting_text,
                               robust_text, run_outcome, stale_run, urls)
from nbdemo.claims.verdict import INCONCLUSIVE, REPRODUCED, describe
from nbdemo.runs import params, rules
from nbdemo.runs.evidence import brief, control, seeds_text


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
    said = [f"{text(key, True)}: {badge(v['lower'])} at −10%, {badge(v['higher'])} at +10%"
            + (" (**sensitive**)" if v["sensitive"] else "") if v else f"{text(key, True)}: declared, not varied"
            for key, v in s["inner"].items()]
    return "**Thresholds of ours inside the metrics**, with the headline when each is moved:\n\n" + \
        "\n".join(f"- {x}" for x in said)


HISTORY = ["When", "Commit", "Headline", "What changed"]


def one_line(what, words=30):
    """A record's text as one line of the page: `public`, its first sentences up to about `words` words."""
    said = public(what)
    cut = " ".join(said.split()[:words])
    return cut + ("…" if len(said.split()) > words else "")


def history_table(h):
    """The verdict's history in a line each: the states of the store where the headline moved (the first
    included), each with what changed since the one before, and every revision after results (declared, or found
    in a state's changes). Every value is escaped (`text`): the history is a file anyone can edit."""
    rows, before = [], None
    for e in h["items"]:
        mark = " <strong>revised after results</strong>" if e["revised"] else ""
        if e.get("revision"):
            if e["revised"]:
                rows.append([text(e["date"]), text(e["commit"] or ""), "declared revision",
                             text(f"{e['kind']}: {one_line(e['what'])}") + mark])
            continue
        moved = e["headline"] != before
        before = e["headline"]
        if moved or e["revised"]:
            said = "; ".join(brief(e["changes"])) or "first stored"
            rows.append([text(str(e["at"])[:10]), text(e["commit"] or ""),
                         f"{badge(e['headline'])} {text(e['k'])} of {text(e['n'])}", text(one_line(said)) + mark])
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
    when = f"the claim's last revision after results ({text(str(since)[:10], True)})"
    if not fresh["seeds"]:
        return f"**Fresh seeds:** none yet. No seed has been run for the first time since {when}."
    differs = fresh_differs(s)
    return (f"**Fresh seeds:** seeds {seeds_text(fresh['seeds'])} were first run after {when}: {fresh['k']} of "
            f"{fresh['n']} reproduce, {badge(fresh['headline'])} by the same rule"
            + (f", **which is not the headline over all seeds** ({badge(s['headline'])})." if differs else "."))


VERDICT = ["Result", "Kind", "Row", "Measured", "Threshold (source)"]
MARKS = {True: "PASS", False: "FAIL", None: "–"}


def verdict_cell(meta, s=None):
    """The verdict of the run on the page as a table that wraps, with the run's one outcome by the rule (its
    control included, `run_outcome`) and why where its rows alone say otherwise. The notebook prints it as monospace
    text (what nbval compares), which the book keeps behind a toggle."""
    v = meta["verdict"]
    rows = [[f'<span class="outcome {slug(MARKS[r["ok"]]) if r["ok"] is not None else "note"}">{MARKS[r["ok"]]}</span>',
             text(r["kind"]), text(r["name"]), text(r["measured"]), text(_threshold(r))] for r in v["rows"]]
    head = (f"**Verdict of the run on this page** (seed {text(meta['parameters'].get('seed'), True)}, profile "
            f"{text(meta['profile'], True)}): {badge(run_outcome(s, meta))}"
            f"{text(describe(v['rows']).removeprefix(v['outcome']), True)}{rows_alone(s, meta)}")
    return nbformat.v4.new_markdown_cell(head + "\n\n" + table(VERDICT, rows, "verdict"),
                                         metadata={"tags": ["verdict-table"]})


def control_text(s):
    decl = s["declared"]
    if decl is None:
        return "**Negative control:** none declared yet."
    if decl["profile"] is None:
        return f"**Negative control:** none. {text(decl['about'], True)}"
    c = s["control"]
    runs = (f"Over {c['n']} seeds the control is {control_badge(c['headline'])}, {c['k']} of {c['n']} reproduce."
            if c else "The control has not been run yet (`nbdemo sweep CLAIM --profile control --seeds 0-4`).")
    untested = (f" Checks the control does not test (no evidence either way): {text('; '.join(s['untested']), True)}."
                if s["untested"] else "")
    useless = (f" Checks that hold in the control too, and so are no evidence: {text('; '.join(s['uninformative']), True)}."
               if s["uninformative"] else "")
    return f"**Negative control** (profile `control`): {text(decl['about'], True)} {runs}{untested}{useless}"


def stale_text(s):
    if not is_stale(s):
        return ""
    ctrl = f", control seeds {seeds_text(s['stale_control'])}" if s["stale_control"] else ""
    seeds = f"seeds {seeds_text(s['stale'])}" if s["stale"] else ""
    return (f"**Stale: this is the last stored headline, not a current one.** The code or parameters of "
            f"{', '.join(filter(None, [seeds, ctrl.lstrip(', ')]))} changed since they were run; "
            "`nbdemo sweep CLAIM --seeds 0-9` (and `--profile control --seeds 0-4`) makes them current.")


def alone_why(by_rule, own):
    """Why a run's outcome by the rule differs from what its rows alone say, in words."""
    if by_rule == INCONCLUSIVE and own == REPRODUCED:
        return ("every check holds, but none of them is tested and failed by the negative control (each is untested "
                "by it or holds in it too), so the run is no evidence either way")
    return "the rule judges a run with its control"


def rows_alone(s, meta):
    """" By its rows alone it is X: why." where the run's rows alone say otherwise than the rule, else ""."""
    own, by_rule = meta["verdict"]["outcome"], run_outcome(s, meta)
    return "" if own == by_rule else f" By its rows alone it is {badge(own)}: {alone_why(by_rule, own)}."


def all_seeds_text(s):
    every = s.get("all_seeds")
    if not every or all(every.get(k) == s.get(k) for k in ("headline", "k", "n", "inconclusive")):
        return ""
    return f"over every stored seed {badge(every['headline'])}, {tally_text(every, fresh=False)}"


def headline_text(s):
    """The verdict: headline, fresh k of n with its interval and inconclusive runs, robust or what it depends on,
    and the tally over every stored seed where it differs."""
    fresh = s.get("fresh") or {}
    parts = [f"{badge(s['headline'])} {tally_text(s, fresh=fresh.get('since') is not None)}",
             robust_text(s), all_seeds_text(s)]
    head = "; ".join(p for p in parts if p)
    return STALE + head if is_stale(s) else head


def seeds_box(claim, s, others, meta, stored=""):
    """The evidence over seeds, collapsed below the top of the page: the outcome over seeds with its interval,
    whether it is stale, the fresh seeds, one outcome per seed (the rule's, its control included, and why where its
    rows alone say otherwise), the control, the evidence per row and per seed, the link to the stored results
    (stored: markdown), the thresholds inside metrics, and the setting it comes from."""
    if not s:
        body = f"No sweep over seeds is stored for this claim yet (`nbdemo sweep {claim.id} --seeds 0-9`)."
    else:
        judged = (f" The seeds alone give {badge(s['over_seeds'])}; judged against the control, "
                  f"{badge(s['headline'])}." if s["over_seeds"] != s["headline"] else "")
        seeds = table(["Seed", "Outcome", "Wall time"], [
            [text(seed), badge(o) + ("" if o == (own := s["runs"][seed]["outcome"]) else
                                     f" (by its rows alone {text(own)}: {alone_why(o, own)})"),
             f"{s['runs'][seed]['wall_s']:.0f} s"] for seed, o in s["outcomes"].items()], "seeds")
        parts = [f"**Headline:** {headline_text(s)}.{judged}",
                 stale_text(s), fresh_text(s), seeds, control_text(s), evidence_table(s),
                 per_seed(s["runs"], f"Each row's value in each of the {len(s['runs'])} seeds (✗: fails)")
                 + (per_seed(s["control"]["runs"], "... and in each seed of the control") if s["control"] else ""),
                 stored, inner_text(s), "The headline follows {ref}`the book's rule <rule>`."]
        body = "\n\n".join(p for p in parts if p)
    body += f"\n\n{setting_text(claim)}"
    colour = "stale" if s and is_stale(s) else slug(s["headline"]) if s else "none"
    return f"```{{admonition}} Outcome over seeds\n:class: seeds box-{colour}\n{body}\n```"


def profile_title(claim, profile, meta):
    """Another profile's run of a claim, titled as such: "TFD-1, run of the paper profile (NVIDIA H100, 441 s)"."""
    p = meta.get("provenance") or {}
    where = p.get("gpu") or p.get("device") or "device not recorded"
    return f"{claim.id}, run of the {profile} profile ({where}, {meta['wall_s']:.0f} s)"


def others_text(claim, others):
    """The runs of other profiles kept for a claim, each a link to its page, titled as a run of a profile."""
    return "\n".join(f"- {{doc}}`{TITLE_CHARS.sub('', profile_title(claim, p, m))} <{doc}>`: "
                     f"{badge(m['verdict']['outcome']) if m['verdict'] else 'no verdict'}" for p, doc, m in others)


TITLE_CHARS = re.compile(r"[^\w .=,()-]")  # what a link's title keeps of a profile's name: no markup


def history_text(s):
    h = s and s["history"]
    if not (h and h["items"]):
        return ""
    return (f"{h['revised']} revisions after results. The states of the stored results where the headline moved, "
            "and every revision after results, one line each:\n\n" + history_table(h))


def section(title, body, cls):
    """A collapsed part of a claim page (a <details> that opens), as a markdown cell; None when body is empty."""
    if not body:
        return None
    return nbformat.v4.new_markdown_cell(f'<details class="section {cls}"><summary>{title}</summary>\n\n{body}\n\n'
                                         "</details>", metadata={"tags": ["section"]})


def sections(claim, s, others, meta, stored=""):
    """The collapsed parts of a claim page, in order: the evidence over seeds, the history, how to rerun it, the
    runs of other profiles."""
    return [c for c in [section("Evidence over seeds: each seed, each row, the control", seeds_box(claim, s, others, meta, stored), "evidence"),
                        section("History: where the headline moved, and the revisions after results", history_text(s), "history"),
                        section("Rerun this claim", rerun_text(claim, s), "rerun"),
                        section("Runs of other profiles", others_text(claim, others), "others")] if c]


def rerun_text(claim, s):
    """The exact commands that reproduce the headline (its deciding seeds) and its control, the run on the page,
    and the notebook."""
    fresh = sorted((s.get("fresh") or {}).get("seeds") or s["runs"]) if s else list(range(10))
    control = sorted(s["control"]["runs"]) if s and s.get("control") else []
    paper = "paper" in params.profiles(claim)
    lines = [f"# the headline: seeds {seeds_text(fresh)} of the default profile (a 2-core CPU, about a minute each)",
             f"nbdemo sweep {claim.id} --seeds {seeds_text(fresh).replace(', ', ' ')}",
             *([f"# its negative control, seeds {seeds_text(control)}",
                f"nbdemo sweep {claim.id} --profile control --seeds {seeds_text(control).replace(', ', ' ')}"]
               if control else []),
             "# the run on this page (seed 0)", f"nbdemo run {claim.id}",
             *(["# the paper's settings, for a GPU", f"nbdemo run {claim.id} --profile paper"] if paper else [])]
    repo = urls()["Repository"]
    notebook = f"[{claim.id}.ipynb]({repo}/blob/main/notebooks/{claim.id}.ipynb)" if repo else \
        f"`notebooks/{claim.id}.ipynb`"
    return ("````{admonition} Rerun this claim\n:class: rerun\n```bash\n" + "\n".join(lines) + "\n```\n\n"
            f"From a clone of the repository, after `make setup`, with `.venv/bin` on the PATH (README). The notebook: "
            f"{notebook} in the repository, or this page's download button (.ipynb).\n````")


def paper_numbers(s, most=3):
    """"the paper: s1/s2 ≈ 10 (Fig. 4); ours: 5.2 (3.9 to 6.1)": the rows whose threshold is the paper's, ours
    beside it, at most `most`."""
    out = []
    for row, spread, _ in (s or {}).get("effects") or []:
        src = row.get("source") or {}
        if src.get("from") == "paper" and spread and row["kind"] == "check":
            out.append(f"{text(row['name'], True)}: the paper {text(row['expected'], True)} "
                       f"({text(paper_figure(src['where']), True)}), ours {text(_spread(spread), True)}")
    return out[:most]


def control_line(claim, s):
    """The control in one line."""
    decl = s["declared"] if s else control(claim)
    if not decl:
        return "none declared yet."
    about = text(" ".join(public(decl["about"]).split()[:25]) + ("…" if len(decl["about"].split()) > 25 else ""), True)
    if decl["profile"] is None:
        return f"none: {about}"
    c = s and s["control"]
    return f"{about} " + (f"Over {len(c['runs'])} seeds: {control_badge(c['headline'])}." if c else "Not run yet.")


def shows_text(claim, s, meta, finding=None, words=150):
    """"What this shows and what it doesn't", in at most `words` words: the reason (`why.reason`), the setting, and
    what the evidence leaves open."""
    kind, reason = why.reason(s, meta, finding)
    d = departures(claim)
    setting = ("It comes from the paper's own setting." if d == [] else
               "It comes from the default profile; the claim has no paper profile to compare it with." if d is None else
               f"It comes from a substitute setting ({'; '.join(d[:3])}{'; …' if len(d) > 3 else ''}), so it is not "
               "a result about the paper's own setting.")
    def few(names):
        names = list(names)
        return "; ".join(names[:2]) + (f" and {len(names) - 2} more" if len(names) > 2 else "")
    leaves = []
    if s and s["untested"]:
        leaves.append(f"its control does not test {few(s['untested'])}")
    if s and s["uninformative"]:
        leaves.append(f"{few(s['uninformative'])} {'hold' if len(s['uninformative']) > 1 else 'holds'} in the "
                      "control too")
    if s and s["headline"] in (rules.UNCONFIRMED, rules.TOO_FEW):
        leaves.append("too few fresh seeds have been run for a headline")
    said = f"{kind.capitalize()}: {reason}. {setting}" + (
        f" What it leaves open: {'; '.join(leaves)}." if leaves else "")
    cut = said.split()
    said = " ".join(cut[:words]) + ("…" if len(cut) > words else "")
    if not finding:
        return text(said, True)
    # a finding's maths ($...$, the notebook's own prose) is kept for MyST to render; the rest is escaped
    return "".join(part if i % 2 else text(part, True, whole=False)
                   for i, part in enumerate(re.split(r"(\$[^$\n]+\$)", public(said))))


def brief_box(claim, s, meta, finding=None):
    """The top of a claim page under its verdict: the paper's numbers beside ours, the control in one line, and
    what this shows and what it doesn't."""
    lines = [f"**The paper's numbers beside ours:** {'; '.join(nums)}." for nums in [paper_numbers(s)] if nums]
    lines += [f"**Negative control:** {control_line(claim, s)}",
              f"**What this shows and what it doesn't:** {shows_text(claim, s, meta, finding)}"]
    return nbformat.v4.new_markdown_cell("```{admonition} In brief\n:class: brief\n" + "\n\n".join(lines) + "\n```",
                                         metadata={"tags": ["brief"]})


def verdict_line(claim, s, meta, finding=None):
    """The line that opens a claim page, under its title: the headline (`headline_text`), or the page's own run's
    outcome where there is no sweep (either STALE and the last stored where it is not current), and why, in one line
    (`why.reason`)."""
    if s:
        head = headline_text(s)
    elif meta and meta["verdict"]:
        head = f"{badge(meta['verdict']['outcome'])} in seed 0 alone (no sweep over seeds yet)"
        head = STALE + head if stale_run(claim, meta) else head
    else:
        head = "not run yet"
    if differs := seed0_differs(s, meta):
        head += f' <span class="differs">(the run on this page: {badge(differs)})</span>'
    line = f'<p class="verdict-line">{head}. Why: {why.cell(*why.reason(s, meta, finding))}</p>'
    return nbformat.v4.new_markdown_cell(line, metadata={"tags": ["verdict-line"]})
