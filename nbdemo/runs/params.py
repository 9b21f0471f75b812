"""A claim's parameters: its notebook's `parameters` cell, its named profiles, overrides, and their validation.

Every function takes a `Claim` (`nbdemo.claims.registry.get` turns an id into one). `resolve(claim, profile, overrides)` is
what a run uses: the profile's overrides, then the caller's, checked (names, types, allowed values, sizes) before
anything runs; a bad one raises `ParameterError` with one line that names it. This module imports neither torch nor
nbformat, so that the command line refuses bad input in well under a second.
"""
import ast
import json
import math
import os
import re
from pathlib import Path

from nbdemo.ml.catalog import DATASETS, PRECISIONS
from nbdemo.runs import safe

PROFILES = Path(__file__).resolve().parents[1] / "profiles"
# Keys of a profile file that are texts, not profiles: what the `control` profile is and why it must fail the checks,
# or why the claim has no control (see nbdemo.runs.evidence).
CONTROL_TEXTS = ("control about", "control untested", "no control")
PROFILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]*", re.ASCII)  # also a folder's name: results/<profile>/
MAX_PROFILE_BYTES, MAX_VALUE_BYTES = 2 ** 20, 2 ** 16  # a profile file (the largest has 3 KB), a -p value


class ParameterError(ValueError):
    """A parameter that the notebook does not have, of the wrong type, or with an impossible value."""


