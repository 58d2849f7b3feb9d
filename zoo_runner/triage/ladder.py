"""The model process's half of the triage: attribution, the failing graph, the minifier.

:func:`triage_here` validates as usual, then (for a failure of the backend's) re-runs the same
model on the same inputs with the stack peeled back, records the first rung that reproduces the
failure in ``details.triage.attribution``, captures the FX graph that fails (the one that raises,
or the first whose own outputs leave the budget), lowers it to ATen with ``make_fx`` and minifies
it with torch's FX minifier (``functorch.compile.minifier``), the predicate being the same error
signature or the same budget breach. The minified graph is handed back to the parent as data in
the outbox (``graph.json``, ``repro.safetensors``).

A failure no graph raises (dynamo building a frame's guards after the backend returned, as
OpenVINO's re-trace makes it) is kept at torch level: the last graph the backend compiled, its
symbolic sizes read from its tensors, called first on the tensors narrowed along their dynamic
dimensions and then as they are (the recompile), and cut to its shortest failing prefix
(:func:`guard_graph`, :func:`smallest_cut`). Lowered to ATen, such a graph no longer fails.
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
from .graph import BadGraph, count_nodes, describe_graph, fx_traceable, graph_source

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

    def __init__(self, compiler: str, keep_compiled_on: bool = False) -> None:
        from torch._dynamo import lookup_backend

        self.backend = lookup_backend(compiler)
        self.keep_compiled_on = keep_compiled_on
        self.graphs: list[dict[str, Any]] = []
        self.model_outputs: list[Any] = []  # the model's outputs on each input, on the CPU

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable:
        entry: dict[str, Any] = {"gm": gm, "inputs": None, "error": None, "outputs": None}
        if self.keep_compiled_on:  # the call dynamo compiled it for (the guard path's inputs): a copy of every weight
            entry["compiled_on"] = [_snap(a) for a in example_inputs]
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
    return _judged(outs, ref32, ref64, p)


def _judged(outs: list[Any], ref32: list[Any], ref64: list[Any], p: Prepared) -> Comparison:
    """A graph's outputs against its own fp32 and fp64 references, at the row's budget."""
    return compare(outs, ref32, ref64, dtype=p.spec.dtype, tolerance_factor=p.built.tolerance_factor)


def captured_run(p: Prepared, seed: int, keep_compiled_on: bool = False) -> tuple[_Capture, BaseException | None]:
    """The model compiled on the backend behind a :class:`_Capture`, run on every input until one
    raises: the graphs the backend got, and the exception as dynamo raised it (None if none did)."""
    cap = _Capture(p.spec.compiler, keep_compiled_on)
    torch._dynamo.reset()
    device = torch.device(p.spec.device)
    model = copy.deepcopy(p.model).to(device=device, dtype=getattr(torch, p.spec.dtype))
    runner = torch.compile(model, backend=cap)
    with torch.no_grad():
        for i, x in enumerate(p.inputs):
            torch.manual_seed(seed + i)
            try:
                cap.model_outputs.append(detach_cpu(runner(**to_device(x, device, getattr(torch, p.spec.dtype)))))
            except Exception as exc:  # as dynamo raised it (BackendCompilerFailed around the backend's own)
                return cap, exc
    return cap, None


def failing_graph(
    p: Prepared, row: dict[str, Any], seed: int, notes: list[str] | None = None
) -> tuple[torch.fx.GraphModule, list[Any]] | None:
    """The dynamo graph the failure lives in, with the inputs it failed on; ``notes`` gets why a
    graph could not be judged, and whether the model still mismatched with its graphs observed."""
    cap, outer = captured_run(p, seed)
    if row["status"] == Status.MISMATCH and outer is None and notes is not None:
        whole = judge(p, cap.model_outputs)
        notes.append(
            f"with its {len(cap.graphs)} graphs observed, the model "
            + ("still mismatches: the divergence is outside the graphs the backend compiled (in what runs between "
               "them, or at their boundaries)" if not whole.ok else "matches: observing the graphs hides the failure")
        )  # fmt: skip
    if outer is not None and row["status"] != Status.MISMATCH:
        if error_info(outer)["signature"] != (row.get("error") or {}).get("signature"):
            return None
        for g in reversed(cap.graphs):  # the graph that raised: the last one handed to the backend
            if g["error"] is not None and g["inputs"] is not None:
                return g["gm"], g["inputs"]
    if row["status"] == Status.MISMATCH:
        for k, g in enumerate(cap.graphs):
            if g["outputs"] is None:
                continue
            try:
                if not _breach(g["gm"], g["inputs"], g["outputs"], p).ok:
                    return g["gm"], g["inputs"]
            except Exception as exc:  # a graph the repro cannot render: not one a repro can show
                if notes is not None:
                    notes.append(f"not judged: graph {k + 1} ({count_nodes(g['gm'])} nodes): {exc}"[:200])
    return None


def _breach(gm: torch.fx.GraphModule, inputs: list[Any], outs: list[Any], p: Prepared) -> Comparison:
    """:func:`_graph_breach`; on a device, against the graph as the repro renders it, run on the CPU
    (the graph run eagerly on the device would share the device's bug); raises where it cannot be
    rendered."""
    if p.spec.device == "cpu":
        return _graph_breach(gm, inputs, outs, p)
    cpu_inputs = [_on_cpu(a) for a in inputs]
    ref32, ref64 = Rendered(gm, cpu_inputs, p.spec.device).references(cpu_inputs)
    return _judged([_on_cpu(o) for o in outs], ref32, ref64, p)


def _on_cpu(a: Any) -> Any:
    return a.detach().to("cpu").contiguous() if isinstance(a, torch.Tensor) else a


def guard_graph(
    p: Prepared, row: dict[str, Any], seed: int
) -> tuple[torch.fx.GraphModule, list[torch.Tensor], list[tuple[int, int, int]]] | None:
    """For an error raised after the backend returned (no captured graph raised it): the last graph
    the backend compiled, at torch level, with each symbolic size its placeholder carried read from
    a tensor instead (``x.size(d)``), the tensors it was compiled for, and the narrowing of a first
    call at other sizes (input index, dimension, length) that makes the call on them a recompile.
    None where the error is another, or a size cannot be traced to a tensor's dimension."""
    cap, outer = captured_run(p, seed, keep_compiled_on=True)
    want = (row.get("error") or {}).get("signature")
    if outer is None or error_info(outer)["signature"] != want or not cap.graphs:
        return None
    if not raised_building_guards(outer):
        return None
    if any(g["error"] is not None for g in cap.graphs):
        return None  # a graph raised: failing_graph's case
    g = cap.graphs[-1]
    gm = copy.deepcopy(g["gm"])
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    values = [n.meta.get("example_value") for n in placeholders]
    if len(values) != len(g["compiled_on"]):
        return None
    tensors = [i for i, v in enumerate(values) if isinstance(v, torch.Tensor)]
    symbols: dict[Any, tuple[int, int]] = {}  # a size's symbol -> (placeholder index, dimension)
    for j in tensors:
        for d, size in enumerate(values[j].shape):
            if isinstance(size, torch.SymInt):
                symbols.setdefault(size.node.expr, (j, d))
    for v in values:
        if isinstance(v, torch.SymInt):
            if v.node.expr not in symbols:
                return None
        elif not isinstance(v, torch.Tensor):
            return None  # a Python scalar dynamo kept as an input: not a graph of tensors
    first: list[tuple[int, int, int]] = []
    for k, j in enumerate(tensors):
        for d, size in enumerate(values[j].shape):
            if not isinstance(size, torch.SymInt):
                continue
            if size.node.expr not in symbols or not size.node.expr.is_Symbol:
                return None  # a size that is an expression of others: no narrowing keeps it consistent
            hint = g["compiled_on"][j].shape[d]
            if hint < 3:
                return None
            first.append((k, d, hint - 1))  # still above dynamo's 0/1 specialisation
    last = placeholders[-1]
    for i, n in enumerate(placeholders):
        if isinstance(values[i], torch.SymInt):
            j, d = symbols[values[i].node.expr]
            with gm.graph.inserting_after(last):
                size = gm.graph.call_method("size", (placeholders[j], d))
            last = size
            n.replace_all_uses_with(size)
            gm.graph.erase_node(n)
    for k, n in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        n._rename(f"arg{k}")  # dynamo's names spell a parameter's whole module path: too long for a repro
    gm.recompile()
    inputs = [g["compiled_on"][j] for j in tensors]
    return gm, inputs, first


class Rendered:
    """``gm`` as ``repro.py`` will run it (the same source, from the same renderer): ``module`` the
    ``Graph`` module, run eagerly for the references (``fp64``: floating dtype arguments raised, as
    the repro's ``FP64``), and ``target()`` what the repro compiles, traced (or not) while
    ``on_device`` makes each device argument ``device``, as the repro's ``ON_DEVICE``."""

    def __init__(self, gm: torch.fx.GraphModule, inputs: list[Any], device: str | None = None) -> None:
        import operator

        self.data, _ = describe_graph(gm, inputs, level="torch")
        self.fp64 = self.on_device = False
        namespace: dict[str, Any] = {
            "torch": torch,
            "operator": operator,
            "_dt": lambda dtype: torch.float64 if self.fp64 and dtype.is_floating_point else dtype,
            "_dev": lambda: torch.device(device) if self.on_device and device else torch.device("cpu"),
        }
        exec(compile(graph_source(self.data), "<repro graph>", "exec"), namespace)  # Zoo's own rendering
        self.module = namespace["graph"]

    def target(self) -> Callable:
        """What repro.py's main() compiles: the FX GraphModule traced from the module, or (where FX
        cannot trace it) the module itself."""
        return torch.fx.symbolic_trace(self.module) if fx_traceable(self.data) else self.module

    def references(self, inputs: list[Any]) -> tuple[list[Any], list[Any]]:
        """The graph on the CPU in fp32 and in fp64, eagerly, as repro.py computes its references."""
        fresh = lambda xs: [a.clone() if isinstance(a, torch.Tensor) else a for a in xs]  # noqa: E731
        with torch.no_grad():  # each run on its own copies: a graph may write into an input
            ref32 = self.module(*fresh(inputs))
            self.fp64 = True
            try:
                ref64 = self.module(*fresh([_up(a) for a in inputs]))
            finally:
                self.fp64 = False
        as_list = lambda r: list(r) if isinstance(r, (list, tuple)) else [r]  # noqa: E731
        return as_list(ref32), as_list(ref64)


def as_repro_function(gm: torch.fx.GraphModule, inputs: list[Any]) -> Callable:
    """``gm`` as the module ``repro.py`` will compile: dynamo guards a plain function differently
    from a module, and the backend's message can change with it."""
    return Rendered(gm, inputs).target()


GUARD_FILE = "torch/_dynamo/guards.py"


def raised_building_guards(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or what it was raised from) came while dynamo built the guards of a frame it
    had compiled (``torch/_dynamo/guards.py``, ``ShapeEnv.produce_guards*``): after the backend
    returned. ``repro.py``'s ``in_guards`` asks the same."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        tb = exc.__traceback__
        while tb is not None:
            code = tb.tb_frame.f_code
            if code.co_name.startswith("produce_guards") or code.co_filename.replace(os.sep, "/").endswith(GUARD_FILE):
                return True
            tb = tb.tb_next
        exc = exc.__cause__ or exc.__context__
    return False


def narrowed(inputs: list[Any], first: list[tuple[int, int, int]]) -> list[Any]:
    out = list(inputs)
    for k, d, length in first:
        out[k] = out[k].narrow(d, 0, length)
    return out


def recompile_predicate(p: Prepared, row: dict[str, Any]) -> Callable[..., bool]:
    """Does this torch-level graph, called on the narrowed inputs and then on the inputs, fail on
    the backend as the row did: with its signature, or (the row's failure came building dynamo's
    guards) building them too? The message of the one guard bug changes with how the graph is
    wrapped (a plain graph vs. the model's frame); where it is raised does not."""
    want = (row.get("error") or {}).get("signature")

    def fails(gm: torch.fx.GraphModule, inputs: list[Any], first: list[tuple[int, int, int]]) -> bool:
        torch._dynamo.reset()
        compiled = torch.compile(as_repro_function(gm, inputs), backend=p.spec.compiler)
        try:
            with torch.no_grad():
                if first:
                    compiled(*narrowed(inputs, first))
                compiled(*inputs)
        except Exception as exc:
            fails.seen = error_info(exc)["signature"]  # type: ignore[attr-defined]
            return fails.seen == want or raised_building_guards(exc)  # type: ignore[attr-defined]
        fails.seen = None  # type: ignore[attr-defined]
        return False

    return fails


def smallest_cut(
    gm: torch.fx.GraphModule,
    inputs: list[Any],
    first: list[tuple[int, int, int]],
    fails: Callable[..., bool],
    budget_s: float,
) -> tuple[torch.fx.GraphModule, list[Any], list[tuple[int, int, int]]]:
    """The smallest failing cut of the graph found in ``budget_s``, with the placeholders nothing uses
    dropped; the whole graph where no cut fails. Two kinds of cut after the k-th node, each searched:

    * a **prefix**: what comes after the k-th node goes, in-place writes too. Failing is not
      monotone in k (a cut ending on a size, a view or a masked score may pass where a shorter one
      fails: Longformer's ``as_strided``), so the cuts before the one a binary search found are
      tried in order;
    * a **slice**: the k-th node as the output, with what it needs and what FX will not drop as
      dead code (``operator.setitem``; an in-place method whose result is unused goes), by binary
      search.

    Both binary searches run first; the prefixes before the one found are then tried in order in
    what is left of ``budget_s``, each only if it has fewer nodes than the best cut so far. Every
    cut returned was seen to fail. The one with fewer nodes is returned."""
    compute = [n.name for n in gm.graph.nodes if n.op not in ("placeholder", "output")]
    t0 = time.perf_counter()

    def cut(k: int, prefix: bool) -> tuple[torch.fx.GraphModule, list[Any], list[tuple[int, int, int]]]:
        g = copy.deepcopy(gm)
        nodes = {n.name: n for n in g.graph.nodes}
        output = next(n for n in g.graph.nodes if n.op == "output")
        output.args = ((nodes[compute[k]],),)
        after = set(compute[k + 1 :]) if prefix else set()
        for n in reversed(list(g.graph.nodes)):
            if n.name in after:
                g.graph.erase_node(n)
        g.graph.eliminate_dead_code()
        placeholders = [n for n in g.graph.nodes if n.op == "placeholder"]
        keep = [i for i, n in enumerate(placeholders) if n.users]
        for i, n in enumerate(placeholders):
            if i not in keep:
                g.graph.erase_node(n)
        g.recompile()
        index = {old: new for new, old in enumerate(keep)}
        return g, [inputs[i] for i in keep], [(index[k2], d, n) for k2, d, n in first if k2 in index]

    def failing(
        k: int, prefix: bool, under: int | None = None
    ) -> tuple[torch.fx.GraphModule, list[Any], list[tuple[int, int, int]]] | None:
        """The cut if it fails (compiled only where it has fewer nodes than ``under``), else None."""
        try:
            candidate = cut(k, prefix)
            if under is not None and count_nodes(candidate[0]) >= under:
                return None
            return candidate if fails(*candidate) else None
        except Exception:
            return None

    def binary(prefix: bool) -> tuple[Any, int, set[int]]:
        lo, hi, at, last, tried = 0, len(compute) - 1, None, -1, set()
        while lo <= hi and time.perf_counter() - t0 < budget_s:
            mid = (lo + hi) // 2
            tried.add(mid)
            candidate = failing(mid, prefix)
            if candidate is not None:
                at, hi, last = candidate, mid - 1, mid
            else:
                lo = mid + 1
        return at, last, tried

    # both binary searches first (each a few compiles), then the prefixes before the one found, in
    # what is left of the budget, each tried only if it is smaller than the best so far
    at_prefix, last, tried = binary(True)
    at_slice, _, _ = binary(False)
    found = [c for c in (at_prefix, at_slice) if c is not None]
    for k in (k for k in range(last) if k not in tried):
        if time.perf_counter() - t0 >= budget_s:
            break
        candidate = failing(k, True, min((count_nodes(c[0]) for c in found), default=None))
        if candidate is not None:
            found.append(candidate)
            break
    return min(found, key=lambda c: count_nodes(c[0]), default=(gm, inputs, first))


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
    if tri["attribution"] == "device_eager" and row["status"] != Status.MISMATCH:
        stage("minify")
        try:
            if _op_repro(p, row, tri, req.seed, outbox):
                return row
        except Exception as exc:  # the verdict and attribution stand
            tri["note"] = f"no op-level repro: {error_info(exc)['signature'][:300]}"
    if tri["attribution"] == "device_compile":  # a compiler on a device (rungs() gives it no other way)
        stage("minify")
        try:
            unjudged: list[str] = []
            found = failing_graph(p, row, req.seed, unjudged)
            if found is None:
                tri["note"] = "no graph the backend compiled fails on its own inputs: the repro is the model" + (
                    f" ({'; '.join(unjudged)})"[:500] if unjudged else ""
                )
            elif _torch_graph_repro(p, row, tri, *found, outbox):
                return row
        except Exception as exc:  # torch gave up tracing or compiling it: the verdict and attribution stand
            tri["note"] = f"no torch-level repro: {error_info(exc)['signature'][:300]}"
        tri["repro_kind"] = "model"
        return row
    if tri["attribution"] != "backend" or not p.spec.compiler or p.spec.device != "cpu":
        tri["repro_kind"] = "model"  # dynamo's or AOTAutograd's failure, or a device: the model is the repro
        return row
    stage("minify")
    found = failing_graph(p, row, req.seed)
    if found is None and row["status"] != Status.MISMATCH:
        try:
            if _guard_repro(p, row, tri, req.seed, outbox):
                return row
        except Exception as exc:  # torch gave up tracing or compiling it: the verdict and attribution stand
            tri["note"] = f"no torch-level repro: {error_info(exc)['signature'][:300]}"
    if found is None:
        tri["repro_kind"] = "model"
        failed = (row.get("details") or {}).get("failed_input") or {}
        if tri.get("note"):
            pass
        elif failed.get("index"):
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
        try:
            if _torch_graph_repro(p, row, tri, gm, inputs, outbox):
                return row
        except Exception as exc:  # torch gave up tracing or compiling it: the verdict and attribution stand
            tri["note"] = f"{tri.get('note', '')}; no torch-level repro either: {error_info(exc)['signature'][:200]}"
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


def graph_predicate(p: Prepared, row: dict[str, Any]) -> Callable[..., bool]:
    """Does this torch-level graph, compiled alone on the backend as ``repro.py`` compiles it (the
    FX module dynamo would hand it, on contiguous CPU inputs as the repro loads them, moved to the
    backend's device), fail as the row did: with its error signature, or for a mismatch, outside
    the budget (against the same graph on the CPU in fp32 and fp64, as the repro judges it)?"""
    want = (row.get("error") or {}).get("signature")
    mismatch = row["status"] == Status.MISMATCH
    device = p.spec.device

    def fails(gm: torch.fx.GraphModule, inputs: list[Any], first: list[tuple[int, int, int]]) -> bool:
        torch._dynamo.reset()
        inputs = [_on_cpu(a) for a in inputs]
        graph = Rendered(gm, inputs, device)
        run_inputs = [a.to(device, copy=True) if isinstance(a, torch.Tensor) else a for a in inputs]
        graph.on_device = device != "cpu"
        try:
            compiled = torch.compile(graph.target(), backend=p.spec.compiler)
            with torch.no_grad():
                if first:
                    compiled(*narrowed(run_inputs, first))
                out = compiled(*run_inputs)
                outs = [_on_cpu(o) for o in (out if isinstance(out, (list, tuple)) else [out])]
        except Exception as exc:
            fails.seen = error_info(exc)["signature"]  # type: ignore[attr-defined]
            return not mismatch and fails.seen == want  # type: ignore[attr-defined]
        finally:
            graph.on_device = False
        fails.seen = None  # type: ignore[attr-defined]
        if not mismatch:
            return False
        try:
            ref32, ref64 = graph.references(inputs)
            cmp = _judged(outs, ref32, ref64, p)
        except Exception:
            return False
        fails.seen = "; ".join(cmp.problems)[:300] if not cmp.ok else None  # type: ignore[attr-defined]
        return not cmp.ok

    return fails


def _torch_graph_repro(
    p: Prepared, row: dict[str, Any], tri: dict[str, Any], gm: torch.fx.GraphModule, inputs: list[Any],
    outbox: str | None,
) -> bool:  # fmt: skip
    """Where the failing graph does not fail once lowered to ATen (the backend lowers what dynamo
    hands it its own way): the same graph at torch level, compiled alone as dynamo handed it, cut to
    its shortest failing prefix and handed back; False (the note says why) where it does not fail."""
    fails = graph_predicate(p, row)
    nodes = count_nodes(gm)
    if not fails(gm, inputs, []):
        seen = getattr(fails, "seen", None)
        tri["note"] = (
            f"{tri.get('note', '')}; nor does the graph dynamo handed the backend ({nodes} torch-level nodes) "
            + (f"compiled alone (it fails with another message: {seen})" if seen else "compiled alone")
        )
        return False
    aten_nodes = tri.get("graph_nodes")
    t0 = time.perf_counter()
    small, small_inputs, _ = smallest_cut(gm, inputs, [], fails, MINIFY_BUDGET_S)
    tri["minify_s"] = round(time.perf_counter() - t0, 1)
    tri["graph_nodes"], tri["repro_nodes"] = nodes, count_nodes(small)
    why = (
        f"the failing graph does not fail once lowered to ATen ({aten_nodes} nodes) and compiled alone: the "
        "backend lowers what dynamo hands it its own way"
        if p.spec.device == "cpu"
        else f"the failing graph is compiled for {p.spec.device} and judged against itself on the CPU"
    )
    tri["note"] = (
        f"{why}. The repro is the graph dynamo handed the backend, at torch level, compiled as dynamo hands it, "
        f"cut to its shortest failing prefix ({nodes} -> {count_nodes(small)} nodes)"
    )
    tri["repro_kind"] = "model"
    if outbox:
        small = copy.deepcopy(small)
        for k, n in enumerate(n for n in small.graph.nodes if n.op == "placeholder"):
            n._rename(f"arg{k}")  # dynamo's names spell a parameter's whole module path: too long for a repro
        small.recompile()
        try:
            data, tensors = describe_graph(small, small_inputs, level="torch")
        except BadGraph as exc:
            tri["note"] += f"; graph not describable: {exc}"
            return True
        from safetensors.torch import save_file

        data["expect"] = "mismatch" if row["status"] == Status.MISMATCH else "error"
        with open(os.path.join(outbox, "graph.json"), "w") as f:
            json.dump(data, f)
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(outbox, "repro.safetensors"))
        tri["repro_kind"] = "graph"
    return True


