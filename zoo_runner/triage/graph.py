"""A minified FX graph as data, and the standalone ``repro.py`` the parent writes from it.

The model process describes its graph (:func:`describe_graph`): placeholders, ``call_function``
nodes on ATen overloads or Python's operators, and literal arguments; its tensors (weights and
inputs alike) go in ``repro.safetensors``. A failure that only shows when dynamo builds a frame's
guards (after the backend returned) is kept at torch level instead (``"level": "torch"``): the graph
dynamo handed the backend, whose functions must be in :data:`TORCH_FUNCTIONS` and methods in
:data:`TENSOR_METHODS` (named lists, nothing resolved by pattern), called twice when the failure
comes at a recompile (``first_call``: the tensors narrowed along their dynamic dimensions first).
The parent never runs what the model process wrote: it checks every node against that grammar
(:func:`check_graph`) and renders ``repro.py`` from a template (:func:`render_repro`). The repro
needs only torch and what registers the backend; it runs the graph eagerly in fp32 and fp64 and
under ``torch.compile(backend=...)``, and exits 1 when the failure reproduces (the same error
signature, or the same budget breach), 0 otherwise.
"""

from __future__ import annotations

import json
import math
import operator
import re
from typing import Any

import torch

MAX_NODES = 2000
TARGET = re.compile(r"^aten\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+$")
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,80}")  # with fullmatch: no trailing newline
# Names the repro's own code uses: a node or kwarg named so would shadow them.
RESERVED = {"torch", "operator", "json", "os", "re", "struct", "sys", "math", "float", "graph", "main", "_dt", "FP64",
            "signature", "breaches", "load_safetensors", "args", "out", "compiled", "tensors", "slice", "Ellipsis",
            "first", "FIRST_CALL", "Graph", "self", "in_guards", "_dev", "ON_DEVICE", "DEVICE", "EAGER", "TRACE",
            "on_device", "run_args", "COMPILER", "EXPECT", "PARAMS", "SCALARS", "WEIGHTS", "DTYPES"}  # fmt: skip
LAYOUTS = {"strided", "sparse_coo", "sparse_csr", "_mkldnn"}
MEMORY_FORMATS = {"contiguous_format", "channels_last", "channels_last_3d", "preserve_format"}
# String arguments an ATen op may take, by keyword (positional strings only for einsum's equation).
STR_KWARGS = {"rounding_mode", "reduce", "approximate", "padding_mode", "equation", "indexing", "side",
              "interpolation", "mode"}  # fmt: skip
STR_POSITIONAL = {"aten.einsum.default"}
# Ops with effects outside the graph (files, printing): never in a repro.
DENIED = re.compile(r"file|print|save|load|_assert|_make_dep_token|record_stream|_fused_|_foreach_")
MAX_DEPTH = 4
DTYPE_CODES = {"F32", "F64", "F16", "BF16", "I64", "I32", "I8", "U8", "BOOL"}


def _is_name(name: Any) -> bool:
    import keyword

    if not isinstance(name, str) or name.startswith("__"):  # __debug__, and names a class body would mangle
        return False
    return bool(NAME.fullmatch(name)) and not keyword.iskeyword(name) and name not in RESERVED


_KINDS = (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8)
DTYPES = {str(d).removeprefix("torch."): d for d in (*_KINDS, torch.uint8, torch.bool)}


# Python's operators a graph may call (on sizes and scalars, as symbolic tracing writes them).
OPERATORS = {f"operator.{name}": getattr(operator, name) for name in (
    "getitem", "setitem", "add", "sub", "mul", "floordiv", "truediv", "mod", "neg", "pow", "eq", "ne", "lt", "le",
    "gt", "ge",
)}  # fmt: skip
OPERATORS.update({f"operator.{name}": getattr(operator, name) for name in (
    "and_", "or_", "xor", "not_", "invert", "iadd", "isub", "imul", "itruediv", "ifloordiv",
)})  # fmt: skip
BY_FUNCTION = {fn: name for name, fn in OPERATORS.items()}

