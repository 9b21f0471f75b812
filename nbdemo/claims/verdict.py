"""The verdict of a claim notebook as structured rows: each scored row a numeric statistic, a comparison, a threshold
and the threshold's source (a place in the paper, or `ours` with its reason).

    from nbdemo.claims.verdict import Verdict, paper, ours
    v = Verdict("PCB-1")
    v.require("L=5: training stayed finite", ...)
    v.check("L=5: Eq. 10 fits the top 100 PCs: mean |gap|", gap, "<", 0.1, source=ours("a tenth of the unit distance"))
    v.check("critical freq. vs accessibility: r", r, "<", 0, source=paper("Fig. 8", 364), reported="-0.93")
    v.check("'always positive': share of steps with o > 0", share, ">=", 1, source=ours("the literal 'always'"),
            alternatives={"the figure's reading, mean - sd > 0": alt(share_sd, ">", 0.854, "Fig. 3 shows mean ± sd")})
    v.note("step of the highest similarity", 540)
    v.report()

The row's pass/fail is computed here from its statistic, so that the stored numbers decide it and the book can say at
which threshold a headline would change (`nbdemo.runs.evidence`). A statistic of several numbers (one per layer, depth,
seed of an ensemble) passes when every number passes. A row without a source is refused.
"""
import math
import operator

from nbdemo.claims.registry import VERDICT_KEY, _glue, get

OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
       "!=": operator.ne}


def fmt(x):
    """Round a measured value for the verdict table (3 significant digits)."""
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return str(x)
    if isinstance(x, int):
        return str(x)
    return f"{float(x):.3g}"


REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE = "REPRODUCED", "NOT REPRODUCED", "INCONCLUSIVE"
OUTCOMES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE)
KINDS = ("requirement", "check", "note")


def outcome(rows):
    """A run's outcome from its rows: INCONCLUSIVE when a requirement fails, else REPRODUCED when every check holds
    (and there is at least one), else NOT REPRODUCED. Notes are not scored."""
    if any(not r["ok"] for r in rows if r["kind"] == "requirement"):
        return INCONCLUSIVE
    checks = [r["ok"] for r in rows if r["kind"] == "check"]
    return REPRODUCED if checks and all(checks) else NOT_REPRODUCED


def tally(rows, kind):
    """"k/n": of the rows of one kind, how many passed."""
    rows = [r for r in rows if r["kind"] == kind]
    return f"{sum(bool(r['ok']) for r in rows)}/{len(rows)}"


def describe(rows):
    """"NOT REPRODUCED (requirements met 2/2, checks hold 3/4)"."""
    return f"{outcome(rows)} (requirements met {tally(rows, 'requirement')}, checks hold {tally(rows, 'check')})"


def paper(where, line=None):
    """A threshold the paper states: `where` is what a reader can find (section, equation, figure, table); `line`
    is the line of the project's text copy of the paper (for code and notes, never shown in the book)."""
    return {"from": "paper", "where": str(where), **({"line": int(line)} if line is not None else {})}


def ours(why, no_alternative=None):
    """A threshold of this book's, not the paper's, with the one-line reason it was chosen; a row that depends on it
    declares its `alternatives`, or says here why no other reading is plausible (`no_alternative`)."""
    if not str(why).strip():
        raise ValueError("ours(...) needs the reason for the threshold")
    if no_alternative is not None and not str(no_alternative).strip():
        raise ValueError("ours(..., no_alternative=...) needs the reason no other reading is plausible")
    return {"from": "ours", "why": str(why),
            **({"no_alternative": str(no_alternative)} if no_alternative is not None else {})}


def alt(value, op=None, threshold=None, why=""):
    """An alternative reading of a row, computed on the same networks in the same run: its statistic, and its
    comparison and threshold where they differ from the row's, with the reason a careful reader could choose it."""
    return {"value": value, "op": op, "threshold": threshold, "why": why}


def source_text(source):
    return source["where"] if source["from"] == "paper" else "ours"


def encode(x):
    """A number for JSON: finite floats to 6 significant digits (the last bits of a float sum are not the claim's,
    and nbval compares the stored rows), inf and NaN as the strings 'inf', '-inf', 'nan'."""
    x = float(x)
    return float(f"{x:.6g}") if math.isfinite(x) else str(x)