def _guard_repro(p: Prepared, row: dict[str, Any], tri: dict[str, Any], seed: int, outbox: str | None) -> bool:
    """The torch-level repro of a failure no graph raises (:func:`guard_graph`), cut to its shortest
    failing prefix and handed back; False (with a note) where there is none that fails."""
    found = guard_graph(p, row, seed)
    if found is None:
        return False
    gm, inputs, first = found
    fails = recompile_predicate(p, row)
    before = count_nodes(gm)
    if not fails(gm, inputs, first):
        seen = getattr(fails, "seen", None)
        tri["note"] = (
            f"the last graph the backend compiled ({before} torch-level nodes), compiled alone on its inputs "
            f"(narrowed first, then as they were), "
            + (f"fails with another message ({seen}):" if seen else "does not fail:")
            + " the repro is the model"
        )
        return False
    t0 = time.perf_counter()
    small, small_inputs, small_first = smallest_cut(gm, inputs, first, fails, MINIFY_BUDGET_S)
    tri["minify_s"] = round(time.perf_counter() - t0, 1)
    fails(small, small_inputs, small_first)
    tri["repro_signature"] = getattr(fails, "seen", None) or ""
    tri["graph_nodes"], tri["repro_nodes"] = before, count_nodes(small)
    how = "on its inputs narrowed, then as they are (a recompile)" if small_first else "once on its inputs"
    tri["note"] = (
        f"the failure comes as dynamo builds the guards of a graph the backend compiled, not from one the backend "
        f"raises on: the repro is that graph at torch level, called {how}, cut to its shortest failing prefix "
        f"({before} -> {count_nodes(small)} nodes)"
    )
    tri["repro_kind"] = "model"
    if outbox:
        try:
            data, tensors = describe_graph(small, small_inputs, level="torch", first_call=small_first)
        except BadGraph as exc:
            tri["note"] = f"graph not describable: {exc}"
            return True
        from safetensors.torch import save_file

        with open(os.path.join(outbox, "graph.json"), "w") as f:
            json.dump(data, f)
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(outbox, "repro.safetensors"))
        tri["repro_kind"] = "graph"
    return True