# torch-level functions a dynamo graph may call in a repro: computations on tensors, nothing with an
# effect outside the graph (no files, no global state, no printing). Named one by one.
TORCH_FUNCTIONS = frozenset(
    [f"torch._C._nn.{n}" for n in (
        "linear", "gelu", "scaled_dot_product_attention", "pad", "softplus", "elu", "leaky_relu", "hardtanh",
        "upsample_nearest2d", "upsample_bilinear2d", "one_hot", "log_sigmoid", "silu", "mish", "hardswish",
        "hardsigmoid", "glu", "avg_pool2d", "adaptive_avg_pool2d",
    )]
    + [f"torch.nn.functional.{n}" for n in (
        "linear", "gelu", "scaled_dot_product_attention", "adaptive_avg_pool1d", "adaptive_avg_pool2d", "avg_pool1d",
        "avg_pool2d", "max_pool1d", "max_pool2d", "batch_norm", "dropout", "embedding", "layer_norm", "group_norm",
        "instance_norm", "rms_norm", "relu", "relu6", "silu", "mish", "softmax", "log_softmax", "normalize",
        "interpolate", "pad", "conv1d", "conv2d", "glu", "hardswish", "hardsigmoid", "sigmoid", "tanh", "elu",
        "leaky_relu", "softplus", "unfold", "fold", "pixel_shuffle", "one_hot",
    )]
    + [f"torch.{n}" for n in (
        "abs", "add", "addmm", "amax", "amin", "arange", "argmax", "argmin", "baddbmm", "bmm", "cat", "chunk",
        "clamp", "clone", "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "cos", "cumprod", "cumsum",
        "diff", "div", "einsum", "erf", "exp", "flatten", "flip", "full", "full_like", "gather", "index_select", "log",
        "masked_fill", "matmul", "max", "maximum", "mean", "min", "minimum", "mul", "narrow", "neg", "norm", "ones",
        "ones_like", "outer", "permute", "pow", "repeat_interleave", "reshape", "roll", "rsqrt", "sigmoid", "sin",
        "softmax", "sort", "split", "sqrt", "squeeze", "stack", "std", "sub", "sum", "tanh", "topk", "transpose",
        "tril", "triu", "unsqueeze", "var", "where", "zeros", "zeros_like", "Size",
    )]
)  # fmt: skip
TENSOR_METHODS = frozenset((
    "abs", "add", "all", "any", "argmax", "argmin", "as_strided", "bfloat16", "bmm", "bool", "ceil", "chunk", "clamp",
    "clamp_min", "clone", "contiguous", "cos", "cumsum", "detach", "dim", "div", "double", "eq", "exp", "expand",
    "expand_as", "flatten", "flip", "float", "floor", "gather", "half", "index_select", "int", "long", "masked_fill",
    "matmul", "max", "mean", "min", "mul", "narrow", "ne", "neg", "new_full", "new_ones", "new_zeros", "numel",
    "permute", "pow", "repeat", "reshape", "round", "rsqrt", "sigmoid", "sign", "sin", "size", "softmax", "split",
    "sqrt", "squeeze", "sub", "sum", "t", "tanh", "to", "transpose", "tril", "triu", "type_as", "unbind", "unflatten",
    "unsqueeze", "view", "view_as", "where",
    # Python's comparison and logic operators as methods (dynamo writes ``x.__eq__(y)`` in some versions)
    "__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__", "__and__", "__or__", "__xor__", "__invert__",
))  # fmt: skip
STR_POSITIONAL = STR_POSITIONAL | {"torch.einsum", "torch._C._nn.pad", "torch.nn.functional.pad"}  # pad: its mode


