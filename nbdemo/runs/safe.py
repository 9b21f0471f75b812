"""One bounded reader for every YAML and JSON text that a user or the store gives: `-p` values, profile files,
results files, the history and the revisions.

Checked before anything is built or converted: the text's size, its nesting, the length of every number. YAML is
read with a reduced safe loader: no aliases (a 300-byte alias bomb would expand to gigabytes), no tags beyond the
plain ones, plain numbers only (`12`, `-3`, `0.5`, `1e-3`, `.inf`: no sexagesimal `1:20`, hex `0x10`, octal or
underscores `1_000`, which stay texts), no dates (they stay texts), and `true`/`false` as its only booleans. In
YAML and JSON alike a mapping that gives one key twice is refused. Every fault is an `Unreadable`, one line.
"""
import json
import re

import yaml

MAX_BYTES = 32 * 2 ** 20   # the most any text read here may have (a results file's bound)
MAX_DEPTH = 32             # nesting levels
MAX_DIGITS = 40            # digits of one number (2**64 has 20; 5,000 would make Python's int() refuse)


class Unreadable(ValueError):
    """A text that the bounded reader refuses: too big, too deep, an alias, a tag, a duplicate key, a long number.
    Its message is "WHAT: WHY"; `why` alone is the fault."""

    def __init__(self, what, why):
        super().__init__(f"{what}: {why}" if what else why)
        self.why = why


def _bounded(text, what, max_bytes):
    if isinstance(text, bytes):
        try:
            text = text.decode()
        except UnicodeDecodeError:
            raise Unreadable(what, "not UTF-8 text") from None
    if len(text) > max_bytes:
        raise Unreadable(what, f"{len(text):,} characters; at most {max_bytes:,} are read")
    return text


def _depth(tree, max_depth, what):
    todo = [(tree, 1)]
    while todo:
        x, depth = todo.pop()
        if depth > max_depth:
            raise Unreadable(what, f"nested deeper than {max_depth} levels")
        if isinstance(x, (dict, list)):
            todo += [(v, depth + 1) for v in (x.values() if isinstance(x, dict) else x)]


# ---------------------------------------------------------------- JSON

def _int(text):
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise Unreadable(None, f"a number of {len(text):,} digits; at most {MAX_DIGITS} are read")
    return int(text)


def _unique(pairs):
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise Unreadable(None, f"key {key[:40]!r} is given twice in one mapping")
        seen[key] = value
    return seen


def json_load(text, what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH, walk=True):
    """A JSON text as Python values; `what` names it in the one-line `Unreadable` of a fault. walk=False: the caller
    checks the nesting itself (only what Python's parser cannot read is refused here)."""
    text = _bounded(text, what, max_bytes)
    try:
        tree = json.loads(text, object_pairs_hook=_unique, parse_int=_int)
    except Unreadable as e:
        raise Unreadable(what, e.why) from None
    except json.JSONDecodeError as e:
        raise Unreadable(what, f"not valid JSON ({e.msg}: line {e.lineno} column {e.colno})") from None
    except (RecursionError, MemoryError):
        raise Unreadable(what, f"nested deeper than {max_depth} levels") from None
    except ValueError as e:  # a float literal beyond any float is inf, not an error; anything else
        raise Unreadable(what, f"cannot be read: {' '.join(str(e).split())[:200]}") from None
    if walk:
        _depth(tree, max_depth, what)
    return tree


# ---------------------------------------------------------------- YAML

INT = re.compile(r"[-+]?[0-9]+", re.ASCII)
FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?"
                   r"|[-+]?\.?(?:inf|Inf|INF)|\.?(?:nan|NaN|NAN)", re.ASCII)