# ------------------------------------------------------------------ a device's eager failure: the op


class _FailingOp:
    """A dispatch mode over the model's eager run on the device. It keeps (by reference, copied
    nothing while the mode runs) the first ATen op that raised the row's error, and the ops whose
    output shapes were not those torch's meta kernels give: candidates :meth:`settle` checks
    against the CPU's own kernel once the run is over."""

    MAX_CANDIDATES = 256

    def __init__(self, signature: str | None) -> None:
        from torch.utils._python_dispatch import TorchDispatchMode

        owner = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
                owner.calls += 1
                try:
                    out = func(*args, **(kwargs or {}))
                except Exception as exc:  # the first that raised the row's error (the model may catch others)
                    if owner.raised is None and error_info(exc)["signature"] == signature:
                        owner.raised = (owner.calls, func, args, kwargs)
                    raise
                if len(owner.candidates) < owner.MAX_CANDIDATES:
                    # the first output (an op's aux outputs, batch norm's saved statistics, differ by design)
                    expected, got = _meta_shapes(func, args, kwargs), _shapes(out)[:1]
                    if expected is not None and expected[:1] != got:  # meta kernels: a first look
                        owner.candidates.append((owner.calls, func, args, kwargs, got))
                return out

        self.calls = 0
        self.raised: tuple[int, Any, Any, Any] | None = None
        self.candidates: list[tuple[int, Any, Any, Any, list[Any]]] = []
        self.mode = Mode()

    def settle(self) -> tuple[Any, Any, str] | None:
        """(op, CPU copies of its (args, kwargs), kind): the first op whose shapes on the device the
        CPU's kernel does not give, when it came before the op that raised (``"shape"``: the raise
        met its wrong shapes), else the op that raised (``"error"``), else that first op."""
        shape = None
        for seq, func, args, kwargs, got in self.candidates:
            on_cpu = _copies(args, kwargs)
            cpu = _cpu_shapes(func, on_cpu)
            if cpu is not None and cpu[:1] != got:  # the CPU's kernel agrees: the device's shapes are wrong
                shape = (seq, func, on_cpu)
                break
        if self.raised is not None and (shape is None or shape[0] > self.raised[0]):
            _, func, args, kwargs = self.raised
            on_cpu = _copies(args, kwargs)
            return (func, on_cpu, "error") if on_cpu is not None else None
        return (shape[1], shape[2], "shape") if shape is not None else None


