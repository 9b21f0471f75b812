"""The claim registry, verdicts, parameter validation, profiles and the `nbdemo` command."""
import ast
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from nbdemo import cli
from nbdemo.claims.registry import CLAIMS, ROOT
from nbdemo.claims.verdict import (
    INCONCLUSIVE,
    NOT_REPRODUCED,
    REPRODUCED,
    Verdict,
    ours,
)
from nbdemo.ml.train import History
from nbdemo.runs import params, runner, store

WITH_NOTEBOOK = [c for c in CLAIMS.values() if c.notebook.exists()]
TFD1, PCB1, PFC4 = CLAIMS["TFD-1"], CLAIMS["PCB-1"], CLAIMS["PFC-4"]
NBDEMO = [sys.executable, "-m", "nbdemo.cli"]
PEM = str(ROOT / "README.md")  # a file that exists, and is no certificate


def test_every_notebook_and_profile_belongs_to_a_registered_claim():
    assert len(CLAIMS) == 32
    assert {p.stem for p in (ROOT / "notebooks").glob("*.ipynb")} <= set(CLAIMS)
    assert {p.stem for p in params.PROFILES.glob("*.yml")} <= {c.id for c in WITH_NOTEBOOK}


def test_outcome_is_inconclusive_when_a_requirement_fails_else_reproduced_only_if_every_check_holds():
    v = Verdict("tfd-1")
    v.check("a", 0.123456, ">", 0, source=ours("synthetic"))
    v.note("a diagnostic", 7)
    assert v.outcome == REPRODUCED
    v.check("b", 1, "<", 0, source=ours("synthetic"))
    assert v.outcome == NOT_REPRODUCED
    v.require_finite(History(diverged_at=17))
    assert v.outcome == INCONCLUSIVE
    table = v.table()
    assert "0.123" in table and "diverged at step 17" in table and "note" in table
    assert table.endswith("TFD-1: INCONCLUSIVE (requirements met 0/1, checks hold 1/2)")
    assert Verdict("TFD-1").outcome == NOT_REPRODUCED  # no checks is no evidence
    only_notes = Verdict("TFD-1")
    only_notes.note("x", 1)
    assert only_notes.outcome == NOT_REPRODUCED


# MLI-8 (revision a8373cf, from its review): Theorem 1's two statements follow from the measured premises by the
# proof's own arithmetic (Lemmas 8-9), so they are notes; its verdict is its premises (requirements) alone.
NO_CHECK = {"MLI-8": {"check"}}


def test_every_notebook_states_requirements_and_checks_and_reports_once():
    for claim in WITH_NOTEBOOK:
        nb = nbformat.read(claim.notebook, as_version=4)
        cells = [c.source for c in nb.cells if "nbval-check-output" in c.metadata.get("tags", [])]
        reports = sum(cells[0].count(r) for r in ("v.report()", "sweep_verdict("))  # mli effect.sweep_verdict reports itself
        assert len(cells) == 1 and reports == 1 and "check_finite" not in cells[0], claim
        kinds = {r["kind"] for r in nb.metadata["nbdemo"]["verdict"]["rows"]}  # as the committed run recorded them
        assert {"requirement", "check"} - NO_CHECK.get(claim.id, set()) <= kinds, claim


def test_no_notebook_cell_holds_control_characters():
    """A "\\alpha" written in a non-raw string becomes BEL + "lpha"; the book then shows "lpha"."""
    for claim in WITH_NOTEBOOK:
        for i, cell in enumerate(nbformat.read(claim.notebook, as_version=4).cells):
            bad = re.findall(r"[\x00-\x08\x0b-\x1f\x7f]|\t(?=heta|au|imes|ext|ilde|op|riangle)", cell.source)
            assert not bad, (claim, i, bad)


