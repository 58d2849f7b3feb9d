"""The model process's half of the triage: attribution, the failing graph, the minifier.

:func:`triage_here` validates as usual, then (for a failure of the backend's) re-runs the same
model on the same inputs with the stack peeled back, records the first rung that reproduces the
failure in ``details.triage.attribution``, captures the FX graph that fails (the one that raises,
or the first whose own outputs leave the budget), lowers it to ATen with ``make_fx`` and minifies
it with torch's FX minifier (``functorch.compile.minifier``), the predicate being the same error
signature or the same budget breach. The minified graph is handed back to the parent as data in
the outbox (``graph.json``, ``repro.safetensors``).
"""

from __future__ import annotations

import copy
import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import torch

from ..compare import Comparison, compare
from ..engine import Prepared, detach_cpu, is_compile_error, judge, to_device, validate_here
from ..request import ValidationRequest, error_info
from ..statuses import BACKEND_FAILING, Status
from .graph import BadGraph, count_nodes, describe_graph

log = logging.getLogger(__name__)

# The rungs of the ladder, in order: (attribution, torch.compile backend or None for eager on the device).
COMPILER_RUNGS = (("dynamo", "eager"), ("aot_autograd", "aot_eager"))
MINIFY_BUDGET_S = 240.0


class Outcome:
    """What one rung did: an error (status and signature) or a comparison."""

    def __init__(self, status: str, signature: str | None = None, cmp: Comparison | None = None, error: Any = None):
        self.status, self.signature, self.cmp, self.error = status, signature, cmp, error

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status}
        if self.signature:
            out["signature"] = self.signature
        if self.cmp is not None and not self.cmp.ok:
            out["problems"] = self.cmp.problems[:3]
        return out


def _run(p: Prepared, device: str, compiler: str | None, seed: int) -> Outcome:
    """The model on every input on ``device`` in the backend's dtype, compiled with ``compiler``."""
    dtype = getattr(torch, p.spec.dtype)
    model = copy.deepcopy(p.model)
    phase = "runtime"
    try:
        target = model.to(device=torch.device(device), dtype=dtype)
        runner = target
        if compiler:
            torch._dynamo.reset()
            runner = torch.compile(target, backend=compiler)
        outs = []
        with torch.no_grad():
            for i, x in enumerate(p.inputs):
                phase = "compile" if compiler else "runtime"
                torch.manual_seed(seed + i)
                outs.append(detach_cpu(runner(**to_device(x, torch.device(device), dtype))))
    except Exception as exc:
        info = error_info(exc)
        status = Status.COMPILE_ERROR if phase == "compile" and is_compile_error(exc) else Status.RUNTIME_ERROR
        return Outcome(str(status), info["signature"], error=info)
    cmp = judge(p, outs)
    return Outcome(str(Status.PASS) if cmp.ok else str(Status.MISMATCH), cmp=cmp)


def _reproduces(outcome: Outcome, row: dict[str, Any]) -> bool:
    """Whether a rung shows the row's failure: a mismatch for a mismatch; for an error, an error
    with the same signature (compile or runtime: a lower rung may fail at another phase)."""
    if row["status"] == Status.MISMATCH:
        return outcome.status == Status.MISMATCH
    sig = (row.get("error") or {}).get("signature")
    return outcome.signature is not None and (sig is None or outcome.signature == sig)


def rungs(p: Prepared) -> list[tuple[str, str, str | None]]:
    """(attribution, device, compiler) from the bottom of the stack to the backend itself."""
    spec = p.spec
    if spec.device == "cpu":
        if not spec.compiler:
            return [("backend", "cpu", None)]
        return [(name, "cpu", c) for name, c in COMPILER_RUNGS] + [("backend", "cpu", spec.compiler)]
    out = [("device_eager", spec.device, None)]
    if spec.compiler:
        out.append(("device_compile", spec.device, spec.compiler))
    return out


