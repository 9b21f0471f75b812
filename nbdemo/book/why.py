"""Why a claim came out as it did, in one line, for the dashboard and the top of its page (`reason`).

One mechanism: a claim's notebook states its reason in its cell tagged `finding`, whose first sentence (its bold
lead, "**Finding: ...**") is the line, with the finding's kind (`FINDING_KINDS`). A claim without a finding gets
its line from its evidence: the requirement its seeds did not meet, the check that failed, the check its control
did not test or passed too, or, for a REPRODUCED headline, the check its control failed. Without a sweep, the line
comes from the rows of the run on its page."""
import html
import re

from nbdemo.book.markup import readable
from nbdemo.claims.verdict import INCONCLUSIVE, NOT_REPRODUCED, REPRODUCED
from nbdemo.runs import rules

FINDING_LABELS = {"finding-false": "finding: the statement is false or vacuous",
                  "finding-substitute": "finding: not reproduced in the substitute setting",
                  "finding-inconclusive": "finding: the run did not reach the regime", None: "finding"}


def finding_label(kind, headline=None):
    """A finding's label; beside a claim that reproduces, a finding that the statement is false is about the paper's
    statement, proof or solver around the claim, not the claim's outcome, and says so."""
    if kind == "finding-false" and headline == REPRODUCED:
        return "finding beside the result: about the paper's statement, proof or solver"
    return FINDING_LABELS.get(kind, "finding")


# the tags that may follow a headline, with what each means (explained where they appear)
TAGS = {
    "untested check": "a check whose statistic the negative control cannot test (not finite, or fixed by "
                      "construction there): no evidence either way",
    "uninformative check": "a check that holds in at least half of the control's seeds too, so it is no evidence",
    "threshold-sensitive": "a threshold of ours, moved by 10% (or by the statistic's spread, at 0), changes the "
                           "headline",
    "fresh seeds alone": "the seeds first run after the claim's last revision after results give another headline",
    "finding": "the notebook states a finding (see the Findings page) beside its outcome",
}


def lead(source):
    """The first sentence of a finding cell as plain text: its bold lead when it has one, without "Finding:"."""
    s = readable(source).strip()
    m = re.match(r"\*\*(.+?)\*\*", s, re.S)
    s = m[1] if m else re.split(r"(?<=[.!?])\s", s, maxsplit=1)[0]
    s = re.sub(r"\{\w+(?::\w+)?\}`([^`<]*?)\s*(?:<[^>]*>)?`", r"\1", s)  # {doc}`text <target>` -> text
    s = re.sub(r"[*`]", "", s)  # its maths ($...$) is kept, and rendered by `cell`
    return re.sub(r"\s+", " ", s.removeprefix("Finding:").strip().rstrip(".")).strip()


def _q(name):
    return f"“{readable(name)}”"


def _from_rows(rows):
    """(kind, text) from one run's rows: its first failing requirement, else its first failing check."""
    for kind, label in (("requirement", "requirement unmet"), ("check", "check fails")):
        bad = [r for r in rows if r["kind"] == kind and r["ok"] is False]
        if bad:
            return label, f"{_q(bad[0]['name'])}: {readable(bad[0]['measured'])} (seed 0 only)"
    return "every check holds", "in the run on its page (seed 0 only; no sweep over seeds yet)"


def _failing(s, kind):
    return [(name, k, n) for (kd, name), (k, n) in s["rows"].items() if kd == kind and k < n]


def reason(s, meta, finding=None):
    """(kind, text): why the claim's headline is what it is. s: its `evidence.assess` summary (or None), meta: the
    metadata of the run on its page (or None), finding: (finding kind, cell) or None."""
    if finding:
        kind, cell = finding
        return finding_label(kind, s["headline"] if s else None), lead(cell.source)
    if not s:
        return _from_rows(meta["verdict"]["rows"]) if meta and meta.get("verdict") else ("not run", "no stored run")
    h, unmet, failing = s["headline"], _failing(s, "requirement"), _failing(s, "check")
    if h == rules.TOO_FEW:
        return "too few seeds", f"{s['n']} seeds stored, a headline needs {rules.MIN_SEEDS}"
    if h == rules.UNCONFIRMED:
        fresh = len((s.get("fresh") or {}).get("seeds") or [])
        said = f"{fresh} fresh seeds of the {rules.FRESH_SEEDS} a headline needs"
        every = s.get("all_seeds")
        if every and every["headline"] not in (rules.UNCONFIRMED, rules.TOO_FEW):
            kind, line = reason({**s, **every}, meta)
            if kind != "see page":
                said += f"; over every stored seed, {kind}: {line}"
        return "too few fresh seeds", said
    said = {"requirement unmet": [f"{_q(x)} unmet in {n - k} of {n} seeds" for x, k, n in unmet],
            "check fails": [f"{_q(x)} fails in {n - k} of {n} seeds" for x, k, n in failing],
            "control untested": [f"{_q(x)}: {w}" for x, w in s["untested"].items()],
            "holds in the control too": [_q(x) for x in s["uninformative"]]}
    order = {INCONCLUSIVE: ["requirement unmet", "control untested", "holds in the control too", "check fails"],
             NOT_REPRODUCED: ["check fails", "requirement unmet"],
             rules.MIXED: ["check fails", "requirement unmet", "control untested", "holds in the control too"]}
    for kind in order.get(h, []):
        if said[kind]:
            more = len(said[kind]) - 2
            return kind, "; ".join(said[kind][:2]) + (f" (and {more} more)" if more > 0 else "")
    if h == REPRODUCED:
        tested = [name for (kd, name) in s["rows"] if kd == "check" and name not in s["untested"]
                  and name not in s["uninformative"]]
        text = f"every check holds in {s['k']} of {s['n']} seeds" + (
            f"; {_q(tested[0])} fails in its control" if tested and s["control"] else "; no control (see page)")
        sensitive = [name for name, f in {**s["flips"], **s["inner"]}.items() if f and f["sensitive"]]
        return ("holds, threshold-sensitive", text + f"; but {_q(sensitive[0])} decides it") if sensitive \
            else ("holds", text)
    return "see page", "the page's evidence table says why"


def cell(kind, text):
    """The why as an HTML cell: its kind as a label, then the line, its maths ($...$) as the book's MathJax renders
    it."""
    line = re.sub(r"\$([^$]+)\$", r'<span class="math notranslate nohighlight">\\(\1\\)</span>', html.escape(text))
    return f'<span class="why-kind">{html.escape(kind)}</span> {line}'