@pytest.mark.parametrize("overrides, message", [
    ({"no_such_name": "1"}, "has no parameter 'no_such_name'"),
    ({"steps": "-5"}, "'steps' = -5 is impossible"),
    ({"depth": "abc"}, "'depth' must be int"),
    ({"gamma": "0"}, "'gamma' = 0.0 is impossible"),
    ({"gamma": "-1e-3"}, "'gamma' = -0.001 is impossible"),
    ({"dataset": "imagenet"}, "'dataset' = 'imagenet' is impossible"),
    ({"lr": "fast"}, "'lr' must be float"),
    ({"n_eval": "0"}, "'n_eval' = 0 is impossible"),
    ({"device": "gpu"}, "'device' = 'gpu' is impossible"),
])
def test_bad_parameters_are_refused_with_the_name(overrides, message):
    with pytest.raises(params.ParameterError, match=re.escape(message)):
        params.resolve(TFD1, "default", overrides)


def test_training_precision_is_checked():
    with pytest.raises(params.ParameterError, match="'precision' = 'float16' is impossible"):
        params.resolve(PFC4, "default", {"precision": "float16"})
    assert params.resolve(PFC4, "default", {"precision": "bfloat16", "torch_compile": "true"})[0] == {
        "precision": "bfloat16", "torch_compile": True}


def test_good_overrides_are_typed():
    changed, full = params.resolve(TFD1, "default", {"steps": "300", "gamma": "1", "dataset": "mnist"})
    assert changed == {"steps": 300, "gamma": 1.0, "dataset": "mnist"} and full["width"] == 512


def test_unknown_profile_is_refused():
    with pytest.raises(params.ParameterError, match="no profile 'papr'"):
        params.resolve(TFD1, "papr")


@pytest.mark.parametrize("claim", WITH_NOTEBOOK, ids=lambda c: c.id)
def test_every_profile_is_valid(claim):
    named = params.profiles(claim)
    assert "paper" in named or len(named) > 1, f"{claim.id} has no paper profile"
    for profile in named:
        params.resolve(claim, profile)