def _torch_function(name: str) -> Any:
    """The object ``name`` (one of :data:`TORCH_FUNCTIONS`) names in this torch, or None."""
    obj: Any = torch
    for part in name.split(".")[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if callable(obj) else None


def torch_function_names() -> dict[Any, str]:
    """This torch's objects for :data:`TORCH_FUNCTIONS`, to their names (the first name wins)."""
    out: dict[Any, str] = {}
    for name in sorted(TORCH_FUNCTIONS):
        fn = _torch_function(name)
        if fn is not None:
            try:
                out.setdefault(fn, name)
            except TypeError:  # unhashable
                continue
    return out


class BadGraph(ValueError):
    """What a model process described is not a graph Zoo writes into a repro."""


# ------------------------------------------------------------------ model process: describe


def _arg(a: Any, tuples: bool = False) -> Any:
    if isinstance(a, torch.fx.Node):
        return {"node": a.name}
    if tuples and isinstance(a, tuple):
        return {"tuple": [_arg(x, tuples) for x in a]}
    if tuples and isinstance(a, slice):
        return {"slice": [_arg(x, tuples) for x in (a.start, a.stop, a.step)]}
    if tuples and a is Ellipsis:
        return {"ellipsis": None}
    if isinstance(a, (list, tuple)):
        return [_arg(x, tuples) for x in a]
    if isinstance(a, torch.dtype):
        return {"dtype": str(a).removeprefix("torch.")}
    if isinstance(a, torch.device):
        return {"device": "cpu"}
    if isinstance(a, torch.layout):
        return {"layout": str(a).removeprefix("torch.")}
    if isinstance(a, torch.memory_format):
        return {"memory_format": str(a).removeprefix("torch.")}
    if a is None or isinstance(a, (bool, int, float, str)):
        if isinstance(a, float) and a != a:
            return {"float": "nan"}
        if isinstance(a, float) and a in (float("inf"), float("-inf")):
            return {"float": "inf" if a > 0 else "-inf"}
        return a
    raise BadGraph(f"argument of type {type(a).__name__} cannot go into a repro")


def describe_graph(
    gm: torch.fx.GraphModule,
    inputs: list[Any],
    level: str = "aten",
    first_call: list[tuple[int, int, int]] | None = None,
) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """``gm`` (an ATen-level graph, every tensor a placeholder; or with ``level="torch"`` the graph
    dynamo captured) as JSON-able data, and its tensor inputs by placeholder name; non-tensor inputs
    go in the data. ``first_call``: (input index, dimension, length) to narrow for a first call."""
    torch_level = level == "torch"
    names = torch_function_names() if torch_level else {}
    nodes: list[dict[str, Any]] = []
    tensors: dict[str, torch.Tensor] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if torch_level:  # every method and function a repro does not call, named at once
        unknown = sorted(
            {f"method {n.target}" for n in gm.graph.nodes if n.op == "call_method" and n.target not in TENSOR_METHODS}
            | {
                getattr(n.target, "__name__", str(n.target))
                for n in gm.graph.nodes
                if n.op == "call_function" and n.target not in BY_FUNCTION and not _known(names, n.target)
            }
        )
        if unknown:
            raise BadGraph(f"not called by a repro: {', '.join(unknown)[:300]}")
    for n, value in zip(placeholders, inputs):
        if isinstance(value, torch.Tensor):
            tensors[n.name] = value.detach().cpu().contiguous()
            nodes.append({"op": "placeholder", "name": n.name})
        else:
            nodes.append({"op": "placeholder", "name": n.name, "value": _arg(value)})
    for n in gm.graph.nodes:
        if n.op == "placeholder":
            continue
        if n.op == "output":
            nodes.append({"op": "output", "args": _arg(n.args[0], torch_level)})
        elif n.op == "call_method" and torch_level:  # a method of TENSOR_METHODS (checked above)
            nodes.append(
                {
                    "op": "call_method",
                    "name": n.name,
                    "method": n.target,
                    "args": [_arg(x, True) for x in n.args],
                    "kwargs": {k: _arg(v, True) for k, v in n.kwargs.items()},
                }
            )
        elif n.op == "call_function" and torch_level:
            target = BY_FUNCTION.get(n.target) or _name_of(names, n.target)
            nodes.append(
                {
                    "op": "call_function",
                    "name": n.name,
                    "target": target,
                    "args": [_arg(x, True) for x in n.args],
                    "kwargs": {k: _arg(v, True) for k, v in n.kwargs.items()},
                }
            )
        elif n.op == "call_function":
            if n.target in BY_FUNCTION:
                target = BY_FUNCTION[n.target]
            elif isinstance(n.target, torch._ops.OpOverload):
                target = f"aten.{n.target._opname}.{n.target._overloadname}"
                if n.target.namespace != "aten":
                    raise BadGraph(f"{n.target} is not an ATen op")
            else:
                raise BadGraph(f"{n.target} is neither an ATen op nor one of Python's operators")
            nodes.append(
                {
                    "op": "call_function",
                    "name": n.name,
                    "target": target,
                    "args": _arg(n.args),
                    "kwargs": {k: _arg(v) for k, v in n.kwargs.items()},
                }
            )
        else:
            raise BadGraph(f"node {n.name} ({n.op}) cannot go into a repro")
    data: dict[str, Any] = {"nodes": nodes}
    if torch_level:
        data["level"] = "torch"
        data["first_call"] = [[placeholders[i].name, d, length] for i, d, length in first_call or []]
    return data, tensors


def _known(names: dict[Any, str], target: Any) -> bool:
    try:
        return target in names
    except TypeError:
        return False


def _name_of(names: dict[Any, str], target: Any) -> str:
    try:
        name = names.get(target)
    except TypeError:
        name = None
    if name is None:
        raise BadGraph(f"{getattr(target, '__name__', target)} is not a function a repro calls")
    return name


def count_nodes(gm: torch.fx.GraphModule) -> int:
    """The graph's compute nodes (placeholders and the output not counted)."""
    return sum(n.op not in ("placeholder", "output") for n in gm.graph.nodes)


# ------------------------------------------------------------------ parent: check and render


def _check_arg(a: Any, known: set[str], depth: int = 0, strings: bool = False) -> None:
    if depth > MAX_DEPTH:
        raise BadGraph("arguments nested too deep")
    if isinstance(a, list):
        for x in a:
            _check_arg(x, known, depth + 1)
    elif isinstance(a, dict):
        if set(a) == {"node"}:
            if a["node"] not in known:
                raise BadGraph(f"argument names an unknown node {str(a['node'])[:40]!r}")
        elif set(a) == {"dtype"}:
            if a["dtype"] not in DTYPES:
                raise BadGraph(f"dtype {str(a['dtype'])[:20]!r}")
        elif set(a) == {"device"}:
            if a["device"] != "cpu":
                raise BadGraph("device")
        elif set(a) == {"layout"}:
            if a["layout"] not in LAYOUTS:
                raise BadGraph("layout")
        elif set(a) == {"memory_format"}:
            if a["memory_format"] not in MEMORY_FORMATS:
                raise BadGraph("memory_format")
        elif set(a) == {"float"}:
            if a["float"] not in ("nan", "inf", "-inf"):
                raise BadGraph("float")
        elif set(a) == {"tuple"} and isinstance(a["tuple"], list):
            for x in a["tuple"]:
                _check_arg(x, known, depth + 1)
        elif set(a) == {"slice"} and isinstance(a["slice"], list) and len(a["slice"]) == 3:
            for x in a["slice"]:
                if isinstance(x, (bool, float)) or not (x is None or isinstance(x, int) or isinstance(x, dict)):
                    raise BadGraph("a slice of other than integers, None or nodes")
                _check_arg(x, known, depth + 1)
        elif set(a) == {"ellipsis"} and a["ellipsis"] is None:
            pass
        else:
            raise BadGraph(f"argument {str(a)[:60]}")
    elif isinstance(a, float) and not math.isfinite(a):
        raise BadGraph("a non-finite float outside {'float': ...}")
    elif isinstance(a, int) and not isinstance(a, bool) and not -(1 << 63) <= a < 1 << 63:  # int64 (a slice's end)
        raise BadGraph("an integer out of range")
    elif not (a is None or isinstance(a, (bool, int, float))):
        if strings and isinstance(a, str) and len(a) <= 40 and re.fullmatch(r"[A-Za-z0-9_ ,>-]*", a):
            return
        raise BadGraph(f"argument {str(a)[:60]!r}")


def _check_call(n: dict[str, Any], known: set[str], positional_strings: bool) -> None:
    """A call's ``args`` (a list of checked arguments) and ``kwargs`` (identifiers to checked
    arguments; strings only under :data:`STR_KWARGS`)."""
    if not isinstance(n.get("args"), list) or not isinstance(n.get("kwargs"), dict):
        raise BadGraph("args must be a list and kwargs an object")
    for a in n["args"]:
        _check_arg(a, known, 1, strings=positional_strings)
    for k, v in n["kwargs"].items():
        if not _is_name(k):
            raise BadGraph(f"kwarg {str(k)[:40]!r}")
        _check_arg(v, known, 1, strings=k in STR_KWARGS)


def check_graph(data: Any, tensor_names: set[str]) -> dict[str, Any]:
    """:func:`_check_graph`, where a malformed value (a list where a name goes) is a refusal too."""
    try:
        return _check_graph(data, tensor_names)
    except TypeError as exc:  # an unhashable value in a membership test
        raise BadGraph(f"malformed graph: {exc}") from None


TORCH_INT_MAX = 1 << 31  # a literal of a torch-level graph: sizes, dims, lengths
TORCH_ELEMENTS_MAX = 1 << 28  # the product of a list of literal ints (a shape): no giant tensor on the reader's machine


def _check_sizes(a: Any) -> None:
    """At torch level: no literal int beyond :data:`TORCH_INT_MAX`, no list of them beyond
    :data:`TORCH_ELEMENTS_MAX` elements."""
    if isinstance(a, bool):
        return
    if isinstance(a, int) and abs(a) > TORCH_INT_MAX:
        raise BadGraph("an integer too large for a repro")
    if isinstance(a, list):
        ints = [x for x in a if isinstance(x, int) and not isinstance(x, bool)]
        product = 1
        for x in ints:
            product *= max(1, abs(x))
            if product > TORCH_ELEMENTS_MAX:
                raise BadGraph("a size too large for a repro")
        for x in a:
            _check_sizes(x)
    elif isinstance(a, dict):
        for x in a.values():
            _check_sizes(x)


def _check_graph(data: Any, tensor_names: set[str]) -> dict[str, Any]:
    """``data`` from a model process, checked node by node: ATen overloads that exist here or
    Python's operators (at torch level: the named torch functions and tensor methods), names that
    are identifiers, arguments that are literals or earlier nodes."""
    if not isinstance(data, dict) or not isinstance(data.get("nodes"), list):
        raise BadGraph("no node list")
    if set(data) - {"nodes", "level", "first_call", "expect"}:
        raise BadGraph("unknown keys")
    torch_level = data.get("level", "aten") == "torch"
    if data.get("level", "aten") not in ("aten", "torch"):
        raise BadGraph("level")
    # a torch-level graph fails as dynamo builds its guards (the default), or as the backend runs it; an
    # ATen graph raises (the default), or (one op a device ran eagerly) gives other shapes than the CPU's
    if "expect" in data and data["expect"] not in (("guards", "error", "mismatch") if torch_level else ("shape",)):
        raise BadGraph("expect")
    first = data.get("first_call", [])
    if not torch_level and first:
        raise BadGraph("first_call is for torch-level graphs")
    if not isinstance(first, list) or len(first) > 64:
        raise BadGraph("first_call")
    for entry in first:
        if not (
            isinstance(entry, list)
            and len(entry) == 3
            and entry[0] in tensor_names
            and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 31 for x in entry[1:])
        ):
            raise BadGraph("first_call entry")
    nodes = data["nodes"]
    if not 1 < len(nodes) <= MAX_NODES:
        raise BadGraph(f"{len(nodes)} nodes")
    known: set[str] = set()
    for n in nodes:
        if not isinstance(n, dict):
            raise BadGraph("node")
        op = n.get("op")
        if op == "output":
            _check_arg(n.get("args"), known)
            continue
        name = n.get("name")
        if not _is_name(name) or name in known:
            raise BadGraph(f"node name {str(name)[:40]!r}")
        if op == "placeholder":
            if "value" in n:
                if isinstance(n["value"], (list, dict)) and not (
                    isinstance(n["value"], dict) and set(n["value"]) == {"float"}
                ):
                    raise BadGraph("a placeholder's value is a number, a bool or None")
                _check_arg(n["value"], known)
            elif name not in tensor_names:
                raise BadGraph(f"placeholder {name} has no tensor")
        elif op == "call_method" and torch_level:
            target = None
            if n.get("method") not in TENSOR_METHODS:
                raise BadGraph(f"method {str(n.get('method'))[:40]!r}")
            args = n.get("args")
            if not isinstance(args, list) or not args or set(args[0] if isinstance(args[0], dict) else {}) != {"node"}:
                raise BadGraph(f"method {n['method']} is not called on an earlier node: {str(args)[:60]}")
            _check_call(n, known, positional_strings=False)
        elif op == "call_function" and torch_level and n.get("target") not in OPERATORS:
            target = n.get("target")
            if target not in TORCH_FUNCTIONS or _torch_function(target) is None:
                raise BadGraph(f"target {str(target)[:60]!r} is not a function a repro calls")
            _check_call(n, known, positional_strings=target in STR_POSITIONAL)
        elif op == "call_function":
            target = n.get("target")
            if target not in OPERATORS:
                if not isinstance(target, str) or not TARGET.match(target):
                    raise BadGraph(f"target {str(target)[:60]!r}")
                _, op_name, overload = target.split(".")
                if DENIED.search(op_name):
                    raise BadGraph(f"{target} acts outside the graph: never in a repro")
                packet = getattr(torch.ops.aten, op_name, None)
                if packet is None or overload not in packet.overloads():
                    raise BadGraph(f"{target} is not an ATen op of this torch")
            _check_call(n, known, positional_strings=target in STR_POSITIONAL)
        else:
            raise BadGraph(f"op {str(op)[:20]!r}")
        known.add(name)
    if nodes[-1].get("op") != "output" or sum(n.get("op") == "output" for n in nodes) != 1:
        raise BadGraph("the last node, and only it, is the output")
    tensor_placeholders = {n["name"] for n in nodes if n.get("op") == "placeholder" and "value" not in n}
    narrowed = [(e[0], e[1]) for e in first]
    if any(name not in tensor_placeholders for name, _ in narrowed) or len(set(narrowed)) != len(narrowed):
        raise BadGraph("first_call narrows a tensor input once per dimension")
    if torch_level:
        for n in nodes:
            _check_sizes([n.get("args"), n.get("kwargs")])
    if data.get("expect") == "mismatch":
        _check_fp64_reference(nodes)
    return data


