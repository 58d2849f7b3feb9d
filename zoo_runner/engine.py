"""Validate one model in the current process: build, CPU references, target run, compare.

This is what the model process runs; :mod:`zoo_runner.launcher` wraps it in a child process with
time and memory budgets. Errors become statuses here; only the process dying escapes.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import math
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from . import backends, precision, shared_headers
from .builders import get_builder
from .compare import Comparison, compare, pooled_reference_error
from .exceptions import NonDeterministic, NotSupported, ReferenceError_, UnknownModel
from .inputs import describe
from .request import ValidationRequest, error_info
from .result import ValidationResult
from .statuses import PASSING, Reason, Status

log = logging.getLogger(__name__)
TIMING_RUNS = 3
# Tiers that build the very model another tier builds (the census stops after the references):
# their CPU references are one reference-cache entry, so a census then a tiny run computes the
# fp32 reference, its op census and its timing once, and the tiny run adds only the fp64 one.
SAME_BUILD_AS = {"census": "tiny"}
CENSUS_NO_FP64 = "not computed at the census tier (nothing is compared)"


def versions(device: str | None, compiler: str | None = None) -> dict[str, str]:
    import transformers

    from .version import __version__

    out = {"torch": torch.__version__, "transformers": transformers.__version__, "zoo": __version__}
    out.update(backends.backend_package_versions(device, compiler))
    return out


def _is_oom(exc: BaseException) -> bool:
    """True if ``exc`` or anything it wraps (compilers wrap errors) is an allocation failure."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, (MemoryError, torch.OutOfMemoryError)):
            return True
        msg = str(e).lower()
        if "out of memory" in msg or "can't allocate memory" in msg or "cannot allocate memory" in msg:
            return True
        todo += [e.__cause__, e.__context__, getattr(e, "inner_exception", None)]
    return False


def _is_compile_error(exc: BaseException) -> bool:
    try:
        import torch._dynamo.exc as dexc
    except ImportError:  # pragma: no cover
        return False
    kinds = tuple(
        k
        for k in (
            getattr(dexc, n, None)
            for n in (
                "BackendCompilerFailed",
                "Unsupported",
                "InternalTorchDynamoError",
                "TorchRuntimeError",
                "UserError",
            )
        )
        if k
    )
    return isinstance(exc, kinds) or _raised_while_compiling(exc)


def _raised_while_compiling(exc: BaseException) -> bool:
    """Whether ``exc`` came out of dynamo compiling a frame (building its graph or its guards, or
    the backend compiling it): such errors are not always dynamo's own exception types (an
    ``AssertionError`` or ``IndexError`` from guard building on a recompile for a new shape)."""
    tb = exc.__traceback__
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename.replace("\\", "/")
        if name.endswith("torch/_dynamo/convert_frame.py") and tb.tb_frame.f_code.co_name in (
            "_compile",
            "compile_inner",
            "_compile_inner",
        ):
            return True
        tb = tb.tb_next
    return False


