"""The Findings page: the cells each notebook tags `finding`, grouped by kind, and the claims whose headline over
seeds is not REPRODUCED, each with why."""
import re

import nbformat

from nbdemo.book.markup import badge, glue_keys, readable, tally_text, unglued
from nbdemo.claims.verdict import INCONCLUSIVE, REPRODUCED
from nbdemo.runs import rules

FINDING_KINDS = {
    "finding-false": ("The paper's statement is false or vacuous where its premises hold",
                      "Each of these holds whatever the setting: a counterexample, an empty bound, a quantity that is "
                      "constant by construction, or a solver that does not reach what the paper says it reaches."),
    "finding-substitute": ("Not reproduced in this book's substitute setting",
                           "Each of these is a result of the default profile's setting, which the finding names (a "
                           "smaller network, Fashion-MNIST or synthetic data, fewer steps). It is not a refutation of "
                           "the paper, whose own setting may behave otherwise; the paper profile is how to find out."),
    "finding-inconclusive": ("Inconclusive: the run did not reach the claim's regime",
                             "Each of these says what would reach the regime."),
}


def finding_cells(done):
    """{kind (a key of FINDING_KINDS, or None): [(claim, markdown cell tagged `finding`)]}, each cell's glue roles
    limited to the values its stored run recorded (`unglued`)."""
    found = {kind: [] for kind in [*FINDING_KINDS, None]}
    for claim, (path, _) in done.items():
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            tags = cell.metadata.get("tags", [])
            if cell.cell_type == "markdown" and "finding" in tags:
                cell.source = unglued(cell.source, glue_keys(nb))
                found[next((t for t in tags if t in FINDING_KINDS), None)].append((claim, cell))
    return found


def glued_from(claim, source):
    """A claim's markdown with its glue roles pointing at the claim's page (`{glue:text}`x:.3g`` reads
    `{glue:text}`claims/PFC-5.ipynb::x:.3g``, `{glue:text}`n`` reads `{glue}`claims/PFC-5.ipynb::n``), so that a cell
    copied onto another page shows the run's numbers."""
    source = re.sub(r"\{glue:text\}`(?![^`]*:)", "{glue}`", source)  # glue:text reads a path's key as a format
    return re.sub(r"(\{glue(?::\w+)?\}`)(?![^`]*::)", rf"\1claims/{claim.id}.ipynb::", source)


def _why(s):
    """Why a claim's headline is INCONCLUSIVE: the requirements that failed, the checks its control did not test
    or passed too."""
    why = [f"requirement “{name}” met in {k} of {n} seeds" for (kind, name), (k, n) in s["rows"].items()
           if kind == "requirement" and k < n]
    why += [f"check “{name}” untested by its control ({reason})" for name, reason in s["untested"].items()]
    return why + [f"check “{name}” holds in the control" for name in s["uninformative"]]


def findings(done, summaries):
    """The Findings page, by kind of finding: the cells each notebook tags `finding` with `finding-false`,
    `finding-substitute` or `finding-inconclusive`, then the claims whose headline over seeds is not REPRODUCED."""
    parts = ["# Findings\n", "What the reproduction found that the papers do not say, as each claim's notebook states it "
             "(cells tagged `finding`), grouped by the kind of finding, and then every claim whose outcome over seeds "
             f"(of at least {rules.FRESH_SEEDS} fresh seeds) is not REPRODUCED.\n"]
    found = finding_cells(done)
    cells = {kind: [(f"### {claim.id}: {claim.title}\n\n{glued_from(claim, readable(cell.source))}\n\n"
                     f"See {{doc}}`the notebook <claims/{claim.id}>`.\n") for claim, cell in found[kind]]
             for kind in found}
    other = cells.pop(None)
    for kind, (title, about) in FINDING_KINDS.items():
        if cells[kind]:
            parts += [f"## {title}\n\n{about}\n"] + cells[kind]
    if other:
        parts += ["## Other findings\n"] + other
    parts.append("## Claims that did not reproduce over seeds\n")
    missed = {c: s for c, s in summaries.items()
              if s["headline"] not in (REPRODUCED, rules.TOO_FEW, rules.UNCONFIRMED) and c in done}

    def line(c, s):
        return (f"- {{doc}}`{c.id} <claims/{c.id}>` {c.title}: {badge(s['headline'])}, {tally_text(s)}"
                + (f" ({'; '.join(_why(s))})" if s["headline"] == INCONCLUSIVE else ""))
    groups = [("Not reproduced, in the default profile's substitute setting (see each page for the setting)",
               [c for c, s in missed.items() if s["headline"] != INCONCLUSIVE]),
              ("Inconclusive: a requirement failed, or no check is tested and failed by the control",
               [c for c, s in missed.items() if s["headline"] == INCONCLUSIVE])]
    for title, claims in groups:
        if claims:
            parts.append(f"### {title}\n\n" + "\n".join(line(c, missed[c]) for c in claims) + "\n")
    if not missed:
        parts.append("None.")
    unconfirmed = [c for c, s in summaries.items() if s["headline"] == rules.UNCONFIRMED and c in done]
    if unconfirmed:
        parts.append(f"## Unconfirmed: fewer than {rules.FRESH_SEEDS} fresh seeds\n\nNo headline yet; the tally so far, "
                     "over the seeds first run after each claim's last revision after results:\n\n" + "\n".join(
                         f"- {{doc}}`{c.id} <claims/{c.id}>` {c.title}: {tally_text(summaries[c])}" for c in unconfirmed)
                     + "\n")
    return "\n".join(parts) + "\n"
