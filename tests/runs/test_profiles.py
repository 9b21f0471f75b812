"""Dry runs of every paper profile: the paper's model, two steps on random tensors of the paper dataset's shape.

A dry run (NBDEMO_DRY_RUN=1, see `nbdemo.ml.data.dry_run`) keeps every shape that a profile sets (widths, depths,
channels, input shapes) and shrinks the data (32 random samples per class) and the number of steps (two). The test
also shrinks the few parameters that count copies rather than shape anything (`SAMPLING`: how many networks of one
setting train side by side, how many points of an interpolation path are evaluated): one copy or five points run
the same code as a hundred copies or fifty points. Each one must run every code cell of the notebook with the profile's values injected, without error,
within a time budget: a dry run that drifts towards paper-sized work (a full evaluation set, a q x q read-out
through a CNN) fails here instead of making the suite slow. All dry runs share one kernel (`runner.shared_kernel`),
so torch and nbdemo are imported once rather than once per profile; each notebook starts from an empty namespace.
"""
import ast

import nbformat
import pytest

from nbdemo.claims.registry import CLAIMS
from nbdemo.runs import params, runner

WITH_NOTEBOOK = [c for c in CLAIMS.values() if c.notebook.exists()]
# Seconds one dry run may take on the project's 2-core CPU while `make test`'s other worker runs beside it. The
# slowest, PFC-4's CIFAR-100 and STL-10 ResNets, took 55 s so (PCB-3's 5-layer linear nets up to 2,048 wide on
# 3,072 inputs took 38 s alone, 69-79 s so, until metrics/pcb stopped multiplying by 3,072 x 3,072 identities:
# now 17 s alone, 26 s so); the dry runs that drifted towards paper-sized work (see SAMPLING) took 84-245 s
# alone, about twice that beside another worker.
BUDGET_S = 150
# Counts of copies, shrunk to at most these values in a dry run. Measured on the 2-core machine before this was
# added, they were the bulk of the slowest dry runs: PCB-3's, PCB-6's, PCB-7's, PCB-10's 10 to 100 paper-sized
# networks (243, 111, 145, 84 s), and MLI-2..4's and MLI-8's 50-point interpolation of three 10-layer,
# 1,024-wide nets per setting (113-144 s). With them: PCB-3 54 s, PCB-6 8 s, MLI-2 18 s.
SAMPLING = {"n_models": 2, "n_mlp_models": 2, "n_alphas": 5}


def sampling(claim, profile):
    """The SAMPLING overrides for a dry run of this profile: only names the notebook has, and never upwards."""
    _, full = params.resolve(claim, profile)
    return {k: min(v, full[k]) for k, v in SAMPLING.items() if k in full}


def injected(nb):
    """The parameters papermill injected into an executed notebook, as {name: value}."""
    cells = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    if not cells:  # an empty profile (the paper's own defaults): papermill injects no cell
        return {}
    assert len(cells) == 1, "papermill injected more than one parameters cell"
    tree = ast.parse(cells[0].source)
    return {node.targets[0].id: ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)}


@pytest.fixture(scope="module")
def kernel():
    with runner.shared_kernel(dry_run=True) as km:
        yield km


@pytest.mark.parametrize("claim", WITH_NOTEBOOK, ids=lambda c: c.id)
def test_paper_profiles_run_in_shape(claim, tmp_path, monkeypatch, kernel):
    """Build the paper's model and take two steps on random tensors of the paper dataset's shape."""
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    for profile in params.profiles(claim):
        if profile != "default":
            fewer = sampling(claim, profile)
            path, meta = runner.run(claim, profile, fewer, dry_run=True, kernel=kernel, log=lambda *_: None)
            nb = nbformat.read(path, as_version=4)
            assert meta["dry_run"] and nb.cells
            # the profile's own values (the paper's widths, depths, datasets) are what the notebook ran with
            changed, _ = params.resolve(claim, profile)
            ran = injected(nb)
            assert {k: ran[k] for k in ran if k not in fewer} == {k: changed[k] for k in changed if k not in fewer}, \
                f"{claim.id} [{profile}]: injected parameters differ from the profile"
            # every code cell ran, none raised
            code = [c for c in nb.cells if c.cell_type == "code"]
            assert all(c.execution_count is not None for c in code), f"{claim.id} [{profile}]: a cell did not run"
            assert not [o for c in code for o in c.outputs if o.output_type == "error"]
            assert meta["wall_s"] <= BUDGET_S, f"{claim.id} [{profile}] dry run took {meta['wall_s']} s > {BUDGET_S} s"
