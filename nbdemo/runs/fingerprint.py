"""What a claim's run depends on: its hash (`of(claim, params)`, the fingerprint a stored run must match) and the
commit that holds it (`git_commit`).

A run depends on its notebook's code cells, the nbdemo modules those import (transitively: `dependencies`) and its
parameters. Prose, and any module no notebook imports (this one, params, runner, results, ...), can change without
making a stored result stale.
"""
import ast
import hashlib
import json
import subprocess
from pathlib import Path

from nbdemo import __version__
from nbdemo.claims.registry import ROOT

PACKAGE = Path(__file__).resolve().parents[1]


def code_cells(claim):
    import nbformat  # here, not on import (it takes seconds): the command line refuses bad input without it
    nb = nbformat.read(claim.notebook, as_version=4)
    return [cell.source for cell in nb.cells if cell.cell_type == "code"]


def _imported(source, package):
    """Dotted names a piece of code imports, anywhere in it (lazy imports inside functions too); relative imports
    are resolved against `package`, the package the code belongs to."""
    try:
        tree = ast.parse(source)
    except SyntaxError:  # a cell with IPython magics: read its plain Python lines
        tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1])
                base = f"{parent}.{base}" if base else parent
            yield base
            yield from (f"{base}.{a.name}" for a in node.names)  # `from nbdemo import data` names a module


def _source_file(module):
    """The file of an nbdemo module (its .py, or its package's __init__.py), or None for anything else."""
    parts = module.split(".")
    if parts[0] != "nbdemo":
        return None
    path = PACKAGE.joinpath(*parts[1:])
    return next((f for f in (path.with_suffix(".py"), path / "__init__.py") if f.is_file()), None)


def dependencies(claim):
    """The package's source files that a claim's notebook runs: what its code cells import, transitively, with the
    __init__.py of every package on the way. Editing any other module leaves the claim's results fresh."""
    todo, seen = [name for source in code_cells(claim) for name in _imported(source, "")], set()
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            path = _source_file(module)
            if path and path not in seen:
                seen.add(path)
                package = module if path.name == "__init__.py" else module.rpartition(".")[0]
                todo += _imported(path.read_text(), package)
    return sorted(seen)


def code(claim):
    """The hash of a claim's code: its notebook's code cells and the package modules they import (transitively, see
    `dependencies`), to be completed by `of` with each run's parameters (a claim's seeds share it)."""
    h = hashlib.sha256()
    for source in code_cells(claim):
        h.update(source.encode())
    for path in dependencies(claim):
        h.update(str(path.relative_to(PACKAGE)).encode() + path.read_bytes())
    return h


def of(claim, params, code_hash=None):
    """Hash of what a run's outputs depend on: the notebook's code cells, the package modules they import
    (transitively, see `dependencies`) and the parameters. Prose can be edited without making results stale.
    code_hash: the claim's `code(claim)`, computed once for many runs."""
    h = (code_hash or code(claim)).copy()
    h.update(json.dumps(params, sort_keys=True).encode())
    return h.hexdigest()[:16]


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def git_commit(claim):
    """The commit whose code made a run: HEAD, with "+dirty" when something the run depends on differs from HEAD's
    version (the notebook's code cells, a package module it imports). Outputs and prose of notebooks do not count,
    nor files of other claims, so a sweep that writes the committed notebooks leaves the next runs clean."""
    try:
        sha = _git("rev-parse", "--short", "HEAD").strip()
        changed = _git("status", "--porcelain", "--", *map(str, dependencies(claim))).strip()
        try:
            import nbformat
            committed = nbformat.reads(_git("show", f"HEAD:{claim.notebook.relative_to(ROOT)}"), as_version=4)
            same = [c.source for c in committed.cells if c.cell_type == "code"] == code_cells(claim)
        except subprocess.CalledProcessError:  # not in HEAD
            same = False
        return sha + ("" if same and not changed else "+dirty")
    except (OSError, subprocess.CalledProcessError):
        return f"nbdemo {__version__} (no git)"