def _copies(args: Any, kwargs: Any) -> Any:
    """CPU copies of an op's (args, kwargs); None where they cannot be read back."""
    from torch.utils._pytree import tree_map

    try:
        return tree_map(_cpu_copy, (tuple(args), dict(kwargs or {})))
    except Exception:
        return None


def _shapes(out: Any) -> list[Any]:
    from torch.utils._pytree import tree_leaves

    return [tuple(t.shape) for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def _cpu_shapes(func: Any, on_cpu: Any) -> list[Any] | None:
    """The output shapes of ``func`` on the CPU copies of its inputs; None where it raises there."""
    if on_cpu is None:
        return None
    args, kwargs = on_cpu
    try:
        return _shapes(func(*args, **kwargs))
    except Exception:
        return None


def _meta_shapes(func: Any, args: Any, kwargs: Any) -> list[Any] | None:
    """The output shapes torch's meta kernel gives ``func`` on these inputs (the shapes every
    device must produce); None where there is no meta kernel or an input is not a plain tensor."""
    from torch.utils._pytree import tree_map

    def meta(a: Any) -> Any:
        if isinstance(a, torch.Tensor):
            return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="meta")
        if isinstance(a, torch.device):
            return torch.device("meta")
        return a

    try:
        return _shapes(func(*tree_map(meta, tuple(args)), **tree_map(meta, dict(kwargs or {}))))
    except Exception:
        return None