REFUSED = [  # (arguments, what the one line of stderr must say); every case runs the real CLI
    (["run", "TFD-1", "-p", "no_such_name", "1"], "no parameter 'no_such_name'"),
    (["run", "TFD-1", "-p", "steps", "-5"], "'steps' = -5 is impossible"),
    (["run", "TFD-9"], "unknown claim 'TFD-9'; did you mean TFD-"),
    (["run", "TFD-1", "-p", "gamma", "inf"], "'gamma' = inf is impossible: a number must be finite"),
    (["run", "TFD-1", "-p", "lr", "nan"], "'lr' = nan is impossible: a number must be finite"),
    (["run", "TFD-6", "-p", "gammas", "[0.25, .inf]"], "'gammas' = [0.25, inf] is impossible"),
    (["sweep", "TFD-1", "-p", "gamma", "inf", "--seeds", "0-1"], "'gamma' = inf is impossible"),
    (["sweep", "TFD-9", "--seeds", "0-4"], "unknown claim 'TFD-9'"),
    (["sweep", "--all", "--seeds", "4-2"], "seeds '4-2': give seeds in [0, 2**32)"),
    (["sweep", "--all", "--seeds", "a-b"], "seeds 'a-b': give seeds in [0, 2**32)"),
    (["sweep", "TFD-1", "-p", "seed", "3"], "give the seeds with --seeds"),
    (["sweep"], "name the claims to sweep, or give --all"),
    (["list", "--profile", "papr"], "unknown profile 'papr'"),
    (["book", "--profile", "papr"], "unknown profile 'papr'"),
    (["run", "TFD-1", "--profile", "papr"], "TFD-1 has no profile 'papr'"),
    # impossible values stated in params.RULES, and unbounded input, refused before a kernel or a cluster starts
    (["run", "TFD-1", "-p", "record_every", "0"], "'record_every' = 0 is impossible: it must be an integer >= 1"),
    (["run", "MLI-7", "-p", "dim", "0"], "'dim' = 0 is impossible: it must be an integer >= 1"),
    (["run", "PCB-1", "-p", "classes", "[]"], "'classes' = [] is impossible: it must be a non-empty list"),
    (["run", "MLI-6", "-p", "classes_2", "[1, 12]"], "'classes_2' = [1, 12] does not fit fashion-mnist"),
    (["run", "PFC-1", "-p", "lr_milestones", "[0.5, 2]"], "'lr_milestones' = [0.5, 2] is impossible"),
    (["run", "TFD-1", "-p", "steps", "10000000000"], "'steps' = 10000000000 is over 10,000,000 (ten million steps"),
    (["sweep", "TFD-1", "-p", "steps", "10000000000"], "'steps' = 10000000000 is over 10,000,000 (ten million"),
    (["run", "TFD-1", "-p", "lr", "-inf"], "'lr' = -inf is impossible: a number must be finite"),
    (["run", "TFD-1", "-p", "lr", "-1e-3"], "'lr' = -0.001 is impossible: it must be a number > 0"),
    (["run", "MLI-7", "--keep"], "--keep stores the executed notebook of a non-default profile"),
    (["sweep", "MLI-7", "--workers", "0"], "argument --workers: 0 is not an integer >= 1"),
    (["sweep", "MLI-7", "--workers", "-1"], "argument --workers: -1 is not an integer >= 1"),
    (["sweep", "MLI-7", "--seeds", "0-100000"], "100,001 seeds; a sweep runs at most 1,000 runs"),
    (["sweep", "MLI-7", "--seeds", "0-100000000"], "100,000,001 seeds; a sweep runs at most 1,000 runs"),
    (["sweep", "--all", "--seeds", "0-99"], "3,200 runs (32 claims x 100 seeds); a sweep runs at most 1,000"),
    (["sweep", "MLI-7", "--scheduler", "bogus://x"], "--scheduler 'bogus://x': give tcp://HOST:PORT"),
    (["sweep", "MLI-7", "--scheduler", "tcp://127.0.0.1:notaport"], "--scheduler 'tcp://127.0.0.1:notaport'"),
    (["sweep", "MLI-7", "--scheduler", "tcp://127.0.0.1:99999"], "--scheduler 'tcp://127.0.0.1:99999'"),
    (["sweep", "MLI-7", "--security", f"{PEM},{PEM},{PEM}"], "--security is for a scheduler started with --protocol"),
    (["sweep", "MLI-7", "--scheduler", "tcp://127.0.0.1:8786", "--security", f"{PEM},{PEM},{PEM}"],
     "--security is for a scheduler started with --protocol tls: give --scheduler tls://HOST:PORT"),
    (["sweep", "MLI-7", "--scheduler", "tls://127.0.0.1:8786", "--security", "ca.pem,node.pem"],
     "--security 'ca.pem,node.pem': give CA,CERT,KEY"),
    (["sweep", "MLI-7", "--scheduler", "tls://127.0.0.1:8786", "--security", f"{PEM},nosuch.pem,{PEM}"],
     "--scheduler tls://127.0.0.1:8786: no certificate or key file 'nosuch.pem'"),
    (["sweep", "MLI-7", "--scheduler", "tls://127.0.0.1:8786", "--security", f"{PEM},{PEM},{PEM}"],
     "--scheduler tls://127.0.0.1:8786: its certificate files are refused: [X509"),
    (["sweep", "MLI-7", "--scheduler", "tls://127.0.0.1:8786"], "tls://127.0.0.1:8786: give --security CA,CERT,KEY"),
    (["sweep", "--all", "--stale", "--profile", "nosuch"], "no claim has a profile 'nosuch'"),
    (["sweep", "MLI-7", "--stale", "--profile", "nosuch"], "MLI-7 has no profile 'nosuch'"),
    (["bench", "--repeats", "0"], "argument --repeats: 0 is not an integer >= 1"),
    # the values that passed validation and failed in the kernel, and its unbounded or unsafe input
    (["run", "PCB-1", "-p", "init", "orthogonal"], "'init' = 'orthogonal' is impossible: it must be one of 'glorot'"),
    (["run", "PCB-1", "-p", "init", "a\nb$(id)"], "'init' = 'a\\nb$(id)' is impossible"),
    (["run", "PCB-3", "-p", "loss", "hinge"], "'loss' = 'hinge' is impossible: it must be one of 'mse', 'ce'"),
    (["run", "PCB-6", "-p", "model", "resnet"], "'model' = 'resnet' is impossible: it must be one of 'mlp'"),
    (["run", "TFD-6", "-p", "norms", "[bn, ln]"], "'norms' = ['bn', 'ln'] is impossible"),
    (["run", "PFC-4", "-p", "precision", "float64"], "'precision' = 'float64' is impossible"),
    (["run", "TFD-1", "-p", "seed", str(2 ** 64)], "'seed' = 18446744073709551616 is impossible: it must be an "
                                                    "integer in [0, 2**32)"),
    (["run", "TFD-1", "-p", "seed", str(2 ** 32)], "'seed' = 4294967296 is impossible"),
    (["run", "TFD-1", "-p", "width", str(10 ** 9)], "'width' = 1000000000 is over 16,384"),
    (["run", "PCB-3", "-p", "widths", f"[64, {10 ** 6}]"], "'widths' = [64, 1000000] is over 16,384"),
    (["run", "PCB-1", "-p", "n_models", str(10 ** 6)], "'n_models' = 1000000 is over 1,000"),
    (["run", "MLI-9", "-p", "n_inits", str(10 ** 11)], "'n_inits' = 100000000000 is over 1,000,000"),
    (["run", "MLI-9", "-p", "dim", "1000"], "'dim' = 1000 is over 400 (T is a dim x dim x dim tensor"),
    (["sweep", "MLI-9", "-p", "n_inits", str(10 ** 11)], "'n_inits' = 100000000000 is over 1,000,000"),
    (["run", "TFD-1", "-p", "width", "1" * 5000], "'width': cannot read '111111"),
    (["run", "PCB-3", "-p", "widths", "[" * 50_000 + "]" * 50_000], "'widths': cannot read '[[[["),
    (["run", "TFD-1", "-p", "layer", "9"], "'layer' = 9 is not a hidden layer of a network of depth 9"),
    (["run", "PCB-5", "-p", "cnn_kernels", "[3, 3]"], "'cnn_kernels' and 'cnn_channels' give 2 and 6 convolutions"),
    (["run", "TFD-1", "-p", "device", "cuda:99"], "device 'cuda:99': torch sees no"),
    (["run", "TFD-1", "-p", "device", "tpu"], "'device' = 'tpu' is impossible"),
    (["sweep", "TFD-1", "-p", "device", "cuda:99", "--seeds", "0"], "device 'cuda:99': torch sees no"),
    (["bench", "--device", "cuda:99"], "argument --device: device 'cuda:99': torch sees no"),
    (["run", "TFD-1", "--profile", "x\n$(id)"], "TFD-1 has no profile 'x\\n$(id)'"),
    (["sweep", "MLI-7", "--seeds", "1,,2"], "seeds '1,,2': give seeds in [0, 2**32)"),
    (["sweep", "MLI-7", "--seeds", "1,"], "seeds '1,': give seeds"),
    (["sweep", "MLI-7", "--seeds", "\u0663"], "seeds '\u0663': give seeds"),  # ARABIC-INDIC DIGIT THREE
    (["sweep", "MLI-7", "--seeds", "0-\uff14"], "give seeds"),  # a full-width 4
    (["sweep", "MLI-7", "--seeds", "04"], "seeds '04': give seeds"),
    (["sweep", "MLI-7", "--seeds", str(2 ** 32)], "seeds '4294967296': give seeds in [0, 2**32)"),
    (["sweep", "MLI-7", "--workers", str(10 ** 6)], f"--workers 1000000: give 1 to {len(os.sched_getaffinity(0))}, "
                                                    "the cores here"),
    (["sweep", "MLI-7", "--workers", "\uff12"], "argument --workers: \uff12 is not an integer >= 1"),
    (["sweep", "MLI-7", "--workers", "1", "--scheduler", "tcp://127.0.0.1:8786"], "--workers sets the workers of the "
                                                                                 "LocalCluster"),
    (["run", "TFD-1", "nosuch\nclaim"], "unknown claim 'nosuch\\nclaim'"),
]
MALFORMED = [("paper: {steps: [1, 2\n", "TFD-1.yml: not valid YAML"), ("paper: 3\n", "paper is not"),
             ("- just a list\n", "a profile file is a mapping")]


