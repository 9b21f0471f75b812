"""A claim's parameters: its notebook's `parameters` cell, its named profiles, overrides, and their validation.

Every function takes a `Claim` (`nbdemo.claims.registry.get` turns an id into one). `resolve(claim, profile, overrides)` is
what a run uses: the profile's overrides, then the caller's, checked (names, types, allowed values) before anything
runs; a bad one raises `ParameterError` with one line that names it.
"""
import ast
import math
import re
from pathlib import Path

import nbformat
import yaml

from nbdemo.ml.data import DATASETS
from nbdemo.ml.train import PRECISIONS

PROFILES = Path(__file__).resolve().parents[1] / "profiles"
# Keys of a profile file that are texts, not profiles: what the `control` profile is and why it must fail the checks,
# or why the claim has no control (see nbdemo.runs.evidence).
CONTROL_TEXTS = ("control about", "no control")


class ParameterError(ValueError):
    """A parameter that the notebook does not have, of the wrong type, or with an impossible value."""


def defaults(claim):
    """The notebook's parameters cell (its default profile), as {name: literal}."""
    nb = nbformat.read(claim.notebook, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ParameterError(f"{claim.id}: the notebook needs exactly one cell tagged 'parameters'")
    values = {}
    for node in ast.parse(cells[0].source).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ParameterError(f"{claim.id}: the parameters cell may only hold `name = literal` lines")
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def profile_file(claim):
    """The mapping in nbdemo/profiles/<CLAIM>.yml ({} when there is none)."""
    path = PROFILES / f"{claim.id}.yml"
    try:
        named = (yaml.safe_load(path.read_text()) if path.exists() else None) or {}
    except yaml.YAMLError as e:
        raise ParameterError(f"{path} is not valid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(named, dict):
        raise ParameterError(f"{path}: a profile file is a mapping of profile names to overrides")
    return named


def profiles(claim):
    """Named profiles of overrides from nbdemo/profiles/<CLAIM>.yml; "default" is the parameters cell itself."""
    named = {k: v for k, v in profile_file(claim).items() if k not in CONTROL_TEXTS}
    bad = [k for k, v in named.items() if not isinstance(v, dict)]
    if bad:
        raise ParameterError(f"{PROFILES / f'{claim.id}.yml'}: a profile is a mapping of parameter names to values; "
                             f"{', '.join(map(str, bad))} is not")
    return {"default": {}, **named}


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _each(rule, empty=False):
    """A rule for a list whose items each follow `rule` (and that is not empty, unless `empty`)."""
    test, what = rule
    return (lambda v: (empty or len(v) > 0) and all(_number(x) and test(x) for x in v),
            f"a {'' if empty else 'non-empty '}list, each {what}")


COUNT = (lambda v: v > 0, "an integer > 0")
STEPS = (lambda v: v >= 0, "an integer >= 0 (0: the untrained network)")
RATE = (lambda v: v > 0, "a number > 0")
NONNEGATIVE = (lambda v: v >= 0, "a number >= 0")
FRACTION = (lambda v: 0 < v <= 1, "a number in (0, 1]")
MOMENTUM = (lambda v: 0 <= v < 1, "a number in [0, 1)")
CLASSES = (lambda v: len(v) > 0 and all(isinstance(c, int) and not isinstance(c, bool) for c in v)
           and len(set(v)) == len(v), "a non-empty list of distinct integers (classes of the dataset)")
# Parameters that count steps or epochs of training: above MAX_STEPS a run is refused unless the user asks for it.
STEP_COUNTS = ("steps", "epochs", "cnn_steps", "linear_steps", "steps_easy", "steps_regime", "real_epochs",
               "whiten_epochs")
MAX_STEPS = 10 ** 7

RULES = {  # parameter name -> (test, what is allowed): the valid range of each parameter of every notebook
    **dict.fromkeys(STEP_COUNTS, STEPS),
    **dict.fromkeys(("width", "depth", "blocks", "batch_size", "dim", "record_every", "snapshot_every", "cnn_hidden",
                     "linear_width", "linear_depth", "depth_regime", "depth_shallow", "downsample", "k_neighbours"),
                    COUNT),
    **dict.fromkeys(("lr", "cnn_lr", "real_lr", "lr_easy", "lr_linear", "lr_regime", "lr_whitened", "gamma",
                     "gamma_between", "gamma_escape", "beta", "beta_regime", "delta", "eps",
                     "whiten_eps", "zca_eps", "learned_loss", "amplify_factor"), RATE),
    **dict.fromkeys(("weight_decay", "lam", "lam_W", "sigma"), NONNEGATIVE),
    **dict.fromkeys(("depths", "widths", "layers", "projections", "cnn_channels"), _each(COUNT)),
    **dict.fromkeys(("gammas", "betas"), _each(RATE)),
    **dict.fromkeys(("lambdas", "lams"), _each(NONNEGATIVE)),
    **dict.fromkeys(("classes", "classes_2", "classes_3", "binary_classes"), CLASSES),
    "momentum": MOMENTUM,
    "momenta": _each(MOMENTUM),
    "amplify_frac": FRACTION,
    "lr_milestones": _each(FRACTION, empty=True),
    "seed": (lambda v: v >= 0, "an integer >= 0"),
    "seeds": (lambda v: len(v) > 0 and all(isinstance(s, int) and s >= 0 for s in v), "a non-empty list of integers >= 0"),
    "dataset": (lambda v: v in DATASETS, f"one of {sorted(DATASETS)}"),
    "precision": (lambda v: v in PRECISIONS, f"one of {', '.join(PRECISIONS)}"),
    "device": (lambda v: re.fullmatch(r"auto|cpu|mps|cuda(:\d+)?", v) is not None, "auto, cpu, cuda, cuda:N or mps"),
}  # and every n_* (a number of samples, models, points, ...): COUNT


def _coerce(name, value, default):
    """Parse a command-line string as YAML and check it against the type of the default value."""
    if isinstance(value, str) and not isinstance(default, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError:
            raise ParameterError(f"parameter {name!r}: cannot read {value!r} as a value") from None
    if isinstance(default, float) and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if default is None:
        return value
    want = type(default)
    ok = isinstance(value, want) and not (isinstance(value, bool) and want is not bool)
    if want is float and isinstance(value, int) and not isinstance(value, bool):
        value, ok = float(value), True
    if not ok:
        raise ParameterError(f"parameter {name!r} must be {want.__name__} (default {default!r}), got {value!r}")
    if not _finite(value):
        raise ParameterError(f"parameter {name!r} = {value!r} is impossible: a number must be finite")
    return value


def _finite(value):
    """No NaN or infinity anywhere in a value (numbers inside lists too)."""
    if isinstance(value, (list, tuple)):
        return all(map(_finite, value))
    return not isinstance(value, float) or math.isfinite(value)


def validate(claim, overrides, force=False):
    """Check override names, types and values against the notebook's parameters (and `RULES`), and step counts
    against `MAX_STEPS` unless `force`; return the full parameter dict."""
    params = defaults(claim)
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise ParameterError(f"{claim.id} has no parameter {', '.join(map(repr, unknown))}; "
                             f"its parameters are: {', '.join(sorted(params))}")
    for name, value in overrides.items():
        params[name] = _coerce(name, value, params[name])
    for name, value in params.items():
        test, allowed = RULES.get(name) or (COUNT if name.startswith("n_") else (None, ""))
        if test and not test(value):
            raise ParameterError(f"parameter {name!r} = {value!r} is impossible: it must be {allowed}")
        if name in STEP_COUNTS and value > MAX_STEPS and not force:
            raise ParameterError(f"parameter {name!r} = {value!r} is over {MAX_STEPS:,}: give --force to run it")
    for name in [n for n, rule in RULES.items() if rule is CLASSES and n in params and "dataset" in params]:
        k = DATASETS[params["dataset"]][1]
        if len(params[name]) > k or not all(0 <= c < k for c in params[name]):
            raise ParameterError(f"parameter {name!r} = {params[name]} does not fit {params['dataset']}, "
                                 f"which has classes 0..{k - 1}")
    return params


def resolve(claim, profile="default", overrides=None, force=False):
    """Profile overrides, then command-line overrides, validated (`force`: step counts over `MAX_STEPS` too).
    Returns (changed parameters, all parameters)."""
    named = profiles(claim)
    if profile not in named:
        raise ParameterError(f"{claim.id} has no profile {profile!r}; its profiles are: {', '.join(named)}")
    changed = {**named[profile], **(overrides or {})}
    full = validate(claim, changed, force)
    return {k: full[k] for k in changed}, full