def attribute(p: Prepared, row: dict[str, Any], seed: int) -> tuple[str, list[dict[str, Any]]]:
    """The first rung that reproduces the row's failure (``not_reproduced`` when none does), and
    what every rung tried did."""
    tried = []
    for name, device, compiler in rungs(p):
        t0 = time.perf_counter()
        outcome = _run(p, device, compiler, seed)
        tried.append({"rung": name, "compiler": compiler or "eager", "device": device, **outcome.to_dict(),
                      "seconds": round(time.perf_counter() - t0, 2)})  # fmt: skip
        if _reproduces(outcome, row):
            return name, tried
    return "not_reproduced", tried


# ------------------------------------------------------------------ the failing graph


class _Capture:
    """A dynamo backend that records every graph and its example inputs, then hands it to the real
    backend; each call's inputs and compiled outputs are kept for the judge."""

    def __init__(self, compiler: str) -> None:
        from torch._dynamo import lookup_backend

        self.backend = lookup_backend(compiler)
        self.graphs: list[dict[str, Any]] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        entry: dict[str, Any] = {"gm": gm, "inputs": None, "error": None, "outputs": None}
        self.graphs.append(entry)
        try:
            compiled = self.backend(gm, example_inputs)
        except Exception as exc:
            entry["error"] = exc
            entry["inputs"] = [_snap(a) for a in example_inputs]
            raise

        def run(*args: Any) -> Any:
            if entry["inputs"] is None:
                entry["inputs"] = [_snap(a) for a in args]
            try:
                out = compiled(*args)
            except Exception as exc:  # the inputs of the call that failed, not of the first call
                entry["error"] = entry["error"] or exc
                entry["inputs"] = [_snap(a) for a in args]
                raise
            if entry["outputs"] is None:
                entry["outputs"] = [_snap(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
            return out

        return run


def _snap(a: Any) -> Any:
    """A copy that outlives the call; a symbolic size dynamo passed is kept as the value it had."""
    if isinstance(a, torch.SymInt):
        return a.node.hint
    return a.detach().clone() if isinstance(a, torch.Tensor) else a


def _up(a: Any) -> Any:
    """fp64 for a floating tensor or a floating dtype argument (``_to_copy(x, dtype=float32)``)."""
    if isinstance(a, torch.Tensor) and a.is_floating_point():
        return a.double()
    if isinstance(a, torch.dtype) and a.is_floating_point:
        return torch.float64
    return a


class _Float64(torch.fx.Interpreter):
    """The same graph computed in fp64: every floating input, attribute, and dtype argument raised."""

    def call_function(self, target: Any, args: Any, kwargs: Any) -> Any:
        from torch.utils._pytree import tree_map

        return super().call_function(target, tree_map(_up, args), tree_map(_up, kwargs))

    def call_method(self, target: Any, args: Any, kwargs: Any) -> Any:
        from torch.utils._pytree import tree_map

        return super().call_method(target, tree_map(_up, args), tree_map(_up, kwargs))

    def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
        return _up(super().get_attr(target, args, kwargs))


def run_float64(gm: torch.fx.GraphModule, inputs: list[Any]) -> Any:
    """``gm`` on ``inputs`` in fp64 (the truth the budget is measured against)."""
    with torch.no_grad():
        return _Float64(gm).run(*[_up(a) for a in inputs])


def _graph_breach(gm: torch.fx.GraphModule, inputs: list[Any], outs: list[Any], p: Prepared) -> Comparison:
    """One graph's compiled outputs against the same graph run eagerly in fp32 and fp64 on the
    same inputs, at the judged budget."""
    with torch.no_grad():
        ref32 = gm(*inputs)
        ref64 = run_float64(gm, inputs)
    ref32 = list(ref32) if isinstance(ref32, (list, tuple)) else [ref32]
    ref64 = list(ref64) if isinstance(ref64, (list, tuple)) else [ref64]
    return compare(outs, ref32, ref64, dtype=p.spec.dtype, tolerance_factor=p.built.tolerance_factor)


def failing_graph(p: Prepared, row: dict[str, Any], seed: int) -> tuple[torch.fx.GraphModule, list[Any]] | None:
    """The dynamo graph the failure lives in, with the inputs it failed on."""
    cap = _Capture(p.spec.compiler)
    torch._dynamo.reset()
    model = copy.deepcopy(p.model).to(dtype=getattr(torch, p.spec.dtype))
    runner = torch.compile(model, backend=cap)
    outer = None
    with torch.no_grad():
        for i, x in enumerate(p.inputs):
            torch.manual_seed(seed + i)
            try:
                runner(**to_device(x, torch.device("cpu"), getattr(torch, p.spec.dtype)))
            except Exception as exc:  # as dynamo raised it (BackendCompilerFailed around the backend's own)
                outer = exc
                break
    if outer is not None and row["status"] != Status.MISMATCH:
        if error_info(outer)["signature"] != (row.get("error") or {}).get("signature"):
            return None
        for g in reversed(cap.graphs):  # the graph that raised: the last one handed to the backend
            if g["error"] is not None and g["inputs"] is not None:
                return g["gm"], g["inputs"]
    if row["status"] == Status.MISMATCH:
        for g in cap.graphs:
            if g["outputs"] is not None and not _graph_breach(g["gm"], g["inputs"], g["outputs"], p).ok:
                return g["gm"], g["inputs"]
    return None


def predicate(p: Prepared, row: dict[str, Any]) -> Callable[[torch.fx.GraphModule, list[Any]], bool]:
    """The minifier's test: does this (ATen) graph still fail on the backend as the row did?"""
    want = (row.get("error") or {}).get("signature")

    def fails(fx_g: torch.fx.GraphModule, inps: list[Any]) -> bool:
        torch._dynamo.reset()
        try:
            with torch.no_grad():
                out = torch.compile(fx_g, backend=p.spec.compiler)(*inps)
        except Exception as exc:
            return row["status"] != Status.MISMATCH and error_info(exc)["signature"] == want
        if row["status"] != Status.MISMATCH:
            return False
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        try:
            return not _graph_breach(fx_g, inps, outs, p).ok
        except Exception:
            return False

    return fails


class _OutOfTime(Exception):
    """The minifier's time is up (:data:`MINIFY_BUDGET_S`)."""


def minify(
    p: Prepared, row: dict[str, Any], gm: torch.fx.GraphModule, inputs: list[Any]
) -> tuple[torch.fx.GraphModule | None, list[Any], int, dict[str, Any]]:
    """The failing graph lowered to ATen and minified; returns (graph, inputs, nodes before, notes);
    the graph is None where the ATen graph alone does not fail."""
    from functorch.compile import minifier
    from torch.fx.experimental.proxy_tensor import make_fx

    try:
        with torch.no_grad():
            aten = make_fx(gm, tracing_mode="real")(*inputs)
    except RuntimeError:  # data-dependent (an .item() on a traced tensor): sizes and scalars traced symbolically
        with torch.no_grad():
            aten = make_fx(gm, tracing_mode="symbolic")(*inputs)
    before = count_nodes(aten)
    fails = predicate(p, row)
    notes: dict[str, Any] = {}
    if not fails(aten, list(inputs)):
        notes["note"] = (
            f"the failing dynamo graph ({before} ATen nodes) does not fail once lowered to ATen and compiled "
            "alone: no graph repro is written (one that does not reproduce would mislead); the repro is the model"
        )
        return None, list(inputs), before, notes
    t0 = time.perf_counter()
    best: list[Any] = [aten, list(inputs)]

    def bounded(fx_g: torch.fx.GraphModule, inps: list[Any]) -> bool:
        """The predicate, keeping the smallest failing graph seen; past the budget, it stops the minifier."""
        if time.perf_counter() - t0 > MINIFY_BUDGET_S:
            raise _OutOfTime
        failed = fails(fx_g, inps)
        if failed and count_nodes(fx_g) < count_nodes(best[0]):
            best[:] = [copy.deepcopy(fx_g), list(inps)]
        return failed

    try:
        small, small_inputs = minifier(aten, list(inputs), bounded, dump_state=lambda *a, **k: None, skip_offload=True)
    except _OutOfTime:
        small, small_inputs = best
        notes["minify_stopped"] = f"after {MINIFY_BUDGET_S:.0f} s: the smallest failing graph found by then"
    notes["minify_s"] = round(time.perf_counter() - t0, 1)
    pruned = copy.deepcopy(small)
    if pruned.graph.eliminate_dead_code():  # what no output needs, when the failure stays without it
        pruned.recompile()
        if fails(pruned, list(small_inputs)):
            small = pruned
    return small, list(small_inputs), before, notes


# ------------------------------------------------------------------ entry point


def triage_here(
    req: ValidationRequest,
    stage: Callable[[str], None],
    outbox: str | None,
    checkpoint: Callable[[dict[str, Any]], None] = lambda row: None,
) -> dict[str, Any]:
    """Validate, then triage a failure of the backend's; the result dict with ``details.triage``.
    ``checkpoint`` gets the row as known so far before each stage that may crash or run out of time
    (the ladder, the minifier), so the verdict and the attribution survive them."""
    keep: dict[str, Any] = {}
    row = validate_here(req, stage, keep)
    tri: dict[str, Any] = {"status": row["status"]}
    row.setdefault("details", {})["triage"] = tri
    if row["status"] not in BACKEND_FAILING:
        tri["attribution"] = "zoo" if row["status"] in (Status.REFERENCE_ERROR, Status.UNSUPPORTED) else "none"
        return row
    p = keep.get("prepared")
    if p is None:  # a failure of the backend's always comes after the references: never here
        tri["attribution"] = "not_reproduced"
        tri["note"] = "the validation stopped before its references: nothing to re-run"
        return row
    stage("triage")
    tri["unfinished"] = "the attribution ladder did not finish (a crash or the time budget)"
    checkpoint(row)
    tri["attribution"], tri["ladder"] = attribute(p, row, req.seed)
    tri["unfinished"] = "the minifier did not finish (a crash or the time budget): no repro"
    checkpoint(row)
    try:
        return _repro(req, p, row, tri, stage, outbox)
    finally:
        tri.pop("unfinished", None)


def _repro(
    req: ValidationRequest, p: Prepared, row: dict[str, Any], tri: dict[str, Any], stage: Callable[[str], None],
    outbox: str | None,
) -> dict[str, Any]:  # fmt: skip
    """The failing graph, minified, handed back through ``outbox``."""
    if tri["attribution"] not in ("backend", "device_compile") or not p.spec.compiler or p.spec.device != "cpu":
        tri["repro_kind"] = "model"  # dynamo's or AOTAutograd's failure, or a device: the model is the repro
        return row
    stage("minify")
    found = failing_graph(p, row, req.seed)
    if found is None:
        tri["repro_kind"] = "model"
        failed = (row.get("details") or {}).get("failed_input") or {}
        if failed.get("index"):
            tri["note"] = (
                f"the failure comes when input {failed['index']} (shapes {failed.get('shapes')}) makes dynamo "
                "recompile the frame, not from one graph: the repro is the model with its input shapes"
            )
        else:
            tri["note"] = "no single graph shows the failure on its own inputs: the repro is the model"
        return row
    gm, inputs = found
    try:
        small, small_inputs, before, notes = minify(p, row, gm, inputs)
    except Exception as exc:  # torch's tracing or minifier gave up: the verdict and attribution stand
        tri["repro_kind"] = "model"
        tri["note"] = f"the failing graph could not be lowered or minified: {error_info(exc)['signature'][:300]}"
        return row
    tri.update(notes)
    tri["graph_nodes"] = before
    if small is None:
        tri["repro_kind"] = "model"
        return row
    tri["repro_nodes"] = count_nodes(small)
    if outbox:
        try:
            data, tensors = describe_graph(small, small_inputs)
        except BadGraph as exc:
            tri["note"] = f"graph not describable: {exc}"
            return row
        from safetensors.torch import save_file

        with open(os.path.join(outbox, "graph.json"), "w") as f:
            json.dump(data, f)
        save_file(tensors, os.path.join(outbox, "repro.safetensors"))
        tri["repro_kind"] = "graph"
    return row