@pytest.fixture
def nbdemo_cli(tmp_path, monkeypatch, capsys):
    """The real command line, `nbdemo.cli.main` (what the `nbdemo` script calls), in this process, where torch is
    imported already: each case takes milliseconds rather than a new interpreter's seconds. build/ and results/ are
    in tmp_path. Returns a function: arguments -> (exit status, what stderr shows)."""
    monkeypatch.setattr(runner, "BUILD", tmp_path / "build")
    monkeypatch.setattr(store, "RESULTS", tmp_path / "results")

    def call(args):
        with pytest.raises(SystemExit) as stop:
            cli.main(args)
        code = stop.value.code  # sys.exit("text") prints the text to stderr and exits with 1
        err = capsys.readouterr().err + ("" if code is None or isinstance(code, int) else f"{code}\n")
        return (code if isinstance(code, int) else 1), err
    return call


def _refused_in_one_line(code, err, message, tmp, keep=None):
    assert code == 2 and message in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert [p for p in tmp.iterdir() if p != keep] == []  # nothing ran, nothing was written


@pytest.mark.parametrize("args, message", REFUSED, ids=[" ".join(a) for a, _ in REFUSED])
def test_cli_refuses_bad_input_in_one_line_within_2_s_before_running(tmp_path, args, message):
    """The installed `nbdemo` script in a new process, as a user types it: exit 2, one line, in under 2 s."""
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results")}
    t0 = time.perf_counter()
    r = subprocess.run([str(Path(sys.executable).with_name("nbdemo")), *args], capture_output=True, text=True,
                       env=env, timeout=120)
    took = time.perf_counter() - t0
    _refused_in_one_line(r.returncode, r.stderr, message, tmp_path)
    assert took < 2, f"refused in {took:.2f} s"