def decode(x):
    return float(x)


def numbers(value):
    """A statistic as a list of floats (one number, or several)."""
    if isinstance(value, (list, tuple)):
        return [decode(x) for x in value]
    if hasattr(value, "tolist"):  # a tensor or an array
        return numbers(value.tolist())
    return [decode(value)]


def holds(value, op, threshold):
    """Whether every number of the statistic satisfies `op threshold` (a NaN never does)."""
    xs, ts = numbers(value), numbers(threshold)
    if len(ts) == 1:
        ts = ts * len(xs)
    if len(ts) != len(xs) or not xs:
        raise ValueError(f"a statistic of {len(xs)} numbers against {len(ts)} thresholds")
    return all(not math.isnan(x) and OPS[op](x, t) for x, t in zip(xs, ts))


def _stored(value):
    """A statistic as stored: one number (a float, an int, a 0-d tensor or array) or a list of numbers."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    xs = [encode(x) for x in numbers(value)]
    return xs if isinstance(value, (list, tuple)) else xs[0]


def _alternatives(name, op, threshold, alternatives):
    """{name: {"value", "op", "threshold", "ok", "why"}} as stored: each alternative judged by its own comparison."""
    out = {}
    for what, a in alternatives.items():
        a = a if isinstance(a, dict) else alt(*a)
        a_op, a_t = a.get("op") or op, threshold if a.get("threshold") is None else a["threshold"]
        if a_op not in OPS or not str(a.get("why", "")).strip():
            raise ValueError(f"{name!r}: alternative {what!r} needs a comparison of {', '.join(OPS)} and its reason")
        value, a_t = _stored(a["value"]), _stored(a_t)
        out[str(what)] = {"value": value, "op": a_op, "threshold": a_t, "ok": holds(value, a_op, a_t),
                          "why": str(a["why"])}
    return out


def _inner(name, inner):
    """{threshold: [value lower, value higher] or None}, as stored."""
    out = {}
    for what, variants in inner.items():
        if variants is not None and len(variants) != 2:
            raise ValueError(f"{name!r}: inner threshold {what!r} needs (value at -10%, value at +10%) or None")
        out[str(what)] = None if variants is None else [_stored(v) for v in variants]
    return out


class Verdict:
    """The rows of one claim's verdict, stated before the results are seen.

    - `require`: the run reached the regime the claim is about (trained to fit, the first phase exists, the solver
      converged, no divergence). A failed requirement makes the run INCONCLUSIVE: it says nothing of the claim.
    - `check`: what the claim says, with the paper's statistic (and its value, `reported`, where the paper gives one).
    - `note`: a value reported and not scored (a diagnostic, a sub-claim the paper does not make).
    """

    def __init__(self, claim_id):
        self.claim = get(claim_id).id
        self.rows = []

    def _unique(self, name):
        """Rows are matched by name across seeds and with the control's rows: one verdict cannot have a name twice."""
        if any(r["name"] == name for r in self.rows):
            raise ValueError(f"{name!r}: two rows of one verdict have this name")

    def _row(self, kind, name, value, op, threshold, source, reported, shown, expected, inner=None,
             alternatives=None):
        if op not in OPS:
            raise ValueError(f"{name!r}: comparison {op!r} is not one of {', '.join(OPS)}")
        if not isinstance(source, dict) or source.get("from") not in ("paper", "ours"):
            raise ValueError(f"{name!r}: every scored row needs the source of its threshold: "
                             "paper('Eq. 10', line) or ours('why')")
        self._unique(name)
        t = _stored(threshold)
        ok = holds(_stored(value), op, t)  # judged as stored (6 digits), so that the store's numbers decide it
        self.rows.append({"kind": kind, "name": name, "value": _stored(value), "op": op, "threshold": t,
                          "source": source, "reported": None if reported is None else str(reported),
                          "expected": (expected or f"{op} {fmt_value(t)}")
                          + (f" (paper {reported})" if reported is not None else ""),
                          "measured": shown if shown is not None else fmt_value(_stored(value)), "ok": ok,
                          **({"inner": _inner(name, inner)} if inner else {}),
                          **({"alternatives": _alternatives(name, op, threshold, alternatives)}
                             if alternatives else {})})

    def require(self, name, value, op, threshold, *, source, reported=None, shown=None, expected=None, inner=None,
                alternatives=None):
        """A requirement: `value op threshold` must hold. shown/expected: the table's text for the measured value
        and the comparison, where the numbers alone would not read well. inner, alternatives: see `check`."""
        self._row("requirement", name, value, op, threshold, source, reported, shown, expected, inner, alternatives)

    def check(self, name, value, op, threshold, *, source, reported=None, shown=None, expected=None, inner=None,
              alternatives=None):
        """A check of the claim: `value op threshold` must hold; `reported` is the paper's own value, if it gives one.

        inner: the thresholds of ours inside the metric that computes `value` (a plateau's tolerance, a hold of 3
        points), {"name of the threshold, with its value": (value with it 10% lower, value with it 10% higher)},
        or None for a threshold that is declared but not varied. The book then judges the claim with each variant
        (`nbdemo.runs.evidence`).

        alternatives: the readings of ours a careful reader could have chosen instead (another reading of the paper's
        words, window, estimator range, record spacing, threshold), each computed on the same networks:
        {"name": alt(value, op, threshold, why)}; op and threshold default to the row's. The book shows the headline
        under each, and whether it is robust to them. The primary reading is the paper's most literal one."""
        self._row("check", name, value, op, threshold, source, reported, shown, expected, inner, alternatives)

    def note(self, name, value=None, *, shown=None, reported=None):
        """A reported value: a number (or several), or only a text (`shown`)."""
        self._unique(name)
        stored = None if value is None else _stored(value)
        self.rows.append({"kind": "note", "name": name, "value": stored, "op": None, "threshold": None,
                          "source": None, "reported": None if reported is None else str(reported),
                          "expected": "" if reported is None else f"paper {reported}",
                          "measured": shown if shown is not None else fmt_value(stored), "ok": None})

    def require_finite(self, history, name="training stayed finite", alternatives=None):
        """A requirement that the loss never became NaN or inf; its statistic is the step where it did (-1: never).
        alternatives: other readings of it (finite through a phase the claim is about), as for `check`."""
        at = history.diverged_at
        self.require(name, -1 if at is None else at, "==", -1, source=ours(
            "a run whose loss diverged learned nothing", no_alternative=None if alternatives else (
                "the statistics of a network whose loss diverged are not defined, so no reading can score them")),
                     shown="finite" if at is None else f"diverged at step {at}", expected="no NaN/inf loss",
                     alternatives=alternatives)

    @property
    def outcome(self):
        return outcome(self.rows)

    def table(self):
        mark = {True: "PASS", False: "FAIL", None: "-"}
        rows = [("kind", "row", "expected", "source", "measured", "")] + [
            (r["kind"], r["name"], r["expected"], source_text(r["source"]) if r["source"] else "", r["measured"],
             mark[r["ok"]]) for r in self.rows]
        widths = [max(len(r[i]) for r in rows) for i in range(6)]
        lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        reasons = sorted({r["source"]["why"] for r in self.rows if r["source"] and r["source"]["from"] == "ours"})
        lines += ["", "Thresholds marked ours:"] + [f"- {why}" for why in reasons] if reasons else []
        alts = [f"- {r['name']}: {name}: {fmt_value(a['value'])} {a['op']} {fmt_value(a['threshold'])}, "
                f"{mark[a['ok']]} ({a['why']})" for r in self.rows for name, a in (r.get("alternatives") or {}).items()]
        lines += ["", "Alternative readings (the headline is judged under each too):"] + alts if alts else []
        lines.append(f"{self.claim}: {describe(self.rows)}")
        return "\n".join(lines)

    def report(self):
        print(self.table())
        _glue(VERDICT_KEY, {"claim": self.claim, "outcome": self.outcome, "rows": self.rows})


def fmt_value(value):
    """A stored statistic for the table: 3 significant digits, several numbers joined by commas."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(fmt_value(x) for x in value)
    if isinstance(value, str):
        return value
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e6 else fmt(value)