PINNED_PRECISION = frozenset(("float", "half", "bfloat16", "double"))
# a random op, by its last name (F.normalize is not one)
RANDOM = re.compile(r"(^|\.)(rand\w*|bernoulli\w*|multinomial|normal_?|poisson|exponential_?|geometric_?|cauchy_?)$")
DROPOUTS = re.compile(r"(^|\.)(\w*dropout\w*)$")


def _check_fp64_reference(nodes: list[dict[str, Any]]) -> None:
    """A torch-level mismatch repro judges the backend against the same graph run in fp64 (``_dt``
    raises each floating dtype argument): a method that pins a precision (``.float()``) would keep
    part of that reference in fp32, and a random op makes two runs differ. Either is refused."""
    for n in nodes:
        if n.get("op") == "call_method" and n.get("method") in PINNED_PRECISION:
            raise BadGraph(f"method {n['method']} pins a precision the fp64 reference must not have")
        if n.get("op") == "call_function":
            target = str(n.get("target"))
            args, kwargs = n.get("args") or [], n.get("kwargs") or {}
            training = kwargs.get("training", args[2] if len(args) > 2 else True)  # F.dropout(x, p, training)
            if RANDOM.search(target) or (DROPOUTS.search(target) and training is not False):
                raise BadGraph(f"{target[:60]} is random: no reference for a mismatch")