def _cpu_copy(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return a.detach().to("cpu").clone()
    if isinstance(a, torch.device):  # a factory op's device: the repro only moves tensor inputs
        raise BadGraph("an op that takes a device")
    return a


def failing_op(p: Prepared, row: dict[str, Any], seed: int) -> tuple[Any, list[Any], dict[str, Any], str] | None:
    """For an error the device raised running the model eagerly: the ATen op that raised it (the
    first one whose kernel raised the row's signature), its tensors copied to the CPU, and
    ``"error"``; where an op gave other output shapes on the device than on the CPU before that (the
    op that raised then met the wrong shapes), or where no op raised it (a composite's own check did,
    as ``reshape``'s), the first such op, and ``"shape"``."""
    want = (row.get("error") or {}).get("signature")
    watch = _FailingOp(want)
    device, dtype = torch.device(p.spec.device), getattr(torch, p.spec.dtype)
    model = copy.deepcopy(p.model).to(device=device, dtype=dtype)
    try:
        with torch.no_grad(), watch.mode:
            for i, x in enumerate(p.inputs):
                torch.manual_seed(seed + i)
                detach_cpu(model(**to_device(x, device, dtype)))
    except Exception:
        pass
    found = watch.settle()
    if found is None:
        return None
    func, (args, kwargs), kind = found
    if not isinstance(func, torch._ops.OpOverload):
        return None
    return func, list(args), kwargs, kind


def op_graph(func: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[torch.fx.GraphModule, list[torch.Tensor]]:
    """One ATen op as a graph: each tensor argument a placeholder (in the order met), the rest literals."""
    from torch.utils._pytree import tree_flatten, tree_unflatten

    flat, spec = tree_flatten((args, kwargs))
    g = torch.fx.Graph()
    inputs: list[torch.Tensor] = []
    for i, a in enumerate(flat):
        if isinstance(a, torch.Tensor):
            flat[i] = g.placeholder(f"arg{len(inputs)}")
            inputs.append(a)
    call_args, call_kwargs = tree_unflatten(flat, spec)
    g.output(g.call_function(func, tuple(call_args), call_kwargs))
    return torch.fx.GraphModule(torch.nn.Module(), g), inputs


def _op_fails(gm: torch.fx.GraphModule, inputs: list[torch.Tensor], kind: str, device: str, want: str | None) -> bool:
    """The one-op graph as ``repro.py`` runs it: on contiguous copies of its inputs moved to the
    device, read back; does it raise the row's error, or (``shape``) give its first output another
    shape than on the CPU?"""
    cpu = [a.contiguous().clone() for a in inputs]
    try:
        with torch.no_grad():
            out = gm(*[a.to(device) for a in cpu])
            outs = out if isinstance(out, (list, tuple)) else [out]
            got = [t.to("cpu") for t in outs if isinstance(t, torch.Tensor)]
    except Exception as exc:
        return kind == "error" and error_info(exc)["signature"] == want
    if kind != "shape":
        return False
    try:
        with torch.no_grad():
            ref = gm(*cpu)
    except Exception:
        return False
    refs = [t for t in (ref if isinstance(ref, (list, tuple)) else [ref]) if isinstance(t, torch.Tensor)]
    return bool(got and refs) and got[0].shape != refs[0].shape


def _op_repro(p: Prepared, row: dict[str, Any], tri: dict[str, Any], seed: int, outbox: str | None) -> bool:
    """The one ATen op that raised on the device, with its inputs, handed back as a one-node graph
    that ``repro.py`` runs eagerly on the device (and, as a control, on the CPU)."""
    found = failing_op(p, row, seed)
    if found is None:
        tri["note"] = "no single ATen op raised the row's error on the device in eager mode: the repro is the model"
        return False
    func, args, kwargs, kind = found
    gm, inputs = op_graph(func, args, kwargs)
    if not _op_fails(gm, inputs, kind, p.spec.device, (row.get("error") or {}).get("signature")):
        tri["note"] = (
            f"{func} {'raised' if kind == 'error' else 'gave other shapes'} in the model's run, but not run alone on "
            "contiguous copies of its inputs, as a repro would: the repro is the model"
        )
        return False
    tri["graph_nodes"] = tri["repro_nodes"] = 1
    tri["note"] = (
        f"the device raised the row's error in one ATen op, {func}, run eagerly: the repro calls that op on the "
        "device with the same inputs"
        if kind == "error"
        else f"the first ATen op whose output shapes on the device are not the CPU's is {func}, before the row's "
        f"error: the repro calls it on the device and on the CPU and compares"
    )
    tri["repro_kind"] = "model"
    if outbox:
        try:
            data, tensors = describe_graph(gm, inputs)
        except BadGraph as exc:
            tri["note"] += f"; op not describable: {exc}"
            return True
        from safetensors.torch import save_file

        if kind == "shape":
            data["expect"] = "shape"
        with open(os.path.join(outbox, "graph.json"), "w") as f:
            json.dump(data, f)
        save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(outbox, "repro.safetensors"))
        tri["repro_kind"] = "graph"
    return True
