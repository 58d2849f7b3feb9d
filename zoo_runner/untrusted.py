"""Reading files strangers wrote (a repo's config.json, config.yaml, model_index.json, ...).

Each file is read up to a size limit, decoded as UTF-8, checked for nesting depth with a cheap
scan *before* it is parsed (``json`` and PyYAML recurse, so 100 KB of ``[`` is a RecursionError),
then parsed; YAML with the safe loader only, its aliases bounded (no "billion laughs") and its
values turned into JSON types (dates as ISO strings), since the config travels to the model
process as JSON. Anything wrong is an :class:`~zoo_runner.exceptions.UntrustedFile`: one row for
that model, never an exception that ends a run.

NaN and Infinity are accepted in JSON: Python writes them (``json.dumps`` allows them by default,
and transformers saves configs that way), so real configs carry them; ``allow_nan=False`` refuses them.
"""

from __future__ import annotations

import json
import os
import re
from itertools import accumulate
from typing import Any

from .exceptions import UntrustedFile
from .statuses import Reason

MAX_BYTES = 5 * 1024 * 1024  # the largest real configs (id2label of ImageNet-21k) are about 1 MB
MAX_YAML_BYTES = 1024 * 1024  # pyannote's config.yaml is about 1 KB; the pure-Python scan is slow
MAX_DEPTH = 64  # real configs nest 5 deep at most
MAX_YAML_VALUES = 100_000  # values of a YAML document once its aliases are expanded

_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # unrolled: linear, no catastrophic backtracking
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DELTA = {"[": 1, "{": 1, "]": -1, "}": -1}


def read_limited(path: str | os.PathLike[str], max_bytes: int = MAX_BYTES, name: str | None = None) -> bytes:
    """The file's bytes, refusing it (without reading it whole) when it is over ``max_bytes``."""
    name = name or os.path.basename(os.fspath(path))
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        size = os.path.getsize(path)
        raise UntrustedFile(
            name,
            f"is {size / 2**20:.1f} MB, over Zoo's limit of {max_bytes / 2**20:g} MB for a repo's config files",
            reason=Reason.TOO_LARGE,
        )
    return data