def check_tensors(tensors: dict[str, torch.Tensor]) -> None:
    """The repro's tensors: dtypes its loader reads, names that are node names."""
    codes = {torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
             torch.uint8, torch.bool}  # fmt: skip
    for name, t in tensors.items():
        if not _is_name(name) or t.dtype not in codes:
            raise BadGraph(f"tensor {str(name)[:40]!r} of {t.dtype}")


def _code(a: Any) -> str:
    if isinstance(a, list):
        inner = ", ".join(_code(x) for x in a)
        return f"[{inner}]"
    if isinstance(a, dict):
        ((k, v),) = a.items()
        if k == "node":
            return v
        if k == "tuple":
            return "(" + "".join(_code(x) + ", " for x in v) + ")"
        if k == "slice":
            return "slice(" + ", ".join(_code(x) for x in v) + ")"
        if k == "ellipsis":
            return "Ellipsis"
        if k == "float":
            return f"float({v!r})"
        if k == "dtype":
            return f"_dt(torch.{v})"
        if k == "device":
            return "_dev()"  # the CPU; DEVICE while the graph runs there
        return f"torch.{v}"
    return repr(a)


def graph_source(data: dict[str, Any]) -> str:
    """The checked graph as the body of ``def graph(...)``."""
    params = [n["name"] for n in data["nodes"] if n["op"] == "placeholder"]
    lines = [f"def graph({', '.join(params)}):"]
    for n in data["nodes"]:
        if n["op"] == "call_function":
            if n["target"] in OPERATORS or data.get("level") == "torch":
                fn = n["target"]
            else:
                fn = f"torch.ops.{n['target']}"
            args = [_code(a) for a in n["args"]] + [f"{k}={_code(v)}" for k, v in n["kwargs"].items()]
            lines.append(f"    {n['name']} = {fn}({', '.join(args)})")
        elif n["op"] == "call_method":
            self_, *rest = n["args"]
            args = [_code(a) for a in rest] + [f"{k}={_code(v)}" for k, v in n["kwargs"].items()]
            lines.append(f"    {n['name']} = {_code(self_)}.{n['method']}({', '.join(args)})")
        elif n["op"] == "output":
            lines.append(f"    return {_code(n['args'])}")
    if data.get("level") == "torch":  # an FX GraphModule, as dynamo handed it: its guards differ from a function's
        body = ["    " + ln for ln in lines[1:]]
        lines = ["class Graph(torch.nn.Module):", f"    def forward(self, {', '.join(params)}):", *body, "", "",
                 "graph = Graph()  # traced into a GraphModule in main()" if fx_traceable(data)
                 else "graph = Graph()  # compiled as it is: FX cannot trace its in-place assignments"]  # fmt: skip
    return "\n".join(lines) + "\n"