def defaults(claim):
    """The notebook's parameters cell (its default profile), as {name: literal}. The notebook is read as the JSON
    it is (nbformat takes seconds to import)."""
    try:
        nb = json.loads(claim.notebook.read_text())
        cells = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ParameterError(f"{claim.notebook} cannot be read as a notebook: {e}") from None
    if len(cells) != 1:
        raise ParameterError(f"{claim.id}: the notebook needs exactly one cell tagged 'parameters'")
    source = cells[0]["source"]
    values = {}
    for node in ast.parse(source if isinstance(source, str) else "".join(source)).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            raise ParameterError(f"{claim.id}: the parameters cell may only hold `name = literal` lines")
        values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def profile_file(claim):
    """The mapping in nbdemo/profiles/<CLAIM>.yml ({} when there is none)."""
    path = PROFILES / f"{claim.id}.yml"
    try:
        named = (safe.yaml_load(path.read_text(), str(path), MAX_PROFILE_BYTES) if path.exists() else None) or {}
    except (OSError, UnicodeDecodeError) as e:
        raise ParameterError(f"{path} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    except safe.Unreadable as e:
        raise ParameterError(str(e)) from None
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
    bad = [k for k in named if not (isinstance(k, str) and PROFILE_NAME.fullmatch(k))]
    if bad:
        raise ParameterError(f"{PROFILES / f'{claim.id}.yml'}: profile name {bad[0]!r} is not lower-case letters, "
                             "digits, - and _ (it names a folder)")
    return {"default": {}, **named}


# ---------------------------------------------------------------- the rules

def _int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def integer(low, most=None, why=None):
    """An integer >= low; with `most`, one above it is refused unless --force (`why`: what makes it too big)."""
    rule = (lambda v: _int(v) and v >= low, f"an integer >= {low}")
    return rule if most is None else (*rule, (most, why))


def number(test, what):
    return (lambda v: _number(v) and test(v), what)


def each(rule, empty=False, distinct=False):
    """A rule for a list whose items each follow `rule` (and that is not empty, unless `empty`; whose items differ, with
    `distinct`); an upper bound of `rule` bounds every item."""
    test, what, *most = rule
    return (lambda v: isinstance(v, list) and (empty or len(v) > 0) and all(test(x) for x in v)
            and (not distinct or len(set(v)) == len(v)),
            f"a {'' if empty else 'non-empty '}list{' of distinct items' if distinct else ''}, each {what}", *most)


def choice(*names):
    return (lambda v: v in names, f"one of {', '.join(map(repr, names))}")


FLAG = (lambda v: isinstance(v, bool), "true or false")
RATE = number(lambda v: v > 0, "a number > 0")
NONNEGATIVE = number(lambda v: v >= 0, "a number >= 0")
AT_LEAST_1 = number(lambda v: v >= 1, "a number >= 1")
FRACTION = number(lambda v: 0 < v <= 1, "a number in (0, 1]")
PROBABILITY = number(lambda v: 0 <= v < 1, "a number in [0, 1)")
ANY_NUMBER = number(lambda v: True, "a number")
MAX_STEPS = 10 ** 7
STEPS = integer(0, MAX_STEPS, "ten million steps are days of training on any machine")
INTERVAL = integer(1, MAX_STEPS, "an interval of steps longer than any run")
WIDTH = integer(1, 2 ** 14, "a 16,384 x 16,384 weight matrix takes 1 GiB, 3 with its gradient and momentum; "
                            "the widest layer of any profile has 2,048 units")
DEPTH = integer(1, 1000, "1,000 layers 512 wide hold 1 GiB of weights; the deepest network of any profile has 10")
MODELS = integer(1, 1000, "an ensemble holds its networks in memory side by side; the largest of any profile has 100")
SAMPLES = integer(1, 60_000, "the largest training split of any dataset here has 60,000 images")
POINTS = integer(1, 10 ** 6, "each point is evaluated and kept; the most of any profile is 10,001")
INPUT = (27_648, "the largest input here, an STL-10 image, has 27,648 values")  # principal components, coordinates
CLASSES = (lambda v: isinstance(v, list) and len(v) > 0 and all(_int(c) for c in v) and len(set(v)) == len(v),
           "a non-empty list of distinct integers (classes of the dataset)")
CUDA = re.compile(r"cuda(?::(0|[1-9][0-9]{0,3}))?", re.ASCII)
# The choices of the notebooks' string parameters, each where the code that reads it accepts exactly these (a test
# holds them to it): init (nbdemo.papers.pcb.networks.init_variances), loss (pcb.networks.LOSSES), model (PCB-6's
# notebook), norms (TFD-6's notebook, "none" for nbdemo.ml.models.MLP's norm=None).
INITS, LOSSES, MODELS_PCB6, NORMS = ("glorot", "balanced"), ("mse", "ce"), ("mlp", "st-vgg"), ("none", "bn", "norm1")

RULES = {  # parameter name (or "CLAIM:name", for one claim's) -> (test, what is allowed[, (most, why)]): the valid
    # range of each parameter of every notebook. A value over `most` is refused unless --force.
    **dict.fromkeys(("steps", "epochs", "cnn_steps", "linear_steps", "steps_easy", "steps_regime", "real_epochs",
                     "whiten_epochs"), STEPS),
    **dict.fromkeys(("record_every", "snapshot_every"), INTERVAL),
    **dict.fromkeys(("width", "cnn_hidden", "linear_width"), WIDTH),
    **dict.fromkeys(("widths", "cnn_channels"), each(WIDTH)),
    **dict.fromkeys(("depth", "blocks", "linear_depth", "depth_regime", "depth_shallow"), DEPTH),
    **dict.fromkeys(("depths", "layers"), each(DEPTH)),
    **dict.fromkeys(("n_models", "n_mlp_models"), MODELS),
    **dict.fromkeys(("n_per_class", "n_binary_per_class", "n_whiten_per_class", "n_train", "n_test", "n_eval",
                     "batch_size", "k_neighbours"), SAMPLES),
    **dict.fromkeys(("n_alphas", "n_alphas_far", "n_angles", "n_radii", "n_radii_far", "n_starts", "n_inits",
                     "max_shuffles"), POINTS),
    "n_classes": integer(2, 1000, "a synthetic dataset's classes; the most of any profile is 5"),
    "record_early": integer(0, 1000, "log-spaced records before the first regular one, each a pass over the data; "
                                     "the most of any profile is 12"),  # PFC-2; 0: none
    **dict.fromkeys(("min_decay", "zca_keep"), FRACTION),  # PCB-2: Eq. 10's decay level; PCB-4: ZCA's whitened variance kept
    "projections": each(integer(1, *INPUT)),
    "dim": integer(1, 10 ** 5, "a synthetic input of 100,000 values; the largest of any profile has 10,000"),
    "MLI-9:dim": integer(1, 400, "T is a dim x dim x dim tensor of float64 summed over six permutations: "
                                 "dim = 400 takes 3 GiB"),
    "downsample": integer(1, 96, "the largest image here, STL-10's, is 96 pixels wide"),
    "cnn_kernels": each(integer(1, 96, "the largest image here, STL-10's, is 96 pixels wide")),
    "layer": integer(1),
    "power": integer(1),  # r of the r-homogeneous model (MLI-7; its control is r = 1, a linear model)
    **dict.fromkeys(("lr", "cnn_lr", "real_lr", "lr_easy", "lr_linear", "lr_regime", "lr_whitened", "gamma",
                     "gamma_between", "gamma_escape", "beta", "beta_regime", "beta_shallow", "delta", "eps",
                     "whiten_eps", "zca_eps", "learned_loss", "amplify_factor", "gap_ratio"), RATE),
    **dict.fromkeys(("r_max", "r_far"), AT_LEAST_1),
    **dict.fromkeys(("weight_decay", "lam", "lam_W", "sigma"), NONNEGATIVE),
    **dict.fromkeys(("gammas", "betas"), each(RATE)),
    **dict.fromkeys(("lambdas", "lams"), each(NONNEGATIVE)),
    **dict.fromkeys(("classes", "classes_2", "classes_3", "binary_classes"), CLASSES),
    **dict.fromkeys(("momentum", "conv_dropout", "fc_dropout"), PROBABILITY),
    "momenta": each(PROBABILITY),
    "amplify_frac": FRACTION,
    "lr_milestones": each(FRACTION, empty=True),
    "z0": ANY_NUMBER,
    **dict.fromkeys(("amplify_test", "operations", "shuffle_labels", "torch_compile", "whiten"), FLAG),
    **dict.fromkeys(("train_all_layers", "whiten_inputs"), FLAG),  # PCB-2, PCB-7/10: their controls
    **dict.fromkeys(("batch_norm", "avg_pool"), FLAG),  # PFC-4: Table I's blocks without them
    "project_to": integer(0, *INPUT),  # PCB-3's control: the first K principal coordinates (0: none)
    "second_arm": choice("whitened", "permuted"),  # PCB-7's control: (c)'s second pair on permuted pixels
    "amplify_directions": choice("principal", "random"),  # PCB-9's control: random directions amplified
    "seed": (lambda v: _int(v) and 0 <= v < 2 ** 32, "an integer in [0, 2**32) (numpy's seeds)"),
    "dataset": choice(*DATASETS),
    "precision": choice(*PRECISIONS),
    "init": choice(*INITS),
    "loss": choice(*LOSSES),
    "model": choice(*MODELS_PCB6),
    "norms": each(choice(*NORMS), distinct=True),
    "bias": choice("all", "last", "none"),  # nbdemo.ml.models.MLP's bias
    "scheme": choice("normal", "homogeneous"),  # MLI-4/5: the interpolation (metrics.interpolate); their controls' "homogeneous"
    "MLI-3:output_bias_degree": integer(0, 64, "the deepest net of any profile has 10 layers: a "
                                               "degree beyond 64 tests nothing a lower one does not"),  # the homogeneous arm's output bias degree (0: the layer's; control: 2)
    "window_steps": STEPS,  # TFD-2/4's controls: score steps 0..window_steps, not the run's own first phase (0)
    "norm": choice(*NORMS),  # TFD-2's control: nbdemo.ml.models.MLP's norm ("none" for norm=None)
    "device": (lambda v: isinstance(v, str) and (v in ("auto", "cpu", "mps") or CUDA.fullmatch(v) is not None),
               "auto, cpu, cuda, cuda:N or mps"),
}


# Training images per class of each dataset read from files (its smallest class's, for MNIST; MNIST-1D is generated):
# what `n_per_class` and its kin may take from one class.
TRAIN_PER_CLASS = {"fashion-mnist": 6000, "mnist": 5421, "cifar10": 5000, "cifar100": 500, "stl10": 500}
PER_CLASS = ("n_per_class", "n_binary_per_class", "n_whiten_per_class")
# The size parameters of the networks, for `weight_bytes`: widths (units or channels), depths (layers or blocks),
# models trained side by side, and the input's size where no dataset gives it.
WIDTHS = ("width", "widths", "cnn_hidden", "linear_width", "cnn_channels")
DEPTHS = ("depth", "depths", "blocks", "linear_depth", "layers", "depth_regime", "depth_shallow")
ENSEMBLES = ("n_models", "n_mlp_models")
SIZES = WIDTHS + DEPTHS + ENSEMBLES + ("dataset", "dim")


def _largest(params, names, none=1):
    values = [x for n in names if n in params for x in (params[n] if isinstance(params[n], list) else [params[n]])]
    return max(values, default=none)


def weight_bytes(params):
    """An upper estimate of the memory a claim's networks take: its largest ensemble of networks as deep and as wide
    as its largest depth and width, in float32, with a gradient and a momentum per weight (x 3). The largest of any
    profile is 6 GiB (PCB-7's paper profile); depth 1,000 at width 16,384 is 3,000 GiB."""
    width = _largest(params, WIDTHS, none=0)
    inputs = math.prod(DATASETS[params["dataset"]][0]) if params.get("dataset") in DATASETS else params.get("dim", 1)
    return 12 * _largest(params, ENSEMBLES) * (_largest(params, DEPTHS) * width ** 2 + inputs * width)


def memory():
    """This machine's memory in bytes (infinite where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return math.inf


def rule(claim, name):
    """The rule of a claim's parameter (its own, "CLAIM:name", else the shared one), or None."""
    return RULES.get(f"{claim.id}:{name}") or RULES.get(name)


# ---------------------------------------------------------------- checking values

def _coerce(name, value, default):
    """Parse a command-line string as YAML (`safe.yaml_load`: plain numbers only, no alias, bounded) and check it
    against the type of the default value."""
    if isinstance(value, str) and not isinstance(default, str):
        try:
            value = safe.yaml_load(value, None, MAX_VALUE_BYTES, max_depth=8)
        except safe.Unreadable as e:
            raise ParameterError(f"parameter {name!r}: cannot read {short(value)} as a value: {e.why}") from None
    if default is None:
        return value
    want = type(default)
    ok = isinstance(value, want) and not (isinstance(value, bool) and want is not bool)
    if want is float and _int(value):
        try:
            value, ok = float(value), True
        except OverflowError:  # an integer beyond any float
            value, ok = math.inf, True
    if not ok:
        raise ParameterError(f"parameter {name!r} must be {want.__name__} (default {default!r}), got {short(value)}")
    if not _finite(value):
        raise ParameterError(f"parameter {name!r} = {short(value)} is impossible: a number must be finite")
    return value


def short(value):
    """A value as an error message shows it: its repr, cut at 80 characters."""
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}... ({len(text):,} characters)"