def _text(data: bytes | str, name: str, max_bytes: int) -> str:
    if len(data) > max_bytes:
        raise UntrustedFile(
            name,
            f"is {len(data) / 2**20:.1f} MB, over Zoo's limit of {max_bytes / 2**20:g} MB for a repo's config files",
            reason=Reason.TOO_LARGE,
        )
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UntrustedFile(name, f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None


def json_depth(text: str) -> int:
    """How deep brackets nest in JSON text, strings skipped; C-speed scans, no recursion."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))
    return max(accumulate(map(_DELTA.__getitem__, brackets)), default=0)


def _refuse_constant(value: str) -> Any:
    raise ValueError(f"{value} is not allowed here")


def parse_json(
    data: bytes | str,
    name: str = "file",
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    allow_nan: bool = True,
) -> Any:
    text = _text(data, name, max_bytes)
    if json_depth(text) > max_depth:
        raise UntrustedFile(name, f"nests deeper than Zoo's limit of {max_depth} levels")
    try:
        return json.loads(text) if allow_nan else json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, a 5,000-digit integer, NaN refused
        raise UntrustedFile(name, f"is not valid JSON: {str(exc)[:200]}") from None


def load_json(
    path: str | os.PathLike[str],
    max_bytes: int = MAX_BYTES,
    max_depth: int = MAX_DEPTH,
    allow_nan: bool = True,
    name: str | None = None,
) -> Any:
    name = name or os.path.basename(os.fspath(path))
    return parse_json(read_limited(path, max_bytes, name), name, max_bytes, max_depth, allow_nan)


_YAML_OPEN = ("BlockMappingStartToken", "BlockSequenceStartToken", "FlowMappingStartToken", "FlowSequenceStartToken")
_YAML_CLOSE = ("BlockEndToken", "FlowMappingEndToken", "FlowSequenceEndToken")


# HyperPyYAML's tags (speechbrain's hyperparams.yaml) as plain data, never as objects: ``!new:a.B`` with
# arguments becomes ``{"!new": "a.B", "kwargs": {...}}`` (or ``"args": [...]``), ``!ref <x>`` becomes
# ``{"!ref": "<x>"}``; nothing is imported, called or included here (a builder decides what, if anything,
# a model process may instantiate from them).
HYPERPYYAML_OBJECT_TAGS = ("!new:", "!name:", "!apply:", "!include:")
HYPERPYYAML_SCALAR_TAGS = ("!ref", "!copy", "!PLACEHOLDER", "!tuple")
_LOADER: Any = None


def _hyperpyyaml_node(loader: Any, tag: str, node: Any) -> dict[str, Any]:
    import yaml

    kind, _, target = tag.partition(":")
    out: dict[str, Any] = {kind: target} if target else {kind: True}
    if isinstance(node, yaml.MappingNode):
        out["kwargs"] = loader.construct_mapping(node, deep=True)
    elif isinstance(node, yaml.SequenceNode):
        out["args"] = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_scalar(node)
        if value not in ("", None):
            out["args" if target else kind] = [value] if target else value
    return out


def _yaml_loader() -> Any:
    global _LOADER
    if _LOADER is None:
        import yaml

        base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        _LOADER = type("ZooSafeLoader", (base,), {})
        for prefix in HYPERPYYAML_OBJECT_TAGS:
            _LOADER.add_multi_constructor(
                prefix, lambda ld, suffix, node, p=prefix: _hyperpyyaml_node(ld, p + suffix, node)
            )
        for tag in HYPERPYYAML_SCALAR_TAGS:
            _LOADER.add_constructor(tag, lambda ld, node, t=tag: _hyperpyyaml_node(ld, t, node))
    return _LOADER


def yaml_depth(text: str, max_depth: int) -> int:
    """How deep collections nest in YAML text, from its tokens (the scanner does not recurse)."""
    import yaml

    depth = peak = 0
    for token in yaml.scan(text, Loader=_yaml_loader()):
        kind = type(token).__name__
        if kind in _YAML_OPEN:
            depth += 1
            peak = max(peak, depth)
            if peak > max_depth:
                break
        elif kind in _YAML_CLOSE:
            depth -= 1
    return peak


def _count_values(value: Any, name: str, max_values: int, max_depth: int) -> None:
    """Walk the loaded document as JSON would (aliases expanded); refuse it past the limits
    (a cyclic alias expands forever, so it is refused too)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    seen = 0
    while stack:
        item, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise UntrustedFile(name, f"expands to more than {max_values} values (YAML aliases)")
        if depth > max_depth:
            raise UntrustedFile(name, f"nests deeper than Zoo's limit of {max_depth} levels")
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, (list, tuple, set)):
            stack.extend((v, depth + 1) for v in item)


def _json_default(value: Any) -> Any:
    import datetime as dt

    if isinstance(value, (dt.date, dt.datetime)):
        return value.isoformat()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=str)
    raise TypeError(f"a {type(value).__name__} value")


def parse_yaml(
    data: bytes | str,
    name: str = "file",
    max_bytes: int = MAX_YAML_BYTES,
    max_depth: int = MAX_DEPTH,
    max_values: int = MAX_YAML_VALUES,
) -> Any:
    """A YAML document with the safe loader (no Python objects), as JSON types."""
    import yaml

    text = _text(data, name, max_bytes)
    try:
        if yaml_depth(text, max_depth) > max_depth:
            raise UntrustedFile(name, f"nests deeper than Zoo's limit of {max_depth} levels")
        value = yaml.load(text, Loader=_yaml_loader())  # the safe loader: plain data only
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        raise UntrustedFile(
            name, f"is not valid YAML: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}"
        ) from None
    _count_values(value, name, max_values, max_depth)
    try:
        return json.loads(json.dumps(value, default=_json_default))
    except (TypeError, ValueError) as exc:
        raise UntrustedFile(name, f"holds values that are not plain data ({exc})") from None


def load_yaml(
    path: str | os.PathLike[str], max_bytes: int = MAX_YAML_BYTES, max_depth: int = MAX_DEPTH, name: str | None = None
) -> Any:
    name = name or os.path.basename(os.fspath(path))
    return parse_yaml(read_limited(path, max_bytes, name), name, max_bytes, max_depth)


def load_mapping(path: str | os.PathLike[str], name: str | None = None) -> dict[str, Any]:
    """A repo's config file (JSON, or YAML by its extension) that must be a mapping."""
    name = name or os.path.basename(os.fspath(path))
    value = load_yaml(path, name=name) if os.fspath(path).endswith((".yaml", ".yml")) else load_json(path, name=name)
    if not isinstance(value, dict):
        raise UntrustedFile(name, f"is not a mapping (it holds a {type(value).__name__})")
    return value