def fx_traceable(data: dict[str, Any]) -> bool:
    """Whether ``repro.py`` turns its torch-level ``Graph`` into an FX GraphModule before compiling it
    (as dynamo hands one to a backend: a guard failure depends on it). FX cannot trace an in-place
    ``operator.setitem`` (Longformer's chunking): such a graph is compiled as the module it is, and
    dynamo then captures the setitem itself."""
    return not any(n.get("target") == "operator.setitem" for n in data["nodes"] if n.get("op") == "call_function")


def plain(text: str) -> str:
    """Text a model process had a hand in, made safe for a comment or a Markdown line: printable
    ASCII only, no backslash (no encoding trick, no escape, no bidirectional control)."""
    return "\n".join(re.sub(r"[^ -~]", "?", ln).replace("\\", "/") for ln in str(text).splitlines())


def render_repro(
    data: dict[str, Any],
    *,
    compiler: str,
    imports: list[str],
    expect: dict[str, Any],
    about: str,
    weights: str = "repro.safetensors",
    device: str | None = None,
    eager: bool = False,
) -> str:
    """``repro.py`` for a checked graph: ``expect`` is ``{"kind": "error", "signature": ...}`` or
    ``{"kind": "mismatch", "factor": f, "floor": fl}``. With ``device`` and ``eager`` (an ATen graph
    that raises or gives other shapes) the graph runs eagerly on that device, not compiled, and on the
    CPU as a control; with ``device`` alone (a torch-level graph) it is compiled there and judged
    against the CPU."""
    kind = expect.get("kind")
    if device is not None and eager and (data.get("level") == "torch" or kind not in ("error", "shape")):
        raise BadGraph("an eager repro on a device is an ATen graph that raises or gives other shapes")
    if device is not None and not eager and (data.get("level") != "torch" or kind not in ("error", "mismatch")):
        raise BadGraph("a compiled repro on a device is a torch-level graph that raises or mismatches")
    if (device is None or not eager) and kind == "shape":
        raise BadGraph("a shape repro runs eagerly on a device")
    scalars = (
        "{"
        + ", ".join(
            f"{json.dumps(n['name'])}: {_code(n['value'])}"
            for n in data["nodes"]
            if n["op"] == "placeholder" and "value" in n
        )
        + "}"
    )
    params = [n["name"] for n in data["nodes"] if n["op"] == "placeholder"]
    return TEMPLATE.format(
        about="\n".join("# " + ln if ln else "#" for ln in plain(about).splitlines()),
        imports="\n".join("    " + ln for ln in imports) or "    pass",
        graph=graph_source(data),
        params=json.dumps(params),
        scalars=scalars,
        compiler=json.dumps(compiler),
        device=repr(device),
        eager=repr(bool(eager)),
        trace=repr(fx_traceable(data)),
        first_call=json.dumps(data.get("first_call") or []),
        expect=repr(expect),  # a Python literal (JSON's null is not one)
        weights=json.dumps(weights),
    )