HEAVY = ("torch", "numpy", "dask", "distributed", "nbformat", "papermill", "jupyter_client")
CHECK_ALL = """
import json, sys
from nbdemo import cli
for args in json.loads(sys.argv[1]):
    try:
        cli.main(args)
    except SystemExit as e:
        assert e.code == 2, (args, e.code)
print(json.dumps([m for m in json.loads(sys.argv[2]) if m in sys.modules]))
"""


def test_refusals_import_neither_torch_nor_dask(tmp_path):
    """Every refusal above, in one process: none imports torch, numpy, Dask, nbformat or papermill, but the one that
    reads Dask's own config for a tls:// scheduler's certificates (which imports Dask)."""
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results")}
    cases = [args for args, message in REFUSED if "give --security CA,CERT,KEY" not in message]
    r = subprocess.run([sys.executable, "-c", CHECK_ALL, json.dumps(cases), json.dumps(HEAVY)], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0 and len(r.stderr.splitlines()) == len(cases), r.stderr[-3000:]
    assert json.loads(r.stdout) == []


@pytest.mark.parametrize("text, message", MALFORMED, ids=[m for _, m in MALFORMED])
def test_a_malformed_profile_file_is_refused_in_one_line(nbdemo_cli, tmp_path, monkeypatch, text, message):
    profiles = tmp_path / "profiles"  # a copy of nbdemo/profiles with TFD-1's file broken
    shutil.copytree(params.PROFILES, profiles)
    (profiles / "TFD-1.yml").write_text(text)
    monkeypatch.setattr(params, "PROFILES", profiles)
    for args in (["run", "TFD-1", "--profile", "paper"], ["sweep", "TFD-1", "--seeds", "0-1", "--profile", "paper"]):
        _refused_in_one_line(*nbdemo_cli(args), message, tmp_path, keep=profiles)


def test_seed_lists_and_ranges_are_read_alike():
    from nbdemo.runs.sweep import parse_seeds
    assert parse_seeds("0-4") == parse_seeds("0 1 2 3 4") == parse_seeds("4,3,2,1,0") == [0, 1, 2, 3, 4]
    assert parse_seeds("0-2,9") == parse_seeds("0-2 9") == parse_seeds("9,0 1-2") == [0, 1, 2, 9]
    assert parse_seeds(str(2 ** 32 - 1)) == [2 ** 32 - 1]


def test_every_parameter_of_every_notebook_has_a_rule():
    """Its type, range or choices, checked before a kernel starts (a notebook's new parameter needs one)."""
    for claim in WITH_NOTEBOOK:
        missing = [name for name in params.defaults(claim) if params.rule(claim, name) is None]
        assert not missing, f"{claim.id}: give {missing} a rule in nbdemo.runs.params.RULES"


# Integers without an upper bound of their own: the seed (< 2**32), classes (those of the dataset), a hidden layer
# (< depth) and an exponent; every other integer is a size or a count.
UNBOUNDED = ("seed", "layer", "power")


def test_every_size_and_count_has_an_upper_bound():
    for claim in WITH_NOTEBOOK:
        for name, value in params.defaults(claim).items():
            numbers = value if isinstance(value, list) else [value]
            rule = params.rule(claim, name)
            if numbers and all(isinstance(x, int) and not isinstance(x, bool) for x in numbers) \
                    and name not in UNBOUNDED and rule is not params.CLASSES:
                assert len(rule) == 3, f"{claim.id}: {name} is a size or count without an upper bound in params.RULES"


def test_the_choices_of_string_parameters_are_what_the_code_accepts():
    from nbdemo.ml import catalog, data, models, train
    from nbdemo.papers.pcb import networks
    assert data.DATASETS is catalog.DATASETS and tuple(train.PRECISIONS) == catalog.PRECISIONS
    assert set(params.LOSSES) == set(networks.LOSSES)
    for init in params.INITS:
        networks.init_variances([4, 3, 2], init)
    with pytest.raises(ValueError):
        networks.init_variances([4, 3, 2], "orthogonal")
    for norm in params.NORMS:
        models.MLP(4, 3, 2, 2, norm=None if norm == "none" else norm)
    code = "\n".join(c.source for c in nbformat.read(CLAIMS["PCB-6"].notebook, as_version=4).cells
                     if c.cell_type == "code")
    accepted = re.search(r"if model not in (\(.*?\)):", code)
    assert accepted and ast.literal_eval(accepted[1]) == params.MODELS_PCB6


@pytest.mark.parametrize("value", ["a\nb", "$(id)", "../../x", "a b", "x" * 33, "é", "`id`"])
def test_run_names_are_made_of_safe_characters(value):
    """A value that a folder name cannot show safely (a newline, `$(`, /, a space, non-ASCII) is named by its hash."""
    name = runner.run_name("default", {"init": value, "steps": 5})
    assert re.fullmatch(r"default-init=#[0-9a-f]{12}-steps=5", name), name
    assert runner.run_name("default", {"gammas": [0.25, 1.0]}) == "default-gammas=[0.25,1.0]"


def test_a_cell_that_raises_is_reported_in_two_lines_and_its_notebook_kept(tmp_path):
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path)}
    r = subprocess.run(NBDEMO + ["run", "PCB-1", "-p", "n_per_class", "7000", "--force"], capture_output=True, text=True,
                       env=env, timeout=120)
    assert r.returncode != 0 and r.stderr.startswith("nbdemo: PCB-1 stopped at cell In [")  # no kernel chatter
    assert "ValueError: n_per_class=7000: fashion-mnist class 0 has only 6000" in r.stderr
    assert len(r.stderr.splitlines()) == 2 and "Traceback" not in r.stderr
    kept = [f for f in tmp_path.rglob("*") if f.is_file()]
    assert [f.name for f in kept] == ["PCB-1.failed.ipynb"] and "has only 6000" in kept[0].read_text()