BOOL = re.compile(r"true|True|TRUE|false|False|FALSE", re.ASCII)
NULL = re.compile(r"~|null|Null|NULL|", re.ASCII)


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases, merge keys, dates, YAML 1.1's numbers and booleans, or tags beyond
    null, bool, int, float, str, seq and map; nesting bounded while the document is composed."""
    yaml_implicit_resolvers = {}
    yaml_constructors = {}
    max_depth = MAX_DEPTH

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise Unreadable(None, f"an alias (*{event.anchor}) at line {event.start_mark.line + 1}: "
                                   "aliases are not read")
        self._level = getattr(self, "_level", 0) + 1
        try:
            if self._level > self.max_depth:
                raise Unreadable(None, f"nested deeper than {self.max_depth} levels")
            return super().compose_node(parent, index)
        finally:
            self._level -= 1

    def construct_int(self, node):
        text = self.construct_scalar(node)
        if not INT.fullmatch(text):
            raise Unreadable(None, f"{text[:40]!r} is not a plain integer")
        return _int(text)

    def construct_float(self, node):
        text = self.construct_scalar(node)
        if not FLOAT.fullmatch(text):
            raise Unreadable(None, f"{text[:40]!r} is not a plain number")
        if len(text) > MAX_DIGITS + 10:
            raise Unreadable(None, f"a number of {len(text):,} characters; at most {MAX_DIGITS + 10} are read")
        return float(text.replace(".inf", "inf").replace(".Inf", "inf").replace(".INF", "inf")
                     .replace(".nan", "nan").replace(".NaN", "nan").replace(".NAN", "nan"))

    def construct_bool(self, node):
        text = self.construct_scalar(node)
        if not BOOL.fullmatch(text):
            raise Unreadable(None, f"{text[:40]!r} is not true or false")
        return text.lower() == "true"

    def construct_map(self, node):
        if not isinstance(node, yaml.MappingNode):
            raise Unreadable(None, "a mapping tag on something that is not a mapping")
        out = {}
        for key_node, value_node in node.value:
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (list, dict)):
                raise Unreadable(None, f"a mapping's key is a {type(key).__name__}")
            if key in out:
                raise Unreadable(None, f"key {str(key)[:40]!r} is given twice in one mapping "
                                     f"(line {key_node.start_mark.line + 1})")
            out[key] = self.construct_object(value_node, deep=True)
        return out

    def construct_seq(self, node):
        if not isinstance(node, yaml.SequenceNode):
            raise Unreadable(None, "a sequence tag on something that is not a sequence")
        return [self.construct_object(child, deep=True) for child in node.value]


for _tag, _pattern, _first in (("bool", BOOL, "tTfF"), ("int", INT, "-+0123456789"),
                               ("float", FLOAT, "-+0123456789.inIN"), ("null", NULL, ["~", "n", "N", ""])):
    # the resolver matches from the start only: the pattern must reach the end
    _Loader.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(rf"(?:{_pattern.pattern})\Z", re.ASCII),
                                  list(_first))
for _tag, _construct in (("null", lambda self, node: None), ("bool", _Loader.construct_bool),
                         ("int", _Loader.construct_int), ("float", _Loader.construct_float),
                         ("str", yaml.SafeLoader.construct_yaml_str), ("seq", _Loader.construct_seq),
                         ("map", _Loader.construct_map)):
    _Loader.add_constructor(f"tag:yaml.org,2002:{_tag}", _construct)
_Loader.add_constructor(None, yaml.SafeLoader.construct_undefined)


def yaml_load(text, what, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH):
    """A YAML text (one document) as Python values; `what` names it in the one-line `Unreadable` of a fault."""
    text = _bounded(text, what, max_bytes)
    loader = _Loader(text)
    loader.max_depth = max_depth
    try:
        return loader.get_single_data()
    except Unreadable as e:
        raise Unreadable(what, e.why) from None
    except yaml.YAMLError as e:
        raise Unreadable(what, f"not valid YAML: {' '.join(str(e).split())[:300]}") from None
    except (RecursionError, ValueError, TypeError) as e:  # TypeError: an unhashable key
        raise Unreadable(what, f"cannot be read as YAML ({type(e).__name__})") from None
    finally:
        loader.dispose()