TEMPLATE = '''\
# -*- coding: utf-8 -*-
# Generated by zoo triage.
{about}
#
# Needs only torch and what registers the backend. Exits 1 when the failure reproduces, 0 when not.
import json
import operator
import os
import re
import struct
import sys

import torch

try:  # a backend that is not installed is not a reproduction: exit 2, not Python's 1
{imports}
except ImportError as exc:
    print("the repro needs what registers the backend:", exc, file=sys.stderr)
    sys.exit(2)

COMPILER = {compiler}
TRACE = {trace}  # a torch-level Graph is traced into an FX GraphModule first (not where it assigns in place)
DEVICE = {device}  # not None: the graph runs on this device, judged against the CPU
EAGER = {eager}  # on DEVICE: run eagerly (one op the device raised on), not compiled
# (input, dimension, length): a first call on these inputs narrowed, so that the second, on the inputs
# as they are, makes dynamo recompile the frame with dynamic sizes, where the failure comes
FIRST_CALL = {first_call}
EXPECT = {expect}
PARAMS = {params}
SCALARS = {scalars}  # non-tensor inputs
WEIGHTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), {weights})
DTYPES = {{"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I64": torch.int64, "I32": torch.int32, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}}


def load_safetensors(path):
    """The tensors of a .safetensors file (its format: an 8-byte header length, a JSON header, data)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8 : 8 + n])
    out = {{}}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        start, end = meta["data_offsets"]
        raw = bytearray(blob[8 + n + start : 8 + n + end])
        t = torch.frombuffer(raw, dtype=DTYPES[meta["dtype"]]) if raw else torch.empty(0, dtype=DTYPES[meta["dtype"]])
        out[name] = t.reshape(meta["shape"])
    return out


FP64 = False  # set while the graph runs as the fp64 reference: floating dtype arguments become fp64


def _dt(dtype):
    return torch.float64 if FP64 and dtype.is_floating_point else dtype


ON_DEVICE = False  # set while the graph is traced or compiled for DEVICE: a device argument is DEVICE


def _dev():
    return torch.device(DEVICE) if ON_DEVICE else torch.device("cpu")


{graph}


def signature(exc):
    """Zoo's error signature: the type and first line, without numbers or quoted names."""
    lines = [ln.strip() for ln in str(exc)[:4000].splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.endswith(" raised:") and len(lines) > 1:
        first = first + " " + lines[1]
    norm = re.sub(r"0x[0-9a-f]+|\\d+", "N", first)
    norm = re.sub(r"'[^']*'|\\"[^\\"]*\\"", "'…'", norm)[:200]
    return type(exc).__name__ + ": " + norm


def in_guards(exc):
    """Whether exc was raised while dynamo built the guards of a frame it had compiled
    (torch/_dynamo/guards.py, ShapeEnv.produce_guards*), after the backend returned."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            where = code.co_filename.replace(os.sep, "/")
            if code.co_name.startswith("produce_guards") or where.endswith("torch/_dynamo/guards.py"):
                return True
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__
    return False


def masked(x):
    return torch.isfinite(x) & (x.abs() >= torch.finfo(x.dtype).max / 2)


def breaches(out, ref32, ref64, factor, floor):
    """Zoo's budget: each float output's RMSE against fp64 within factor x the fp32 reference's own
    RMSE (at least floor x the output's RMS), and its max abs error within factor x the reference's."""
    outs = out if isinstance(out, (list, tuple)) else [out]
    r32s = ref32 if isinstance(ref32, (list, tuple)) else [ref32]
    r64s = ref64 if isinstance(ref64, (list, tuple)) else [ref64]
    found = []
    for i, (t, r, d) in enumerate(zip(outs, r32s, r64s)):
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            continue
        if t.shape != d.shape:
            found.append(f"output {{i}}: shape {{tuple(t.shape)}} != {{tuple(d.shape)}}")
            continue
        # a mask value (finite, at the dtype's limit: torch.finfo(dtype).min) is no number: where the
        # reference has one the output must too (or Inf past it), of its sign; left out of the errors
        masked_r = masked(r)
        held = t[masked_r].double()
        if not bool(((masked(t)[masked_r] | torch.isinf(held)) & (held.sign() == r[masked_r].double().sign())).all()):
            found.append(f"output {{i}}: no mask value (at the dtype's limit) where the reference has one")
            continue
        t, r, d = t.double(), r.double(), d.double()
        ok = torch.isfinite(d) & ~masked_r
        if not torch.equal(torch.isfinite(t) & ~masked_r, ok):
            found.append(f"output {{i}}: NaN/Inf where the reference has none")
            continue
        t, r, d = t[ok], r[ok], d[ok]
        if not d.numel():
            continue
        scale = float(d.pow(2).mean().sqrt())
        err, err32 = float((t - d).pow(2).mean().sqrt()), float((r - d).pow(2).mean().sqrt())
        budget = max(factor * err32, floor * scale, 1e-30)
        max_err, max32 = float((t - d).abs().max()), float((r - d).abs().max())
        max_budget = max(factor * max32, 10 * floor * float(d.abs().max()), 1e-30)
        if err > budget:
            over = err / budget
            found.append(f"output {{i}}: RMSE {{err:.3g}} exceeds the budget {{budget:.3g}}, {{over:.3g}}x over")
        elif max_err > max_budget:
            found.append(f"output {{i}}: max abs diff {{max_err:.3g}} exceeds the budget {{max_budget:.3g}}")
    return found


def on_device(args):
    """The graph eagerly on DEVICE, its results read back (a lazy device runs it only then); then the
    same call on the CPU, as a control, to say whether the CPU raises too."""
    dev = torch.device(DEVICE)
    try:
        out = graph(*[a.to(dev) if isinstance(a, torch.Tensor) else a for a in args])
        outs = [t.to("cpu") for t in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(t, torch.Tensor)]
    except Exception as exc:
        sig = signature(exc)
        if sig != EXPECT["signature"] or EXPECT["kind"] == "shape":
            print("another error than the one expected:", sig, file=sys.stderr)
            print("expected:", EXPECT["signature"], file=sys.stderr)
            return 2
        print("REPRODUCED:", sig)
        try:
            graph(*args)
            print("  on the CPU the same call runs")
        except Exception as cpu_exc:
            print("  on the CPU the same call fails too:", signature(cpu_exc))
        return 1
    if EXPECT["kind"] == "shape":  # the op's (first) output has another shape on the device than on the CPU
        ref = graph(*args)
        refs = [t for t in (ref if isinstance(ref, (list, tuple)) else [ref]) if isinstance(t, torch.Tensor)]
        found = [  # the first output only: aux outputs (batch norm's saved statistics) differ by design
            f"output 0: shape {{tuple(t.shape)}} on {{DEVICE}}, {{tuple(r.shape)}} on the CPU"
            for t, r in zip(outs[:1], refs[:1])
            if t.shape != r.shape
        ]
        if found:
            print("REPRODUCED:", "; ".join(found))
            print("  (the model then failed with:", EXPECT["signature"] + ")")
            return 1
        print("not reproduced: the same shapes on", DEVICE, "and on the CPU")
        return 0
    print("not reproduced: ran on", DEVICE, "without", EXPECT["signature"])
    return 0


def main():
    tensors = load_safetensors(WEIGHTS)
    args = [tensors[p] if p in tensors else SCALARS[p] for p in PARAMS]
    if DEVICE is not None and EAGER:
        with torch.no_grad():
            return on_device(args)
    global ON_DEVICE
    # each run gets its own copies: a graph that writes into an input must not change the references' inputs
    run_args = [a.to(DEVICE or "cpu", copy=True) if isinstance(a, torch.Tensor) else a for a in args]
    with torch.no_grad():
        ON_DEVICE = DEVICE is not None  # traced and compiled for the device; the CPU reference runs without
        # a torch-level graph is compiled as the FX GraphModule dynamo handed the backend
        target = torch.fx.symbolic_trace(graph) if isinstance(graph, torch.nn.Module) and TRACE else graph
        compiled = torch.compile(target, backend=COMPILER)
        first = dict(zip(PARAMS, run_args))
        for name, dim, length in FIRST_CALL:
            first[name] = first[name].narrow(dim, 0, length)
        if EXPECT["kind"] == "guards":  # the control: dynamo alone, the same calls, must not fail
            control = torch.compile(target, backend="eager")
            try:
                if FIRST_CALL:
                    control(*first.values())
                control(*run_args)
            except Exception as exc:
                print("fails without the backend too (eager):", signature(exc), file=sys.stderr)
                return 2
            torch._dynamo.reset()
        try:
            if FIRST_CALL:
                compiled(*first.values())
            out = compiled(*run_args)
            if DEVICE is not None:  # read back (a lazy device runs the graph only then)
                outs = out if isinstance(out, (list, tuple)) else [out]
                out = [t.to("cpu") if isinstance(t, torch.Tensor) else t for t in outs]
        except Exception as exc:
            ON_DEVICE = False
            sig = signature(exc)
            if EXPECT["kind"] in ("error", "guards") and sig == EXPECT["signature"]:
                print("REPRODUCED:", sig)
                return 1
            if EXPECT["kind"] == "guards" and in_guards(exc):
                print("REPRODUCED: dynamo failed building the guards of what the backend compiled, as the model did:")
                print("  here:", sig)
                print("  the model:", EXPECT["signature"])
                return 1
            print("another error than the one expected:", sig, file=sys.stderr)
            print("expected:", EXPECT.get("signature"), file=sys.stderr)
            return 2
        ON_DEVICE = False
        if EXPECT["kind"] != "mismatch":
            print("not reproduced: compiled and ran without", EXPECT["signature"])
            return 0
        global FP64
        ref32 = graph(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args])
        FP64 = True
        ref64 = graph(*[(a.double() if a.is_floating_point() else a).clone() if isinstance(a, torch.Tensor) else a
                        for a in args])  # fmt: skip
        FP64 = False
        found = breaches(out, ref32, ref64, EXPECT["factor"], EXPECT["floor"])
    if found:
        print("REPRODUCED:", "; ".join(found))
        return 1
    print("not reproduced: every output within the budget")
    return 0


if __name__ == "__main__":
    try:
        code = main()
    except Exception as exc:  # anything but the failure itself: not a reproduction
        print("the repro itself failed:", type(exc).__name__, exc, file=sys.stderr)
        code = 2
    sys.exit(code)
'''