def test_cli_output_piped_into_a_reader_that_stops_early_is_not_an_error():
    r = subprocess.run(" ".join(NBDEMO + ["list", "|", "head", "-1"]), shell=True, capture_output=True, text=True,
                       timeout=60)
    assert r.stdout.startswith("claim") and r.stderr == ""


def _snapshot():
    return {p.name: p.read_bytes() for p in (ROOT / "notebooks").glob("*.ipynb")}


def _has_child(pid):
    """Whether process `pid` has started a child process (the runner's kernel); /proc lists them per thread."""
    for f in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            if f.read_text().split():
                return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_leaves_nothing_behind(tmp_path, short_tmpdir, sig):
    before = _snapshot()  # $TMPDIR: where the kernel's connection file goes; it must be gone too
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path), "TMPDIR": str(short_tmpdir)}
    # Ctrl-C as in a terminal. A shell starts a background job with SIGINT ignored, and a CI job may run the
    # tests as one: the child would inherit that.
    p = subprocess.Popen(NBDEMO + ["run", "TFD-1", "-p", "steps", "100000"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not _has_child(p.pid) and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(15)  # well inside the notebook's training
    p.send_signal(sig)
    _, err = p.communicate(timeout=120)
    assert p.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143}[sig] and "interrupted" in err
    assert not [f for f in tmp_path.rglob("*") if f.is_file()]
    assert not [f for f in short_tmpdir.rglob("*") if f.suffix == ".json" or f.name.startswith("nbdemo-kernel-")]
    assert _snapshot() == before


def test_rerun_gives_identical_verdict(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    small = {"steps": 200, "n_eval": 500, "width": 64}
    out, first = runner.run(TFD1, overrides=small, log=lambda *_: None)
    papermill = nbformat.read(out, as_version=4).metadata["papermill"]
    assert papermill["duration"] and not {"input_path", "output_path"} & set(papermill)  # this machine's paths
    Path(out).unlink()
    second = runner.run(TFD1, overrides=small, log=lambda *_: None)[1]
    assert first["verdict"] == second["verdict"] and first["verdict"]["rows"]


def test_corrupted_or_truncated_results_count_as_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    path = runner.output_path(TFD1, "paper")
    path.parent.mkdir(parents=True)
    for junk in ["", '{"cells": [', "\x00\x01 not json"]:
        path.write_text(junk)
        assert runner.latest(TFD1, "paper") is None


def test_divergence_is_an_inconclusive_run_with_its_step_not_a_crash(tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "BUILD", tmp_path)
    verdict = runner.run(TFD1, overrides={"lr": 1e4, "steps": 200, "n_eval": 500, "width": 64},
                         log=lambda *_: None)[1]["verdict"]
    finite = next(r for r in verdict["rows"] if r["name"] == "training stayed finite")
    assert verdict["outcome"] == INCONCLUSIVE and finite["kind"] == "requirement" and not finite["ok"]
    assert finite["measured"].startswith("diverged at step")


@pytest.mark.parametrize("classes", ["[0, 12]", "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10]", "[-1, 2]"])
def test_classes_that_the_dataset_lacks_are_refused(classes):
    with pytest.raises(params.ParameterError, match="does not fit fashion-mnist, which has classes 0..9"):
        params.resolve(PCB1, "default", {"classes": classes})


def test_steps_0_is_the_untrained_network_and_huge_steps_run_with_force():
    assert params.resolve(TFD1, "default", {"steps": 0})[0] == {"steps": 0}
    assert params.resolve(TFD1, "default", {"steps": 10 ** 8}, force=True)[0] == {"steps": 10 ** 8}


@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_gpu_on_the_local_cluster_of_a_machine_without_one_is_refused(nbdemo_cli, tmp_path):
    _refused_in_one_line(*nbdemo_cli(["sweep", "MLI-7", "--seeds", "0", "--gpu"]),
                         "--gpu: torch sees no CUDA device here", tmp_path)


def test_long_values_are_hashed_in_run_names():
    """A 300-character value made `OSError: File name too long`; each long value is a short hash in the name."""
    a, b = (runner.run_name("default", {"init": c * 300, "steps": 5}) for c in "ab")
    assert a != b and len(a) < 80 and a.startswith("default-init=#") and a.endswith("-steps=5")
    assert runner.run_name("default", {"steps": 5}) == "default-steps=5"
    many = {f"conv{i}_channels": 2 ** i for i in range(40)}  # a profile that sets many parameters (st-VGG's)
    a, b = runner.run_name("paper", many), runner.run_name("paper", {**many, "conv0_channels": 3})
    assert a != b and len(a) < 80 and a.startswith("paper-#")


def test_an_unreachable_scheduler_is_reported_in_one_line_within_40_s(tmp_path):
    env = {**os.environ, "NBDEMO_BUILD": str(tmp_path / "build"), "NBDEMO_RESULTS": str(tmp_path / "results")}
    t0 = time.time()
    r = subprocess.run(NBDEMO + ["sweep", "MLI-7", "--seeds", "0", "--scheduler", "tcp://127.0.0.1:1"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert time.time() - t0 < 40
    _refused_in_one_line(r.returncode, r.stderr, "cannot connect to tcp://127.0.0.1:1 within 10 s", tmp_path)
