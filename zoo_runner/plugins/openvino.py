"""``cpu+openvino``: ``torch.compile(backend="openvino")`` from OpenVINO's PyPI package (extra ``openvino``).

Importing ``openvino.torch`` registers the backend with dynamo. What this plugin adds:

- **Precision.** OpenVINO's CPU plugin computes at its resolved ``INFERENCE_PRECISION_HINT``: bf16
  by default on CPUs with bf16 units (AVX512_BF16, AMX), else f32. That is the declared precision
  (``details.precision_source`` ``plugin``). ``--precision`` only changes what Zoo judges against:
  ``--precision fp32`` on a bf16 CPU is a ``mismatch``, as it should be.
- **Asking OpenVINO for another precision** is a separate, explicit setting:
  ``ZOO_OPENVINO_INFERENCE_PRECISION_HINT=f32`` (or ``bf16``, ``f16``) goes to the backend as
  ``torch.compile(..., options={"config": {"INFERENCE_PRECISION_HINT": "f32"}})`` (OpenVINO's
  torchdynamo backend hands ``options["config"]`` to ``Core.compile_model``; OpenVINO reads no
  environment variable for it), and the declaration follows what the CPU plugin resolves with it.
- **Fallbacks.** OpenVINO's backend runs in PyTorch, without a word, what it does not convert: ops
  its partitioner leaves outside OpenVINO partitions, a partition OpenVINO fails to convert or run
  (for good, from then on) and a whole graph it fails on (handed to inductor). All three are
  recorded: their ATen ops are ``fallback_ops`` (so the row is ``pass_with_fallback``), the counts
  and reasons ``details.fallback_report``. This reads OpenVINO internals (2026.x): where they
  moved, the report says ``unavailable`` and nothing else changes.
- **Compile cache.** The model process's ``OPENVINO_CACHE_DIR`` (set by the sandbox under
  ``ZOO_COMPILE_CACHE``, like inductor's) goes to OpenVINO as its ``CACHE_DIR`` config: the CPU
  plugin stores each compiled partition there and loads it the next time, in any model process
  that compiles the same graph. ``details.compile_cache`` is ``hit``, ``miss`` or ``partial`` from
  each compiled model's ``LOADED_FROM_CACHE``. Not OpenVINO's ``model_caching`` option: in 2026.4.1
  its cache hit fails (``openvino_compile`` reads the cached IR, then names an unbound ``decoder``)
  and OpenVINO runs that partition in PyTorch instead (``docs/findings/openvino.md``).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

from ..backends import BackendSpec, CompilerPlugin, FallbackTracker, cache_verdict, register_compiler
from ..exceptions import UnknownBackend
from ..settings import settings

log = logging.getLogger(__name__)

ENV = "ZOO_OPENVINO_INFERENCE_PRECISION_HINT"
OV_DEVICE = "CPU"
# OpenVINO element type names -> Zoo precisions, and the spellings ENV accepts -> OpenVINO's.
_ZOO_PRECISION = {"f32": "fp32", "bf16": "bf16", "f16": "fp16"}
_HINTS = {
    "f32": "f32",
    "fp32": "f32",
    "float32": "f32",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "f16": "f16",
    "fp16": "f16",
    "float16": "f16",
}


def requested_hint() -> str | None:
    """The inference precision ``ZOO_OPENVINO_INFERENCE_PRECISION_HINT`` asks OpenVINO for, or None."""
    raw = settings().openvino_inference_precision_hint.strip().lower()
    if not raw:
        return None
    if raw not in _HINTS:
        raise UnknownBackend(f"{ENV}={raw!r} is not an OpenVINO inference precision: expected f32, bf16 or f16")
    return _HINTS[raw]


CACHE_ENV = "OPENVINO_CACHE_DIR"  # set by the sandbox for the model process (zoo_runner/sandbox.py)


def _config() -> dict[str, str] | None:
    hint = requested_hint()
    return {"INFERENCE_PRECISION_HINT": hint} if hint else None


def _cache_dir() -> str | None:
    return os.environ.get(CACHE_ENV, "").strip() or None


def compile_options(spec: BackendSpec) -> dict | None:
    config = dict(_config() or {})
    cache = _cache_dir()
    if cache:
        config["CACHE_DIR"] = cache
    return {"config": config} if config else None


def resolved_precision(core: Any, config: dict[str, str] | None = None, device: str = OV_DEVICE) -> str | None:
    """Zoo's name for the inference precision OpenVINO's ``device`` plugin resolves on ``core``
    (an ``openvino.Core``) with ``config`` applied; None for one Zoo has no reference for."""
    if config:
        core.set_property(device, config)
    value = core.get_property(device, "INFERENCE_PRECISION_HINT")
    name = value.get_type_name() if hasattr(value, "get_type_name") else str(value)
    return _ZOO_PRECISION.get(name.strip().lower())


def declared_precision(spec: BackendSpec) -> str | None:
    config = _config()  # a bad setting fails before anything else
    try:
        import openvino
    except ImportError:  # not installed: check_backend says so, with the install hint
        return None
    return resolved_precision(openvino.Core(), config)


# -- what ran in PyTorch instead of OpenVINO ------------------------------------------------------
_SEEN: dict[str, Any] = {
    "partitions": 0,
    "outside": set(),
    "ops": set(),
    "failed_partitions": [],
    "graphs_on_inductor": [],
    "from_cache": [],  # one bool per model OpenVINO compiled: LOADED_FROM_CACHE
    "ops_in_partitions": 0,  # ATen ops OpenVINO executed (backend_share's numerator)
    "ops_in_pytorch": 0,  # ATen ops (or dynamo-graph calls) that ran in PyTorch or inductor instead
}
_INSTRUMENTED: list[str] = []  # "ok", or why the report is unavailable


def _aten_ops(gm: Any) -> set[str]:
    import torch

    return {
        n.target._schema.name
        for n in gm.graph.nodes
        if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload)
    }


def _n_ops(gm: Any) -> int:
    """ATen op calls of a graph module (not the getitems that unpack a partition's outputs)."""
    import torch

    try:
        return sum(1 for n in gm.graph.nodes if n.op == "call_function" and isinstance(n.target, torch._ops.OpOverload))
    except AttributeError:
        return 0


def _one_line(exc: BaseException | None) -> str:
    if exc is None:
        return "unknown"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    failed = [
        ln for ln in lines if "failed for" in ln.lower()
    ]  # OpenVINO's "-- Conversion is failed for: aten.cat.default"
    pick = failed[-1] if failed else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {pick}"[:300]


def _traced_ops(subgraph: Any, example_inputs: list) -> set[str]:
    """ATen ops of a dynamo graph, traced apart from dynamo's own tracing context."""
    from torch._guards import tracing
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with tracing(None):
            return _aten_ops(make_fx(subgraph, tracing_mode="fake", _allow_non_fake_inputs=True)(*example_inputs))
    except Exception:
        return {"openvino::unconverted_graph"}  # still a fallback, by a name that says so


def _instrument() -> None:
    """Wrap the three places OpenVINO's torchdynamo backend hands work back to PyTorch (once)."""
    if _INSTRUMENTED:
        return
    try:
        from openvino.frontend.pytorch.torchdynamo import backend as ov_backend
        from openvino.frontend.pytorch.torchdynamo import execute as ov_execute
        from openvino.frontend.pytorch.torchdynamo.partition import Partitioner

        make_partitions, openvino_execute, compile_fx, openvino_compile = (
            Partitioner.make_partitions,
            ov_execute.openvino_execute,
            ov_backend.compile_fx,
            ov_execute.openvino_compile,
        )
    except (ImportError, AttributeError) as exc:
        _INSTRUMENTED.append(f"unavailable: {type(exc).__name__}: {exc}"[:200])
        return

    def recording_make_partitions(self: Any, graph_module: Any, options: Any) -> Any:
        fused = make_partitions(self, graph_module, options)
        _SEEN["partitions"] += sum(1 for n in fused.graph.nodes if n.op == "call_module" and "fused_" in n.name)
        for n in fused.graph.nodes:
            if n.op == "call_module" and "fused_" in n.name:
                _SEEN["ops_in_partitions"] += _n_ops(fused.get_submodule(n.target))
        _SEEN["ops_in_pytorch"] += _n_ops(fused)
        outside = _aten_ops(fused)  # top-level ATen ops: not in any OpenVINO partition
        _SEEN["outside"] |= outside
        _SEEN["ops"] |= outside
        return fused

    def recording_execute(gm: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return openvino_execute(gm, *args, **kwargs)
        except Exception as exc:  # OpenVINOGraphModule runs this partition in PyTorch from now on
            _SEEN["failed_partitions"].append(_one_line(exc))
            _SEEN["ops"] |= _aten_ops(gm)
            moved = _n_ops(gm)
            _SEEN["ops_in_partitions"] -= min(moved, _SEEN["ops_in_partitions"])
            _SEEN["ops_in_pytorch"] += moved
            raise

    def recording_compile_fx(subgraph: Any, example_inputs: list, *args: Any, **kwargs: Any) -> Any:
        # called from fx_openvino's `except Exception`: the exception it swallowed is the one in flight
        _SEEN["graphs_on_inductor"].append(_one_line(sys.exc_info()[1]))
        _SEEN["ops"] |= _traced_ops(subgraph, example_inputs)
        calls = sum(1 for n in subgraph.graph.nodes if n.op in ("call_function", "call_method"))
        _SEEN["ops_in_pytorch"] += max(1, calls)
        return compile_fx(subgraph, example_inputs, *args, **kwargs)

    def recording_compile(*args: Any, **kwargs: Any) -> Any:
        compiled = openvino_compile(*args, **kwargs)
        try:
            _SEEN["from_cache"].append(bool(compiled.get_property("LOADED_FROM_CACHE")))
        except Exception:  # a device that does not say: no verdict for this one
            pass
        return compiled

    Partitioner.make_partitions = recording_make_partitions
    ov_execute.openvino_compile = recording_compile
    ov_execute.openvino_execute = recording_execute
    ov_backend.compile_fx = recording_compile_fx
    _INSTRUMENTED.append("ok")


class OpenVINOFallbacks(FallbackTracker):
    """ATen ops OpenVINO's backend ran in PyTorch since :meth:`clear`, and a partition report."""

    def __init__(self) -> None:
        _instrument()

    def clear(self) -> None:
        _SEEN.update(
            partitions=0, outside=set(), ops=set(), failed_partitions=[], graphs_on_inductor=[], from_cache=[],
            ops_in_partitions=0, ops_in_pytorch=0,
        )  # fmt: skip
        try:  # OpenVINO keys compiled partitions by id(graph module): a new model must not meet an old one's
            from openvino.frontend.pytorch.torchdynamo.execute import clear_caches

            clear_caches()
        except (ImportError, AttributeError):
            pass

    def collect(self) -> list[str]:
        return sorted(_SEEN["ops"])

    def backend_share(self) -> float | None:
        """Ops in OpenVINO partitions that ran there, over every op of the graphs it was handed
        (those left outside its partitions, those of partitions that failed and ran in PyTorch,
        those of graphs it handed to inductor). None when it was handed nothing."""
        if _INSTRUMENTED != ["ok"]:
            return None
        inside, outside = _SEEN.get("ops_in_partitions", 0), _SEEN.get("ops_in_pytorch", 0)
        return round(inside / (inside + outside), 4) if inside + outside else None

    def compile_cache(self) -> str | None:
        """``hit`` when every model OpenVINO compiled came from its ``CACHE_DIR``, ``miss`` when none
        did, ``partial`` between; None when it compiled nothing or the cache is off."""
        if not _cache_dir():
            return None
        hits = sum(_SEEN["from_cache"])
        return cache_verdict(hits, len(_SEEN["from_cache"]) - hits)

    def report(self) -> dict:
        if _INSTRUMENTED != ["ok"]:
            return {"openvino": _INSTRUMENTED[0] if _INSTRUMENTED else "unavailable"}
        out: dict[str, Any] = {"openvino_partitions": _SEEN["partitions"]}
        if _SEEN["outside"]:
            out["ops_outside_partitions"] = sorted(_SEEN["outside"])
        if _SEEN["failed_partitions"]:
            out["partitions_run_in_pytorch"] = _SEEN["failed_partitions"][:5]
        if _SEEN["graphs_on_inductor"]:
            out["graphs_on_inductor"] = _SEEN["graphs_on_inductor"][:5]
        return out


# openvino.torch sets a dynamo flag torch 2.9+ ignores, and torch warns about it on every import.
warnings.filterwarnings("ignore", message=r".*inline_inbuilt_nn_modules is deprecated", category=FutureWarning)
register_compiler(
    CompilerPlugin(
        "openvino",
        package_dist="openvino",
        precision=declared_precision,
        packages=("openvino.torch",),
        extra="openvino",
        compile_options=compile_options,
        fallback_tracker=OpenVINOFallbacks,
    )
)