ATTRIBUTIONS = {"dynamo", "aot_autograd", "backend", "device_eager", "device_compile", "zoo", "none", "not_reproduced"}
_TRIAGE_STR = ("status", "repro_kind", "note", "unfinished", "minified", "minify_stopped", "repro_signature")
_TRIAGE_NUM = ("graph_nodes", "repro_nodes", "minify_s")


def clean_triage(raw: Any) -> dict[str, Any]:
    """``details.triage`` as a model process wrote it, rebuilt by the parent from what it may hold:
    an attribution from the known set, short plain strings, numbers, a ladder of plain entries."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Any] = {}
    if raw.get("attribution") in ATTRIBUTIONS:
        out["attribution"] = raw["attribution"]
    for k in _TRIAGE_STR:
        if isinstance(raw.get(k), str):
            out[k] = plain(raw[k])[:600]
    for k in _TRIAGE_NUM:
        v = raw.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 <= v < 1e9:
            out[k] = v
    ladder = []
    for r in raw.get("ladder") if isinstance(raw.get("ladder"), list) else []:
        if not isinstance(r, dict):
            continue
        entry = {
            k: plain(r[k])[:300]
            for k in ("rung", "compiler", "device", "status", "signature")
            if isinstance(r.get(k), str)
        }
        if isinstance(r.get("problems"), list):
            entry["problems"] = [plain(x)[:300] for x in r["problems"][:3] if isinstance(x, str)]
        if isinstance(r.get("seconds"), (int, float)) and math.isfinite(r["seconds"]):
            entry["seconds"] = r["seconds"]
        if {"rung", "compiler", "device", "status"} <= set(entry):
            ladder.append(entry)
    if ladder:
        out["ladder"] = ladder[:6]
    return out