class OpCensus(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts every ATen op executed."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[func._schema.name] += 1
        return func(*args, **(kwargs or {}))


def _to(obj: Any, device: Any = None, dtype: torch.dtype | None = None) -> Any:
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            return obj.to(device=device, dtype=dtype)
        return obj.to(device=device) if device is not None else obj
    if isinstance(obj, dict):
        return {k: _to(v, device, dtype) for k, v in obj.items()}
    return obj


def _detach_cpu(obj: Any) -> Any:
    from .compare import flatten

    return {k: v.detach().to("cpu") for k, v in flatten(obj)}


def finite_metrics(metrics: dict[str, Any]) -> list[str]:
    """JSON has no Inf/NaN: such metrics become null and are named in the returned list."""
    bad = [k for k, v in metrics.items() if isinstance(v, float) and not math.isfinite(v)]
    for k in bad:
        metrics[k] = None
    return bad


def _timed(fn: Callable[[], Any], runs: int = TIMING_RUNS, sync: Callable[[], None] | None = None) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        out = fn()  # alive until synced: a lazy device (XLA) computes only what is still referenced
        if sync:
            sync()
        times.append((time.perf_counter() - t0) * 1000)
        del out
    return statistics.median(times)


def _compile_cache() -> str | None:
    """``hit`` when every graph inductor compiled came from its FX graph cache (``ZOO_COMPILE_CACHE``),
    ``miss`` when none did, ``partial`` between; None for a compiler that does not say."""
    from torch._dynamo.utils import counters

    inductor = counters.get("inductor") or {}
    return backends.cache_verdict(int(inductor.get("fxgraph_cache_hit", 0)), int(inductor.get("fxgraph_cache_miss", 0)))


def _keep_inductor_headers() -> str | None:
    """Point inductor's precompiled C++ headers into its compile cache; returns their directory.

    Inductor keeps them in ``$TMPDIR/torchinductor_<user>/precompiled_headers``, not under
    ``TORCHINDUCTOR_CACHE_DIR``, and each model process has a TMPDIR of its own: every process
    rebuilt them, even on an FX graph cache hit (11 s of a 14 s warm compile of tiny BERT on 2 EPYC
    cores). Where Zoo shares its own read-only build (``ZOO_SHARED_HEADERS``, zoo_runner.shared_headers)
    they are linked from there into this run's directory; else they sit beside the FX graphs, in the
    model's namespace. None where neither is set, or where this torch keeps its headers elsewhere
    (then nothing changes)."""
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    shared = os.environ.get(shared_headers.ENV)
    if not root and not shared:
        return None
    from torch._inductor import codecache

    if not hasattr(codecache, "_HEADER_DIR"):
        return None
    headers = None
    if shared and os.path.isdir(shared):  # Zoo's own, read-only: linked into a directory of this run's
        run_headers = os.path.join(os.environ.get("TMPDIR") or tempfile.gettempdir(), "precompiled_headers")
        try:
            shared_headers.link_into(shared, run_headers)
            headers = run_headers
        except OSError as exc:  # Zoo's trouble, not the backend's: the namespace's own, as without them
            log.warning("shared inductor headers not linked (%s): building this process's own", exc)
    if headers is None and root:
        headers = os.path.join(root, "precompiled_headers")
    if headers is None:
        return None
    codecache._HEADER_DIR = headers
    codecache._HEADER_LOCK_DIR = os.path.join(headers, "locks")
    return headers


def _shared_isa_probes() -> int:
    """Copy the ISA probe libraries of Zoo's shared header build into this process's inductor cache,
    so inductor loads them instead of compiling its own (zoo_runner.shared_headers.build); returns
    how many it copied (0 without a shared build or a cache, or where this cache has them)."""
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    shared = os.environ.get(shared_headers.ENV)
    if not root or not shared or not os.path.isdir(shared):
        return 0
    try:
        copied = shared_headers.copy_isa_probes(shared, root)
    except OSError as exc:  # Zoo's trouble, not the backend's: inductor probes, as without them
        log.warning("inductor's shared ISA probes not copied (%s): this process probes its own", exc)
        return 0
    _trust_loaded_probes(shared_headers.probes_as_built(shared, root))
    return copied


def _trust_loaded_probes(libs: set[str]) -> None:
    """Inductor loads each probe library in a child Python (about 0.2 s each, six here) after
    building it; Zoo's builder loaded these very bytes under this interpreter and torch already.
    Those it skips; any other library (one this process built, one that differs) it loads as before.
    Inductor's private ``VecISA._probe_load``: where it moved, nothing changes."""
    from torch._inductor import cpu_vec_isa

    load = getattr(cpu_vec_isa.VecISA, "_probe_load", None)
    if not libs or load is None or getattr(load, "zoo_trusted", None) is not None:
        return

    def probe_load(isa: Any, output_path: str) -> bool:
        return os.path.realpath(output_path) in libs or load(isa, output_path)

    probe_load.zoo_trusted = libs  # type: ignore[attr-defined]
    cpu_vec_isa.VecISA._probe_load = probe_load


def _own_headers(directory: str | None) -> set[str]:
    """The precompiled headers in ``directory`` that are files of its own (not links to Zoo's)."""
    if not directory or not os.path.isdir(directory):
        return set()
    return {e.name for e in os.scandir(directory) if e.name.endswith(".gch") and e.is_file(follow_symlinks=False)}


def _thread_independent_kernels() -> bool:
    """Have inductor's C++ kernels read the thread count at run time instead of compiling it in,
    where a compile cache is shared: otherwise ``zoo run`` (one thread per model process, two at
    once) and ``zoo validate`` (every core) key their FX graphs differently and never share one.
    Inductor keeps the resolved thread count out of its cache key under ``cpp.dynamic_threads``.
    Returns whether it was set (False without a cache: nothing to share, fixed counts kept)."""
    if not os.environ.get("TORCHINDUCTOR_CACHE_DIR"):
        return False
    from torch._inductor import config

    if not hasattr(config.cpp, "dynamic_threads"):
        return False
    config.cpp.dynamic_threads = True
    return True


def _compile_threads() -> int:
    """Inductor compiles C++ kernels in a pool of worker processes, one per core of the machine;
    a model process gets its share of the cores (``zoo run``: one each, two at once), and the pool
    then only adds its start (two interpreters importing torch) to a compile that cannot run
    faster: 12 % of two cold tiny-BERT compiles at once on 2 EPYC cores. Its share it is."""
    from torch._inductor import config

    config.compile_threads = max(1, min(int(config.compile_threads or 1), torch.get_num_threads()))
    return config.compile_threads


def _graph_breaks(top: int = 5) -> tuple[int, list[str]]:
    """Graph breaks dynamo counted, and their most frequent reasons (first line each). Recent torch
    files some breaks (an LSTM dynamo will not trace) under "unimplemented" rather than "graph_break"."""
    from torch._dynamo.utils import counters

    kinds = [counters.get("graph_break") or {}, counters.get("unimplemented") or {}]
    count = max(int(sum(k.values())) for k in kinds)
    merged: dict[str, int] = {}
    for kind in kinds:
        for reason, n in kind.items():
            line = str(reason).strip().splitlines()[0][:200] if str(reason).strip() else "unknown"
            merged[line] = max(merged.get(line, 0), int(n))
    return count, [r for r, _ in sorted(merged.items(), key=lambda kv: -kv[1])[:top]]


class _StageFailed(Exception):
    """A stage of :func:`_validate` ended the validation: the result's ``status`` (and ``reason``),
    ``exc`` as its error, and ``details`` to record beside it."""

    def __init__(self, status: Status, exc: BaseException, reason: Reason | None = None, **details: Any) -> None:
        super().__init__(f"{status.value}: {type(exc).__name__}: {exc}")
        self.status, self.exc, self.reason, self.details = status, exc, reason, details


def _zoos_failure(exc: BaseException, policy: bool = True, **details: Any) -> _StageFailed:
    """``exc`` raised before the backend ran, or where Zoo compares: Zoo's failure, never the
    backend's. ``unsupported`` (its reason) for a policy refusal where ``policy``, a
    ``nondeterministic`` ``reference_error`` for a model whose CPU runs differ, else
    ``reference_error``."""
    if policy and isinstance(exc, NotSupported):
        return _StageFailed(Status.UNSUPPORTED, exc, exc.reason)
    if isinstance(exc, NonDeterministic):
        return _StageFailed(Status.REFERENCE_ERROR, exc, Reason.NONDETERMINISTIC, **details)
    return _StageFailed(Status.REFERENCE_ERROR, exc, **details)


class StageTimer:
    """The ``stage`` callback of :func:`validate_here`, timed: passes each stage on and keeps the
    seconds spent in each (``setup`` before the first: plugins, versions, precision), for
    ``details.stage_s`` and the harness benchmark's breakdown of where a model's time goes."""

    def __init__(self, stage: Callable[[str], None]) -> None:
        self._stage, self._current, self._since = stage, "setup", time.perf_counter()
        self._seconds: dict[str, float] = {}

    def __call__(self, name: str) -> None:
        self._close()
        self._current = name
        self._stage(name)

    def _close(self) -> None:
        now = time.perf_counter()
        self._seconds[self._current] = self._seconds.get(self._current, 0.0) + now - self._since
        self._since = now

    def durations(self) -> dict[str, float]:
        """Seconds per stage reached so far, in the order reached (the current one closed now)."""
        self._close()
        return {k: round(v, 3) for k, v in self._seconds.items()}


def validate_here(
    req: ValidationRequest, stage: Callable[[str], None] = lambda s: None, keep: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Run one validation in this process and return a SPEC result dict. With ``keep``, what it
    prepared before the backend ran (:class:`Prepared`) is left in ``keep["prepared"]`` for the triage."""
    t_start = time.perf_counter()
    result = ValidationResult.empty(req)
    timer = StageTimer(stage)
    if req.threads:  # this process's share of the cores, when several run at once (request.share_of_cores)
        torch.set_num_threads(req.threads)
    result.details["threads"] = torch.get_num_threads()
    try:
        _validate(req, result, timer, keep)
    except _StageFailed as failed:
        result.fail(failed.status, failed.exc, failed.reason)
        result.details.update(failed.details)
    finally:
        result.duration_s = round(time.perf_counter() - t_start, 3)
        result.details["stage_s"] = timer.durations()
    return _flag_known_failure(result).to_dict()


def _flag_known_failure(result: ValidationResult) -> ValidationResult:
    """A failing result whose quirk row names it a known failure keeps its status and says so;
    a passing one says the row can go (``known_failure_fixed``)."""
    known = result.details.pop("quirk_known_failure", None)
    if known:
        result.details["known_failure_fixed" if result.status in PASSING else "known_failure"] = known
    return result


def _validate(
    req: ValidationRequest, result: ValidationResult, stage: Callable[[str], None], keep: dict[str, Any] | None = None
) -> None:
    """The pipeline: build → inputs → references → target → compare, each stage a function that
    returns what the next needs or raises :class:`_StageFailed`; ``result`` is filled as it goes."""
    backends.load_plugins(req.plugins)
    spec = backends.BackendSpec.parse(req.backend)
    result.device, result.dtype = spec.device, spec.dtype
    result.backend = str(spec) if req.backend != "auto" else req.backend
    result.versions = versions(spec.device, spec.compiler)
    judged_at, result.details["precision_source"] = precision.resolve(req.precision, spec)
    result.precision = judged_at

    stage("build")
    plan, built = _build(req, result)
    all_inputs = _inputs(req, built)
    result.details["input_shapes"] = [describe(x) for x in all_inputs]
    result.fingerprint = plan.fingerprint(built.library, req.tier)
    result.details["parameters"] = sum(p.numel() for p in built.model.parameters())
    build_tier = SAME_BUILD_AS.get(req.tier, req.tier)
    build_fp = plan.fingerprint(built.library, build_tier) if build_tier != req.tier else result.fingerprint

    target_model = _pristine_copy(req, built.model, result)
    stage("reference")
    ref32, ref64, ref_at = _run_references(req, spec, built.model, all_inputs, result, judged_at, build_fp)
    if req.tier == "census":
        result.status = Status.PASS_WITH_FALLBACK if _predicted_fallbacks(spec, result) else Status.PASS
        return

    if keep is not None:  # the model as built, before the backend meets it, for the triage's re-runs
        try:
            pristine = copy.deepcopy(target_model)
        except Exception:
            pristine = target_model
        keep["prepared"] = Prepared(spec, built, pristine, all_inputs, ref32, ref64, ref_at, judged_at)

    stage("target")
    outs = _run_target(req, spec, target_model, all_inputs, result)

    stage("compare")
    cmp = _compare(spec, built, outs, ref32, ref64, ref_at, result, judged_at)
    _verdict(cmp, result)
    if result.status == Status.MISMATCH:
        try:
            _check_seed_independent(req, built.model, target_model is built.model, all_inputs, ref32, result)
        except NonDeterministic as exc:  # the mismatch's metrics stay, for the reader; the status is Zoo's
            raise _zoos_failure(exc, policy=False, stage="compare") from exc


@dataclass
class Prepared:
    """What a validation computes before the backend runs, for the triage to reuse: the backend,
    the built model (as built, never run), its inputs, the references and the judged precision."""

    spec: backends.BackendSpec
    built: Any
    model: torch.nn.Module
    inputs: list[dict]
    ref32: list[dict]
    ref64: list[dict]
    ref_at: list[dict]
    judged_at: str


def judge(p: Prepared, outs: list[Any]) -> Comparison:
    """The outputs of one run on every input against the references, at the judged precision."""
    cmp = Comparison()
    pooled = pooled_reference_error(p.ref_at, p.ref64) if p.ref_at is not p.ref32 else None
    for i, (out, r64, r_at) in enumerate(zip(outs, p.ref64, p.ref_at)):
        compare(
            out,
            r_at,
            r64,
            dtype=p.spec.dtype,
            tolerance_factor=p.built.tolerance_factor,
            result=cmp,
            label=f"input {i}",
            precision=p.judged_at,
            pooled=pooled,
        )
    return cmp


def is_compile_error(exc: BaseException) -> bool:
    """Whether ``exc`` was raised while compiling (a compile_error, not a runtime_error)."""
    return _is_compile_error(exc)


def to_device(obj: Any, device: Any = None, dtype: torch.dtype | None = None) -> Any:
    """Tensors of ``obj`` (nested) moved to ``device`` and floating ones cast to ``dtype``."""
    return _to(obj, device, dtype)


def detach_cpu(obj: Any) -> Any:
    """Tensors of ``obj`` (nested), detached, on the CPU."""
    return _detach_cpu(obj)


COPY_ROOM = 5  # the backend's own copy of the model is made when this many times its size fits the memory budget


def _pristine_copy(req: ValidationRequest, model: torch.nn.Module, result: ValidationResult) -> torch.nn.Module:
    """The model as built, for the backend, kept apart from the one the CPU reference runs: a forward
    can leave state behind that ``.to(device)`` does not move (Mimi caches its codebook as a plain
    tensor attribute on first use), and the backend must meet the model a user loads, not one the
    CPU has already run. A copy is made when five times the model's size fits in the memory budget
    (the model, its copy and the fp64 reference's copy at twice the size, with room for activations);
    otherwise (or when the model cannot be copied) the backend gets the reference's model and
    ``details.target_model`` says so."""
    tensors = [*model.parameters(), *model.buffers()]
    nbytes = sum(t.numel() * t.element_size() for t in tensors)
    if COPY_ROOM * nbytes > req.memory_gb * (1 << 30):
        result.details["target_model"] = "the reference's (no room for a copy)"
        return model
    try:
        return copy.deepcopy(model)
    except Exception as exc:  # a module that refuses deepcopy: run it as before
        result.details["target_model"] = f"the reference's (not copyable: {type(exc).__name__})"
        return model


def _build(req: ValidationRequest, result: ValidationResult) -> tuple[Any, Any]:
    """Stage 1: the builder's plan and the built model. A failure here is Zoo's (reference_error),
    or unsupported by policy; an unknown model propagates."""
    try:
        builder = get_builder(req.library or "transformers")
        plan = builder.plan(req)
        quirk = getattr(plan, "quirk", None)
        if quirk is not None and quirk.known_failure is not None:
            result.details["quirk_known_failure"] = quirk.known_failure.details()
        built = builder.build(req, plan)
    except UnknownModel:
        raise
    except Exception as exc:
        if "quirk_known_failure" not in result.details and req.model_id.startswith("arch:"):
            # a class whose default config fails its own validation has no plan: its row, by class name
            from .quirks import quirk_for

            quirk = quirk_for(req.model_id[len("arch:") :])
            if quirk is not None and quirk.known_failure is not None:
                result.details["quirk_known_failure"] = quirk.known_failure.details()
        raise _zoos_failure(exc) from exc
    result.library, result.architecture, result.task = built.library, built.architecture, built.task
    result.details["config_source"] = built.config_source
    result.details.update(built.details)
    return plan, built


def _inputs(req: ValidationRequest, built: Any) -> list[dict]:
    """Stage 2: one input per shape of the built model, each from its own seed."""
    try:
        return [built.make_inputs(shape, req.seed + i) for i, shape in enumerate(built.shapes)]
    except Exception as exc:
        raise _zoos_failure(exc) from exc


def _run_references(
    req: ValidationRequest,
    spec: backends.BackendSpec,
    model: torch.nn.Module,
    all_inputs: list[dict],
    result: ValidationResult,
    judged_at: str,
    build_fp: str | None,
) -> tuple[list[dict], list[dict], list[dict]]:
    """Stage 3: the CPU references, fp32 (with the op census) and fp64, from the reference cache
    when unchanged, and the one at the precision the backend is judged at (fp32's own at fp32)."""
    try:
        ref32, ref64 = _references(req, model, all_inputs, result, build_fp)
        ref_at = (
            _precision_reference(req, model, all_inputs, result, judged_at, ref32, ref64, build_fp)
            if req.tier != "census" and spec.dtype == "float32"
            else ref32
        )
    except Exception as exc:
        raise _zoos_failure(exc, policy=False) from exc
    return ref32, ref64, ref_at


def _run_target(
    req: ValidationRequest,
    spec: backends.BackendSpec,
    model: torch.nn.Module,
    all_inputs: list[dict],
    result: ValidationResult,
) -> list[dict]:
    """Stage 4: the backend under test, on every input (compiled first where it compiles); its
    outputs on the CPU. A failure is the backend's: oom, compile_error or runtime_error."""
    try:
        backends.check_backend(spec)
    except Exception as exc:
        raise _StageFailed(Status.RUNTIME_ERROR, exc) from exc
    metrics = result.metrics
    dtype = getattr(torch, spec.dtype)
    device = torch.device(spec.device)
    tracker = backends.fallback_tracker(spec.device, spec.compiler)
    sync = getattr(getattr(torch, spec.device, None), "synchronize", None) if spec.device != "cpu" else None
    outs: list[Any] = []
    phase = "runtime"
    header_dir, headers_before = None, set()
    try:
        target = model.to(device=device, dtype=dtype)
        runner = target
        if spec.compiler:
            from torch import _dynamo as dynamo
            from torch._dynamo.utils import counters

            dynamo.reset()
            counters.clear()
            if spec.compiler == "inductor" or spec.compiler in backends.INDUCTOR_FALLBACK_COMPILERS:
                # inductor compiles here, or takes what the compiler hands it (OpenVINO's compile_fx)
                header_dir = _keep_inductor_headers()
                headers_before = _own_headers(header_dir)
                result.details["inductor_isa_probes_copied"] = _shared_isa_probes()
                _thread_independent_kernels()
                _compile_threads()
            cplugin = backends.compiler_plugin(spec.compiler)
            dynamic = cplugin.dynamic if cplugin is not None else None  # TorchNeuron rejects dynamic=True
            runner = torch.compile(
                target, backend=spec.compiler, options=backends.compile_options(spec), dynamic=dynamic
            )
        if tracker:
            tracker.clear()
        with torch.no_grad():
            for i, x in enumerate(all_inputs):
                xt = _to(x, device, dtype)
                phase = "compile" if spec.compiler else "runtime"
                t0 = time.perf_counter()
                try:
                    torch.manual_seed(req.seed + i)  # a model that draws random numbers draws the reference's
                    out = runner(**xt)
                    if sync:  # a device's asynchronous error surfaces here: it is this input's
                        sync()
                except Exception as exc:
                    # Which input failed: a failure on a later input shape only (the first compiled and
                    # ran) is how a backend without dynamic shapes shows, TorchNeuron's first release among them.
                    result.details["failed_input"] = {"index": i, "shapes": describe(x)}
                    if not (spec.compiler and _is_compile_error(exc)):
                        phase = "runtime"
                    raise
                if spec.compiler and i == 0:
                    metrics["compile_s"] = round(time.perf_counter() - t0, 3)
                phase = "runtime"
                outs.append(_detach_cpu(out))
            xt0 = _to(all_inputs[0], device, dtype)
            metrics["target_ms"] = round(_timed(lambda: runner(**xt0), sync=sync), 3)
        if spec.compiler:
            metrics["graph_breaks"], reasons = _graph_breaks()
            if reasons:
                result.details["graph_break_reasons"] = reasons
            cache = _compile_cache()
            if cache:
                result.details["compile_cache"] = cache
            if header_dir:  # precompiled by this process itself (0 where Zoo's shared ones served)
                result.details["inductor_headers_built"] = len(_own_headers(header_dir) - headers_before)
        device_cache = tracker.compile_cache() if tracker and hasattr(tracker, "compile_cache") else None
        if device_cache and "compile_cache" not in result.details:  # a device's own cache (XLA's persistent one)
            result.details["compile_cache"] = device_cache
        result.fallback_ops = tracker.collect() if tracker else []
        share = getattr(tracker, "backend_share", lambda: None)() if tracker else None  # optional on a tracker
        if share is not None:
            result.details["backend_share"] = share
        report = getattr(tracker, "report", dict)() if tracker else {}  # optional on a tracker
        if report:
            result.details["fallback_report"] = report
    except Exception as exc:
        if _is_oom(exc):
            status = Status.OOM
        elif phase == "compile" and _is_compile_error(exc):
            status = Status.COMPILE_ERROR
        else:
            status = Status.RUNTIME_ERROR
        raise _StageFailed(status, exc) from exc
    finally:
        metrics["peak_mem_bytes"] = _peak_mem(spec.device)
    return outs


def _compare(
    spec: backends.BackendSpec,
    built: Any,
    outs: list[dict],
    ref32: list[dict],
    ref64: list[dict],
    ref_at: list[dict],
    result: ValidationResult,
    judged_at: str,
) -> Comparison:
    """Stage 5: the target's outputs against the reference at the judged precision (and, where
    that is not fp32's, against fp32's too: ``details.strict_fp32``). A comparison Zoo cannot make
    is Zoo's failure, never the backend's."""
    cmp, strict = Comparison(), Comparison()
    try:
        pooled = pooled_reference_error(ref_at, ref64) if ref_at is not ref32 else None
        for i, (out, r32, r64, r_at) in enumerate(zip(outs, ref32, ref64, ref_at)):
            compare(
                out,
                r_at,
                r64,
                dtype=spec.dtype,
                tolerance_factor=built.tolerance_factor,
                result=cmp,
                label=f"input {i}",
                precision=judged_at,
                pooled=pooled,
            )
            if r_at is not r32:
                compare(
                    out,
                    r32,
                    r64,
                    dtype=spec.dtype,
                    tolerance_factor=built.tolerance_factor,
                    result=strict,
                    label=f"input {i}",
                )
        result.details["strict_fp32"] = strict.ok if ref_at is not ref32 else cmp.ok
        strict_use = (strict if ref_at is not ref32 else cmp).budget_use  # a row's strict_fp32 is the parent's, by it
        result.details["strict_budget_use"] = round(strict_use, 6) if math.isfinite(strict_use) else None
    except Exception as exc:
        raise _zoos_failure(exc, policy=False, stage="compare") from exc
    return cmp


def _verdict(cmp: Comparison, result: ValidationResult) -> None:
    """The comparison's metrics and the status they make: mismatch, pass_with_fallback or pass."""
    metrics = result.metrics
    metrics.update(
        max_abs_diff=cmp.max_abs_diff,
        max_rel_diff=cmp.max_rel_diff,
        rmse_ratio=round(cmp.rmse_ratio, 4) if math.isfinite(cmp.rmse_ratio) else cmp.rmse_ratio,
        cosine=cmp.cosine,
    )
    nonfinite = finite_metrics(metrics)
    if nonfinite:
        result.details["nonfinite_metrics"] = nonfinite
    result.details["budget_use"] = round(cmp.budget_use, 6) if math.isfinite(cmp.budget_use) else None
    if result.details.get("backend_share") == 0:  # it ran, but not on the backend: nothing proved
        report = result.details.get("fallback_report") or {}
        why = (report.get("graphs_on_inductor") or report.get("partitions_run_in_pytorch") or ["no partition"])[0]
        result.status = Status.COMPILE_ERROR
        result.reason = Reason.BACKEND_FELL_BACK
        result.error = error_info(
            type_="BackendFellBack",
            message=f"the backend executed none of the graphs' ops (backend_share 0); it handed them on: {why}",
        )
        return
    if not cmp.ok:
        result.status = Status.MISMATCH
        result.error = error_info(type_="Mismatch", message="; ".join(cmp.problems[:5]))
    elif result.fallback_ops:
        result.status = Status.PASS_WITH_FALLBACK
    else:
        result.status = Status.PASS


def _cache_and_key(
    req: ValidationRequest,
    model: torch.nn.Module,
    all_inputs: list[dict],
    result: ValidationResult,
    build_fp: str | None,
    at: str = "fp32",
) -> tuple[Any, str | None]:
    """The reference cache (None when off) and this model's key in it for a reference at precision
    ``at``; tiers that build the same model (:data:`SAME_BUILD_AS`) share the key (``build_fp``)."""
    from . import reference_cache as rc
    from .request import HARNESS_VERSION

    root = req.reference_cache if req.reference_cache is not None else rc.configured_dir()
    if not root:
        return None, None
    key = rc.reference_key(
        model_id=req.model_id,
        revision=req.revision,
        tier=SAME_BUILD_AS.get(req.tier, req.tier),
        seed=req.seed,
        fingerprint=build_fp,
        versions=result.versions,
        harness=HARNESS_VERSION,
        model=model,
        inputs=all_inputs,
        precision=at,
    )
    return rc.ReferenceCache(root, req.reference_outbox), key


def _references(
    req: ValidationRequest,
    model: torch.nn.Module,
    all_inputs: list[dict],
    result: ValidationResult,
    build_fp: str | None,
) -> tuple[list[dict], list[dict]]:
    """The fp32 and fp64 CPU references; computed, or loaded from the reference cache (an entry
    the census tier stored has no fp64 reference: a tiny run adds it and stores the whole)."""
    from . import reference_cache as rc

    cache, key = _cache_and_key(req, model, all_inputs, result, build_fp)
    if cache is not None:
        hit = cache.load(key) if key else None
        if hit is not None:
            result.op_census = dict(sorted(hit.op_census.items()))
            result.metrics["reference_ms"] = hit.reference_ms
            result.details["reference_cache"] = "hit"
            if hit.fp64 or req.tier == "census":
                if req.tier == "census":  # a tiny run's entry holds fp64, but nothing here is compared
                    result.details["reference64"] = CENSUS_NO_FP64
                elif hit.reference64_note:
                    result.details["reference64"] = hit.reference64_note
                return hit.ref32, hit.ref64
            with torch.no_grad():
                ref64 = _reference64(model, all_inputs, hit.ref32, result.details, req.seed)
            stored = cache.store(
                key,
                rc.CachedReference(
                    hit.ref32, ref64, hit.op_census, hit.reference_ms, result.details.get("reference64")
                ),
            )
            result.details["reference_cache"] = "hit (fp32), fp64 added" if stored else "hit (fp32), store failed"
            return hit.ref32, ref64
    census = OpCensus()
    ref32 = []
    with torch.no_grad():
        for i, x in enumerate(all_inputs):
            torch.manual_seed(req.seed + i)  # the same random draws (if any) as the target's run
            with census if i == 0 else contextlib.nullcontext():
                ref32.append(_detach_cpu(model(**x)))
        reference_ms, runs = _timed_runs(model, all_inputs[0], req.seed)
        _check_deterministic(runs)
        if req.tier == "census":  # no target run to budget: the fp64 reference (most of the time) is not needed
            ref64 = ref32
            result.details["reference64"] = CENSUS_NO_FP64
        else:
            ref64 = _reference64(model, all_inputs, ref32, result.details, req.seed)
    result.metrics["reference_ms"] = reference_ms
    result.op_census = dict(sorted(census.counts.items()))
    if cache is None or key is None:
        result.details["reference_cache"] = "off" if cache is None else "not cacheable"
    else:
        stored = cache.store(
            key,
            rc.CachedReference(
                ref32,
                ref64,
                result.op_census,
                reference_ms,
                result.details.get("reference64"),
                fp64=req.tier != "census",
            ),
        )
        result.details["reference_cache"] = "stored" if stored else "store failed"
    return ref32, ref64


def _timed_runs(model: torch.nn.Module, x: dict, seed: int) -> tuple[float, list[dict]]:
    """The fp32 reference's time on input 0 (median of TIMING_RUNS), keeping the first two runs'
    outputs: the same inputs run twice, for the determinism check, at no extra cost."""
    kept: list[dict] = []

    def run() -> None:
        torch.manual_seed(seed)
        out = model(**x)
        if len(kept) < 2:
            kept.append(_detach_cpu(out))

    return round(_timed(run), 3), kept


def _check_deterministic(runs: list[dict]) -> None:
    """Two CPU fp32 runs on the same inputs (same seed) must agree bit for bit: a model that does
    not (state carried across calls, uninitialised memory, unseeded randomness) cannot be a
    reference, and a difference from it is never the backend's."""
    how = _difference(runs[0], runs[1])
    if how:
        raise NonDeterministic(f"two CPU fp32 runs on the same inputs {how}")


def _difference(first: dict, second: dict) -> str | None:
    """How two runs' outputs differ ("differ in logits: 3 of 40 values, max abs diff 0.2"), or None
    when they agree bit for bit (NaN where both have NaN)."""
    if set(first) != set(second):
        return f"return different outputs: {sorted(set(first) ^ set(second))[:5]}"
    for name, a in first.items():
        b = second[name]
        if a.shape != b.shape or a.dtype != b.dtype:
            return f"differ in {name}: shape {tuple(a.shape)} vs {tuple(b.shape)}"
        same = a == b
        if a.is_floating_point() or a.is_complex():
            same |= torch.isnan(a) & torch.isnan(b)
        if not bool(same.all()):
            how = f"{int((~same).sum())} of {same.numel()} values"
            if a.is_floating_point():
                how += f", max abs diff {float((a.double() - b.double()).abs().nan_to_num(float('inf')).max()):.3g}"
            return f"differ in {name}: {how}"
    return None


# ATen ops that draw from the random number generator. A forward that runs one (SpeechT5's decoder
# prenet keeps dropout on at inference) is seeded like the reference on every backend, but a device or
# compiler with its own generator (XLA's, Inductor's Philox) draws other numbers from the same seed.
# Ops the op census records: a composite one (dropout, alpha_dropout) reaches it as these.
RANDOM_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "bernoulli bernoulli_ native_dropout _fused_dropout "
        "rand rand_like randn randn_like randint randint_like randperm normal normal_ uniform_ "
        "multinomial exponential_ geometric_ cauchy_ log_normal_ random_ poisson rrelu_with_noise"
    ).split()
)
RESEED = 7919  # the other seed the CPU reference runs at, to see whether its output moves with the draws


def _check_seed_independent(
    req: ValidationRequest,
    model: torch.nn.Module,
    moved_to_target: bool,
    all_inputs: list[dict],
    ref32: list[dict],
    result: ValidationResult,
) -> None:
    """On a mismatch, for a model whose forward draws random numbers (``RANDOM_OPS`` in its op
    census): the CPU fp32 reference runs input 0 again at another seed. When its own output moves,
    the output depends on which numbers are drawn, and a backend that draws other ones cannot be
    judged against it: ``NonDeterministic`` (``reference_error``, never the backend's). The model
    must still be the CPU's: where the backend ran the reference's own module (no room for a copy),
    the check cannot run and the mismatch stands, with ``details.random_ops`` saying so."""
    drawn = sorted(op for op in result.op_census if op in RANDOM_OPS)
    if not drawn:
        return
    if moved_to_target:
        result.details["random_ops"] = {"ops": drawn, "seed_check": "not run: the backend ran the CPU's model"}
        return
    torch.manual_seed(req.seed + RESEED)
    with torch.no_grad():
        other = _detach_cpu(model(**all_inputs[0]))
    how = _difference(ref32[0], other)
    result.details["random_ops"] = {"ops": drawn, "seed_check": "output moves with the seed" if how else "no effect"}
    if how:
        raise NonDeterministic(
            f"the forward draws random numbers ({', '.join(drawn[:5])}) and its CPU output moves with them: "
            f"input 0 at seeds {req.seed} and {req.seed + RESEED} {how}; a backend that draws other numbers "
            "cannot be judged against it (a quirk row that turns the sampling off would let it)"
        )


def _precision_reference(
    req: ValidationRequest,
    model: torch.nn.Module,
    all_inputs: list[dict],
    result: ValidationResult,
    at: str,
    ref32: list[dict],
    ref64: list[dict],
    build_fp: str | None,
) -> list[dict]:
    """The CPU reference at the precision the backend is judged at (:mod:`zoo_runner.precision`);
    the fp32 reference itself at fp32. Cached beside the fp32/fp64 one, under its own key."""
    from . import reference_cache as rc

    if at == "fp32":
        return ref32
    cache, key = _cache_and_key(req, model, all_inputs, result, build_fp, at=at)
    hit = cache.load(key) if cache is not None and key else None
    if hit is not None:
        result.details["reference_precision_cache"] = "hit"
        refs = hit.ref32
    else:
        refs = []
        with torch.no_grad(), precision.computing_at(at):
            for i, x in enumerate(all_inputs):
                torch.manual_seed(req.seed + i)
                refs.append(_detach_cpu(model(**x)))
        if cache is not None and key:
            stored = cache.store(key, rc.CachedReference(refs, refs, {}, None, None))
            result.details["reference_precision_cache"] = "stored" if stored else "store failed"
    for outs, r64 in zip(refs, ref64):  # a budget needs a finite reference wherever fp64 is finite
        for name, t in outs.items():
            t64 = r64.get(name)
            if (
                t.is_floating_point()
                and t64 is not None
                and t64.shape == t.shape
                and bool((~torch.isfinite(t) & torch.isfinite(t64)).any())
            ):
                raise ReferenceError_(
                    f"the CPU reference at {at} is not finite in {name} where fp64 is: no {at} budget can be set"
                )
    return refs


def _reference64(
    model: torch.nn.Module, all_inputs: list[dict], ref32: list[dict], details: dict[str, Any], seed: int = 0
) -> list[dict]:
    """fp64 CPU outputs; where an op has no fp64 kernel, the fp32 reference stands in (recorded in
    ``details["reference64"]``)."""
    try:
        model64 = copy.deepcopy(model).to(torch.float64)
        outs = []
        for i, x in enumerate(all_inputs):
            torch.manual_seed(seed + i)
            outs.append(_detach_cpu(model64(**_to(x, None, torch.float64))))
    except Exception as exc:
        details["reference64"] = f"unavailable, fp32 reference used: {type(exc).__name__}: {str(exc)[:200]}"
        return ref32
    for o64, o32 in zip(
        outs, ref32
    ):  # fp64 is the more exact run: non-finite where fp32 is finite means a dtype bug in the model
        for k, t32 in o32.items():
            t64 = o64.get(k)
            if (
                t64 is None
                or t64.shape != t32.shape
                or (t32.is_floating_point() and bool((~torch.isfinite(t64) & torch.isfinite(t32)).any()))
            ):
                details["reference64"] = (
                    f"unusable ({k} is not finite or differs in shape in fp64), fp32 reference used"
                )
                return ref32
    return outs


def _predicted_fallbacks(spec: backends.BackendSpec, result: ValidationResult) -> list[str]:
    from .census import predict_fallbacks

    ok, why = backends.device_available(spec.device)
    if not ok:  # its kernels are not registered in this process: nothing to predict from
        result.details["fallback_prediction"] = f"unavailable: {why}"
        return []
    result.fallback_ops = predict_fallbacks(spec.device, result.op_census)
    result.details["fallback_prediction"] = "from dispatch registrations"
    return result.fallback_ops


def _peak_mem(device: str) -> int | None:
    mod = getattr(torch, device, None)
    if device != "cpu" and mod is not None and hasattr(mod, "max_memory_allocated"):
        try:
            return int(mod.max_memory_allocated())
        except Exception:
            pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