def _finite(value):
    """No NaN or infinity anywhere in a value (numbers inside lists too)."""
    if isinstance(value, (list, tuple)):
        return all(map(_finite, value))
    return not isinstance(value, float) or math.isfinite(value)


def _over(value, most):
    return any(_over(x, most) for x in value) if isinstance(value, list) else value > most


def validate(claim, overrides, force=False):
    """Check override names, types and values against the notebook's parameters and `RULES`, per-class counts against
    the dataset's (`TRAIN_PER_CLASS`), and sizes, counts, step counts and the networks' memory (`weight_bytes`, against
    this machine's) against their upper bounds unless `force`; return the full parameter dict."""
    params = defaults(claim)
    unknown = sorted(set(overrides) - set(params))
    if unknown:
        raise ParameterError(f"{claim.id} has no parameter {', '.join(map(short, unknown))}; "
                             f"its parameters are: {', '.join(sorted(params))}")
    for name, value in overrides.items():
        params[name] = _coerce(name, value, params[name])
    for name, value in params.items():
        test, allowed, *most = rule(claim, name) or (None, "")
        if test and not test(value):
            raise ParameterError(f"parameter {name!r} = {short(value)} is impossible: it must be {allowed}")
        if most and not force and _over(value, most[0][0]):
            raise ParameterError(f"parameter {name!r} = {short(value)} is over {most[0][0]:,} ({most[0][1]}): "
                                 "give --force to run it")
    for name in [n for n in params if rule(claim, n) is CLASSES and "dataset" in params]:
        k = DATASETS[params["dataset"]][1]
        if len(params[name]) > k or not all(0 <= c < k for c in params[name]):
            raise ParameterError(f"parameter {name!r} = {params[name]} does not fit {params['dataset']}, "
                                 f"which has classes 0..{k - 1}")
    per_class = TRAIN_PER_CLASS.get(params.get("dataset"))
    for name in [n for n in PER_CLASS if n in params and per_class and not force]:  # --force: the notebook says it
        if params[name] > per_class:
            raise ParameterError(f"parameter {name!r} = {params[name]:,} is more than {params['dataset']} has: "
                                 f"{per_class:,} training images per class")
    if not force and (need := weight_bytes(params)) > (have := memory()):
        raise ParameterError(f"parameters {', '.join(f'{n}={short(params[n])}' for n in SIZES if n in params)}: "
                             f"the networks' weights, gradients and momentum take about {need / 2 ** 30:,.0f} GiB, "
                             f"more than this machine's {have / 2 ** 30:,.0f} GiB: give --force to run it")
    if "layer" in params and "depth" in params and params["layer"] >= params["depth"]:
        raise ParameterError(f"parameter 'layer' = {params['layer']} is not a hidden layer of a network of depth "
                             f"{params['depth']}: give 1..{params['depth'] - 1}")
    kernels, channels = params.get("cnn_kernels"), params.get("cnn_channels")
    if kernels is not None and channels is not None and len(kernels) != len(channels):
        raise ParameterError(f"parameters 'cnn_kernels' and 'cnn_channels' give {len(params['cnn_kernels'])} and "
                             f"{len(params['cnn_channels'])} convolutions: give one kernel size per convolution")
    return params


def resolve(claim, profile="default", overrides=None, force=False):
    """Profile overrides, then command-line overrides, validated (`force`: sizes, counts and step counts over their
    bounds too). Returns (changed parameters, all parameters)."""
    named = profiles(claim)
    if profile not in named:
        raise ParameterError(f"{claim.id} has no profile {short(profile)}; its profiles are: {', '.join(named)}")
    changed = {**named[profile], **(overrides or {})}
    full = validate(claim, changed, force)
    return {k: full[k] for k in changed}, full
