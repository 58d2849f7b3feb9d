"""Run one validation in its own process with wall-clock and memory budgets, in a sandbox.

The parent never dies with the model: a segfault becomes ``crash`` (with its signal), a hang
``timeout`` (the whole process group killed), an allocation failure ``oom``. The model process runs
in the sandbox of :mod:`zoo_runner.sandbox` (another uid, no network, a read-only filesystem but its
work directory and the caches, an allowlisted environment with ``HF_HUB_OFFLINE=1`` and no secret,
rlimits); the parent has already fetched every file it needs. The parent trusts nothing from the
model process but measurements: :mod:`zoo_runner.result_schema` caps and validates its result and
takes identity fields from the parent's own request.

Model processes are forked from a forkserver that has imported torch and transformers once (and
was started with the allowlisted environment), so each model pays milliseconds, not seconds, to
start; the sandbox is applied in each forked model process, never in the forkserver.
``ZOO_LAUNCHER=spawn`` starts a fresh interpreter per model instead.
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import multiprocessing
import os
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import backends, cache_trust, device_claims, envs, hang, reference_cache, sandbox, verdict
from .exceptions import SandboxUnavailable
from .interrupt import INTERRUPT, check_interrupt  # noqa: F401  (INTERRUPT: zoo/jobs.py sets it here)
from .request import ValidationRequest, error_info
from .result import ValidationResult, failure_result, own_details
from .result_schema import RESULT_MAX_BYTES, BadResult, read_bytes_file, read_json_file, read_stage, trusted_result
from .settings import settings
from .statuses import Status

log = logging.getLogger(__name__)

# Stages before the backend runs: dying there is the reference's failure, not the backend's.
REFERENCE_STAGES = ("start", "build", "reference")
PRELOAD = ["zoo_runner.preload"]
# torch.compile's compiler stack, preloaded too unless the forkserver is started for an eager backend only (a
# second of a core that an eager model process never uses; a compiled one started from such a forkserver imports it)
COMPILER_PRELOAD = "zoo_runner.preload_compiler"
STDERR_TAIL = 6000
HANG_TAIL = 1 << 17  # how much of stderr is searched for the stacks a hung process dumped
STAGE_POLL_S = 0.5  # how often the parent reads the model process's stage for ``on_stage``
Poll = Callable[[], None]
# Who hears the stages of the model processes run_isolated starts in this context (thread) when it
# is given no ``on_stage``: set far above it (``zoo run``'s progress bar) without passing a callback
# through every layer between.
stage_listener: contextvars.ContextVar[Callable[[str], None] | None] = contextvars.ContextVar(
    "zoo_stage_listener", default=None
)


def child_env() -> dict[str, str]:
    """The environment the forkserver starts from: an allowlist, no secret, no device's own variables
    (a device with its own, neuron's, never has a model process forked)."""
    return sandbox.base_env("")


def _limit_memory(memory_bytes: int, address_space: int | None = None) -> None:
    """The memory budget as rlimits (before the sandbox applies the plan's): see sandbox.memory_rlimits."""
    os.setsid()
    limits = [(resource.RLIMIT_DATA, memory_bytes)] + ([(resource.RLIMIT_AS, address_space)] if address_space else [])
    for kind, value in limits:
        try:
            resource.setrlimit(kind, (value, value))
        except (ValueError, OSError):
            pass


# ------------------------------------------------------------------ forkserver

_FORK_LOCK = threading.Lock()
_FORK_CTX: Any = None
_FORK_ENV: dict[str, str] | None = None


def _forkserver_context(compiles: bool = True):
    """A forkserver started with the cleaned environment; restarted if that environment changed. One
    started for a compiling backend (``compiles``) preloads the compiler stack as well; a running one is
    kept either way."""
    global _FORK_CTX, _FORK_ENV
    from multiprocessing import forkserver

    env = child_env()
    with _FORK_LOCK:
        if _FORK_CTX is not None and env == _FORK_ENV:
            return _FORK_CTX
        server = forkserver._forkserver
        if _FORK_CTX is not None or getattr(server, "_forkserver_pid", None):
            server._stop()
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD + ([COMPILER_PRELOAD] if compiles else []))
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            server.ensure_running()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        _FORK_CTX, _FORK_ENV = ctx, env
        return ctx


def _compiles(backend: str) -> bool:
    """Whether a model process for ``backend`` runs torch.compile (a spec naming a compiler; anything that is
    not a plain spec counts as compiling, so the forkserver keeps its whole preload)."""
    try:
        return backends.BackendSpec.parse(str(backend)).compiler is not None
    except backends.UnknownBackend:
        return True


def start_forkserver(backend: str | None = None) -> bool:
    """Start the model processes' forkserver now (it imports torch and transformers, several seconds
    of a core) without waiting for it: ``zoo run`` calls it first thing, so that import overlaps its
    own start. Returns whether one was started or is running; the first model process waits for it.
    For a ``backend`` whose model processes are spawned (:func:`backends.fork_safe`: cuda, neuron) none is
    started, and for one that does not compile none preloads the compiler stack (``auto``, not resolved
    yet, gets the whole preload)."""
    known = bool(backend) and str(backend).strip() != "auto"
    if launcher_kind() != "forkserver" or (known and not backends.fork_safe(str(backend))):
        return False
    try:
        _forkserver_context(compiles=_compiles(str(backend)) if known else True)
    except (OSError, ValueError) as exc:  # started again, or spawned instead, when a model process asks
        log.warning("forkserver not started early: %s", exc)
        return False
    return True


def _watch_requester(pid: int, interval_s: float = 1.0) -> None:
    """A forked model process is the forkserver's child, not its requester's: if the requester
    (a worker killed with -9, say) disappears, nobody would stop the model. It stops itself."""

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            try:
                os.kill(pid, 0)
            except PermissionError:  # alive, and another uid than this sandboxed process
                continue
            except ProcessLookupError:
                os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="zoo-requester-watch", daemon=True).start()


def _forked_child(
    req_path: str, out_path: str, stage_path: str, stderr_path: str, plan_path: str, requester: int = 0
) -> None:
    """Runs in the forked model process: the sandbox first, then the model."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600)
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    os.close(fd)
    close_inherited()
    os.setsid()
    from .sandbox_linux import enter

    report = enter(plan_path)  # single-threaded still: the requester watch starts after
    if requester and not report.get("pidns"):  # in a PID namespace the shim outside watches it
        _watch_requester(requester)
    from .child import main

    main(["child", req_path, out_path, stage_path])


def close_inherited() -> None:
    """Close every descriptor the model process inherited but stdin, stdout and stderr (stdin made
    /dev/null): the forkserver's pipes and sockets and, above all, the write end of the parent's
    ``multiprocessing`` resource tracker, a root process outside the sandbox that would unlink any
    name written to it. The model's own uses of the tracker start a tracker of its own, inside."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    try:
        from multiprocessing import resource_tracker

        tracker = resource_tracker._resource_tracker
        tracker._fd = None
        tracker._pid = None
    except Exception:
        pass
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd > 2:
            try:
                os.close(fd)
            except OSError:
                pass


def _stage_poll(run: sandbox.Run, on_stage: Callable[[str], None] | None) -> Poll | None:
    """A function that calls ``on_stage`` with each new stage the model process reaches."""
    if on_stage is None:
        return None
    seen = ["start"]

    def poll() -> None:
        now = read_stage(run.stage, owner=run.uid)
        if now not in (seen[0], "start"):
            seen[0] = now
            on_stage(now)

    return poll


class StageBudget:
    """The backend stage's own budget (``ZOO_TARGET_BUDGET_S``, census and tiny tiers): read from the stage the
    model process reports, every poll; past it, its stacks are asked for and its whole group is killed
    (``over`` is then the budget it ran past). A model stuck compiling ends there, not at the whole budget."""

    STAGE = "target"

    def __init__(self, run: sandbox.Run, budget_s: float, watch: DiskWatch) -> None:
        self.run, self.budget_s, self.watch = run, budget_s, watch
        self.since: float | None = None
        self.over: float | None = None

    def __call__(self) -> None:
        if self.over is not None or not self.budget_s:
            return
        if read_stage(self.run.stage, owner=self.run.uid) != self.STAGE:  # before it, or past it: not counted
            self.since = None if self.since is None else -1.0
            return
        if self.since is None:
            self.since = time.monotonic()
        if self.since >= 0 and time.monotonic() - self.since > self.budget_s and self.watch.pid:
            self.over = self.budget_s
            hang.ask_for_stacks(self.watch.pid, self.run.stderr)
            _kill_group(self.watch.pid)


class DiskWatch:
    """What a model process has written so far (its work directory and its compile-cache namespace,
    beyond what they held at its start, its stderr, and files it holds open after unlinking them),
    measured every few seconds by the parent; past ``ZOO_SANDBOX_DISK_MB`` the whole process group is
    killed (``over`` says how much it wrote)."""

    EVERY_S = 2.0

    def __init__(self, run: sandbox.Run, cap_mb: int | None = None) -> None:
        self.paths = [p for p in (run.work, run.compile_ns) if p is not None]
        self.stderr = run.stderr
        self.group = run.cgroup
        self.cap = int((cap_mb if cap_mb is not None else settings().sandbox_disk_mb) * (1 << 20))
        self.pid: int | None = None
        self.base = self.used()
        self.over: int | None = None
        self._next = time.monotonic() + self.EVERY_S

    def used(self) -> int:
        total = 0
        for path in self.paths:
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            except OSError:
                continue
            try:
                total += cache_trust.tree_bytes(fd)
            finally:
                os.close(fd)
        try:
            total += os.lstat(self.stderr).st_blocks * 512
        except OSError:
            pass
        return total + self.unlinked()

    def unlinked(self) -> int:
        """Bytes in files its processes hold open with no name left (written, then unlinked): the
        directories no longer show them. memfds are memory, which its cgroup counts."""
        pids = self.group.pids() if self.group is not None else ([self.pid] if self.pid else [])
        seen: set[tuple[int, int]] = set()
        total = 0
        for pid in pids:
            try:
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            for fd in fds:
                path = f"/proc/{pid}/fd/{fd}"
                try:
                    st = os.stat(path)
                    if not stat.S_ISREG(st.st_mode) or st.st_nlink != 0 or (st.st_dev, st.st_ino) in seen:
                        continue
                    if os.readlink(path).startswith("/memfd:"):
                        continue
                except OSError:
                    continue
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
        return total

    def __call__(self) -> None:
        if self.over is not None or time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.EVERY_S
        try:
            written = self.used() - self.base
        except Exception as exc:  # whatever the model made of its directories, it is not measured: over
            log.warning("what model process %s wrote cannot be measured (%s): stopped", self.pid, exc)
            written = cache_trust.TOO_MUCH
        if written > self.cap and self.pid is not None:
            self.over = written
            _kill_group(self.pid)


def _polls(*fns: Poll | None) -> Poll:
    def poll() -> None:
        for fn in fns:
            if fn is not None:
                try:
                    fn()
                except Exception as exc:  # a progress display or a measurement must not stop the supervision
                    log.warning("while a model process runs: %s", exc)

    return poll


def _run_forked(
    run: sandbox.Run, timeout_s: float, poll: Poll | None = None, watch: DiskWatch | None = None, compiles: bool = True
) -> tuple[int, bool]:
    ctx = _forkserver_context(compiles)
    args = (str(run.request), str(run.result), str(run.stage), str(run.stderr), str(run.plan_path), os.getpid())
    proc = ctx.Process(target=_forked_child, args=args, daemon=False)
    proc.start()
    if watch is not None:
        watch.pid = proc.pid
    poll = _polls(poll, watch)
    deadline = time.monotonic() + timeout_s
    if proc.pid is not None:
        _IN_FLIGHT.add(proc.pid)
    try:
        while proc.is_alive():
            left = deadline - time.monotonic()
            if left <= 0:
                break
            proc.join(min(left, STAGE_POLL_S))
            if proc.is_alive():
                poll()
                check_interrupt()
    except BaseException:  # never leave a model process running unsupervised
        if proc.pid is not None:
            _kill_group(proc.pid)
        raise
    finally:
        _IN_FLIGHT.discard(proc.pid or 0)
    timed_out = proc.is_alive()
    if timed_out and proc.pid is not None:
        hang.ask_for_stacks(proc.pid, run.stderr)
        _kill_group(proc.pid)
        proc.join()
    return proc.exitcode if proc.exitcode is not None else -signal.SIGKILL, timed_out


def _run_spawned(
    run: sandbox.Run,
    memory_bytes: int,
    timeout_s: float,
    python: str | None,
    poll: Poll | None = None,
    watch: DiskWatch | None = None,
) -> tuple[int, bool]:
    cmd = [
        python or sys.executable,
        "-m",
        "zoo_runner.child",
        str(run.request),
        str(run.result),
        str(run.stage),
        str(run.plan_path),
    ]
    with open(run.stderr, "wb") as err:
        proc = subprocess.Popen(
            cmd,
            env=run.plan.env,
            stdin=subprocess.DEVNULL,
            stdout=err,
            stderr=err,
            preexec_fn=lambda: _limit_memory(memory_bytes, run.plan.rlimits.get("as")),
            cwd=str(run.work),
        )
        if watch is not None:
            watch.pid = proc.pid
        poll = _polls(poll, watch)
        deadline = time.monotonic() + timeout_s
        _IN_FLIGHT.add(proc.pid)
        try:
            while True:
                left = max(0.0, deadline - time.monotonic())
                try:
                    return proc.wait(timeout=min(left, STAGE_POLL_S)), False
                except subprocess.TimeoutExpired:
                    if time.monotonic() >= deadline:
                        hang.ask_for_stacks(proc.pid, run.stderr)
                        _kill_group(proc.pid)
                        return proc.wait(), True
                    poll()
                    check_interrupt()
        except BaseException:  # never leave a model process running unsupervised
            _kill_group(proc.pid)
            proc.wait()
            raise
        finally:
            _IN_FLIGHT.discard(proc.pid)


def _target_budget(req: ValidationRequest, run: sandbox.Run) -> float:
    """The backend stage's budget of ``req`` (0: none): ``ZOO_TARGET_BUDGET_S`` at the census and tiny tiers,
    plus the cold-compile reserve where the compile cache is cold; never more than the whole budget."""
    budget = settings().target_budget_s
    if not budget or req.tier == "full" or req.triage:  # a triage minifies after the stage: its whole budget
        return 0.0
    budget += run.setup.get("cold_compile_s", 0)
    return budget if budget < req.timeout_s + run.setup.get("cold_compile_s", 0) else 0.0


def cold_compile_reserve(backend: str) -> float:
    """Seconds a model process of ``backend`` may get beyond its timeout for a first compile into a cold
    compile cache (a device plugin's ``cold_compile_s``, for a compiled spec): what a caller with a hard
    ceiling (a Celery task's time limit) keeps free."""
    _spec, plugin = sandbox.device_of(ValidationRequest("-", backend=backend))
    if plugin is None or not plugin.cold_compile_s or not _spec.compiler:
        return 0.0
    return float(plugin.cold_compile_s())


def launcher_kind() -> str:
    """``ZOO_LAUNCHER``: forkserver (default on Linux; also for a value it does not know) or spawn."""
    return settings().launcher


def run_result(
    req: ValidationRequest, python: str | None = None, on_stage: Callable[[str], None] | None = None
) -> ValidationResult:
    """:func:`run_isolated`'s result as the :class:`ValidationResult` the services take."""
    return ValidationResult.from_dict(run_isolated(req, python, on_stage))


def run_isolated(
    req: ValidationRequest, python: str | None = None, on_stage: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """Validate ``req`` in a sandboxed child process; always returns a result dict, except that
    under ``ZOO_SANDBOX=strict`` a machine without the full sandbox raises SandboxUnavailable.
    ``on_stage`` (default: :data:`stage_listener`'s) is called in this process with ``start``, then
    each stage the model process reaches (``build``, ``reference``, ``target``, ``compare``; read
    every 0.5 s), for progress displays."""
    check_interrupt()  # nothing starts once a run is interrupted
    on_stage = on_stage or stage_listener.get()
    if on_stage:
        on_stage("start")
    t0 = time.perf_counter()
    if req.plugins is None:
        req.plugins = settings().plugins
    if req.reference_cache is None:
        req.reference_cache = reference_cache.configured_dir() or ""
    if req.threads is None:
        req.threads = settings().model_threads
    if python is None and req.env:  # UnknownEnv (one line) before anything starts
        python = envs.python_for(req.env)
    mem = int(req.memory_gb * (1 << 30))
    started_at = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    with (
        device_claims.for_request(
            req, on_wait=on_stage and (lambda _why: on_stage("waiting for device cores"))
        ) as setup,
        tempfile.TemporaryDirectory(prefix="zoo-run-") as tmp,
        contextlib.ExitStack() as cleanup,
    ):
        req.device_setup = setup or None  # the cores this model process may use: claimed host-wide until it ends
        run, _ = sandbox.prepare_run(req, tmp, mem, python)
        if run.cgroup is not None:  # whatever is left in it is killed, and it goes, however this ends
            cleanup.callback(run.cgroup.remove)
        timeout_s = req.timeout_s + run.setup.get("cold_compile_s", 0)
        watch = DiskWatch(run)
        stage_budget = StageBudget(run, _target_budget(req, run), watch)
        poll = _polls(_stage_poll(run, on_stage), stage_budget)
        if python is None and launcher_kind() == "forkserver" and backends.fork_safe(req.backend):
            rc, timed_out = _run_forked(run, timeout_s, poll, watch, compiles=_compiles(req.backend))
        else:
            rc, timed_out = _run_spawned(run, mem, timeout_s, python, poll, watch)
        if stage_budget.over is not None:
            timed_out = True
        if poll:  # the last stage it reached, even one shorter than a poll interval
            poll()
        report = sandbox.read_report(run)
        if report is not None and sandbox.refused(run, rc, report):
            raise SandboxUnavailable(
                f"ZOO_SANDBOX=strict, but the model process could not get {', '.join(report.get('missing', []))} "
                f"({report.get('errors', {})}); `zoo doctor` shows what this machine allows"
            )
        details_sandbox = sandbox.describe(run, report)
        stage = read_stage(run.stage, owner=run.uid)
        stderr_tail = _tail(run.stderr)
        problem = None
        result = None
        trusted = False
        from .planning import parent_plan  # builders: imported where a model is validated, not with the launcher

        facts = parent_plan(req)  # the row's fingerprint, library, architecture, task, known failure: the parent's
        if not timed_out or req.triage:  # a triage checkpoints its verdict before the minifier's long work
            raw, problem = read_json_file(run.result, RESULT_MAX_BYTES, owner=run.uid)
            if raw is not None:
                try:
                    result = trusted_result(req, raw)
                    verdict.decide(req, result)
                    verdict.parent_identity(req, result, started_at, facts)
                    trusted = True
                except BadResult as exc:
                    problem = f"result.json fails the result schema: {exc}"
                    result = None
        if watch.over is not None:  # killed by the parent for what it wrote: whatever it left is not a result
            result = _failure_result(req, rc, False, stage, stderr_tail, time.perf_counter() - t0)
            result["error"] = error_info(
                type_="DiskLimit",
                message=f"wrote {watch.over >> 20} MB, over the {watch.cap >> 20} MB a model process may write "
                f"(ZOO_SANDBOX_DISK_MB), during {stage}: killed",
                tb=stderr_tail,
            )
            result["details"]["disk_written_mb"] = watch.over >> 20
        elif result is not None:
            result["duration_s"] = round(time.perf_counter() - t0, 3)
            if req.triage:  # what the model process said of its triage, rebuilt from what it may hold
                from .triage.graph import clean_triage

                result["details"]["triage"] = clean_triage(result["details"].get("triage"))
            if req.triage and (rc != 0 or timed_out):  # a checkpoint: say how the triage ended
                tri = result["details"]["triage"]
                if isinstance(tri, dict):
                    tri["ended"] = (
                        f"timed out after {req.timeout_s:.0f} s during {stage}"
                        if timed_out
                        else f"the model process exited with code {rc} during {stage}"
                    )
                    tri["stderr_tail"] = stderr_tail[-1500:]
        elif problem:
            result = _bad_result(req, problem, stage, stderr_tail, time.perf_counter() - t0)
        else:
            stuck = hang.stuck(_tail(run.stderr, HANG_TAIL)) if timed_out else None
            result = _failure_result(
                req,
                rc,
                timed_out,
                stage,
                stderr_tail,
                time.perf_counter() - t0,
                stuck,
                run.setup.get("cold_compile_s", 0),
                oom_kills=run.cgroup.oom_kills() if run.cgroup is not None else 0,
                stage_budget_s=stage_budget.over,
            )
        if not trusted:  # a crash, a timeout, a refused result: still the parent's library, architecture, task
            verdict.parent_facts(result, facts, claims=False)
        result["versions"] = verdict.parent_versions(python, result.get("versions"), req.backend)
        result["details"]["sandbox"] = details_sandbox
        if run.cgroup is not None:  # the kernel's count of what it held: memfds and shared memory included
            peak = run.cgroup.peak_bytes()
            details_sandbox["cgroup"] = {**run.cgroup.describe(), "peak_mb": peak >> 20 if peak else None}
        result["details"] = own_details(result["details"], req)  # the parent's to say, never the model process's
        if trusted and not timed_out and watch.over is None:
            _publish_references(run, req, result)
            if req.triage:
                _take_triage(run, req, result)
        _prune_compile_cache(run)
        return result


TRIAGE_GRAPH_MAX = 8 << 20
TRIAGE_TENSORS_MAX = 256 << 20


def _take_triage(run: sandbox.Run, req: ValidationRequest, result: dict[str, Any]) -> None:
    """The graph a triaging model process handed back, as data: read without following links,
    checked node by node against the repro grammar, its tensors loaded by safetensors (no code);
    copied into ``req.triage_outbox`` (the parent's) or refused, said in ``details.triage``."""
    from safetensors.torch import load as load_tensors

    from .triage.graph import check_graph, check_tensors

    tri = result["details"].setdefault("triage", {})
    if not isinstance(tri, dict):
        result["details"]["triage"] = tri = {}
    box = run.work / sandbox.TRIAGE_OUTBOX
    try:  # the directory the parent made: never a link the model process put in its place
        st = os.lstat(box)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode) or (run.uid is not None and st.st_uid not in (run.uid, os.getuid())):
        tri["refused"] = "the triage outbox is not the directory Zoo made"
        return
    data, problem = read_json_file(box / "graph.json", TRIAGE_GRAPH_MAX, owner=run.uid)
    if data is None:
        if problem:
            tri["refused"] = problem
        return
    blob, problem = read_bytes_file(box / "repro.safetensors", TRIAGE_TENSORS_MAX, owner=run.uid)
    if blob is None:
        tri["refused"] = problem or "graph.json without repro.safetensors"
        return
    try:
        tensors = load_tensors(blob)
        check_tensors(tensors)
        check_graph(data, set(tensors))
    except Exception as exc:  # BadGraph, or safetensors' own errors for a bad file
        tri["refused"] = f"the graph handed back is not a repro Zoo writes: {type(exc).__name__}: {str(exc)[:200]}"
        return
    if req.triage_outbox:
        dest = Path(req.triage_outbox)
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "graph.json").write_text(json.dumps(data))
        (dest / "repro.safetensors").write_bytes(blob)


def _publish_references(run: sandbox.Run, req: ValidationRequest, result: dict[str, Any]) -> None:
    """The references the model process handed back, checked and published into its namespace
    (only from a run that ended with a result: a crashed or forged one publishes nothing)."""
    if run.ref_ns is None:
        return
    shapes = result.get("details", {}).get("input_shapes")
    inputs = len(shapes) if isinstance(shapes, list) and shapes else None
    try:
        published = cache_trust.publish(run.outbox, run.ref_ns, run.namespace, run.uid, inputs)
    except Exception as exc:  # the cache is Zoo's convenience: never the run's failure
        log.warning("references of %s not published: %s", req.model_id, exc)
        return
    if published:
        result["details"]["reference_published"] = cache_trust.describe_publish(published)


def _prune_compile_cache(run: sandbox.Run) -> None:
    if run.compile_ns is None:
        return
    try:
        cache_trust.prune_compile_cache(
            str(run.compile_ns.parent), int(settings().compile_cache_mb * (1 << 20)), keep=run.namespace
        )
    except Exception as exc:
        log.warning("compile cache %s not pruned: %s", run.compile_ns.parent, exc)


def _tail(path: Any, size: int = STDERR_TAIL) -> str:
    """The end of the model process's stderr (never through a link, never more than ``size``)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return ""
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        end = os.lseek(fd, 0, os.SEEK_END)
        os.lseek(fd, max(0, end - size), os.SEEK_SET)
        return os.read(fd, size).decode("utf-8", "replace")
    finally:
        os.close(fd)


def _bad_result(req: ValidationRequest, problem: str, stage: str, stderr_tail: str, elapsed: float) -> dict[str, Any]:
    """A result the parent will not store as written: a ``crash`` row saying why."""
    log.warning("%s (%s on %s): %s", req.model_id, req.tier, req.backend, problem)
    error = error_info(
        type_="BadResult", message=f"the model process wrote an invalid result: {problem}", tb=stderr_tail
    )
    result = failure_result(req, None, Status.CRASH, error=error, duration_s=round(elapsed, 3))
    result.details["stage"] = stage
    return result.to_dict()


def _failure_result(
    req: ValidationRequest,
    rc: int,
    timed_out: bool,
    stage: str,
    stderr_tail: str,
    elapsed: float,
    stuck: hang.Stuck | None = None,
    cold_compile_s: float = 0,
    oom_kills: int = 0,
    stage_budget_s: float | None = None,
) -> dict[str, Any]:
    details: dict[str, Any] = {"stage": stage}
    if oom_kills and not timed_out:  # its cgroup's own counter: the kernel ended it for memory, whatever it printed
        details["signal"] = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(rc)
        status, err = (
            Status.OOM,
            error_info(
                type_="OOM",
                message=f"killed by the kernel's OOM killer during {stage}: its cgroup reached the memory budget of "
                f"{req.memory_gb:g} GiB (shared memory and memfds count)",
                tb=stderr_tail,
            ),
        )
    elif timed_out:
        where = ""
        if stuck is not None:  # the call that never returned, from the stacks it dumped at the deadline
            details["stuck_in"] = stuck.frame
            where = f", stuck in {stuck.frame}"
        budget = f"the time budget of {req.timeout_s:g}s"
        if cold_compile_s:  # never a plain timeout: the compile cache was cold, and the budget said so
            details["cold_compile"] = True
            budget += f" plus {cold_compile_s:g}s for a first compile into a cold compile cache"
        if stage_budget_s is not None:  # the backend stage's own budget (its cold reserve in it), within the whole
            details["stage_budget_s"] = stage_budget_s
            cold = f", {cold_compile_s:g}s of it for a first compile into a cold cache" if cold_compile_s else ""
            budget = f"the {stage} stage's budget of {stage_budget_s:g}s (ZOO_TARGET_BUDGET_S{cold})"
        status, err = (
            Status.TIMEOUT,
            error_info(
                type_="Timeout",
                message=f"exceeded {budget} during {stage}{where}",
                tb=stuck.stack[:STDERR_TAIL] if stuck is not None else stderr_tail,
            ),
        )
    elif rc == -signal.SIGXCPU:
        details["signal"] = "SIGXCPU"
        status, err = (
            Status.TIMEOUT,
            error_info(
                type_="Timeout",
                message=f"exceeded the CPU time budget (rlimit from the {req.timeout_s:g}s time budget) during {stage}",
                tb=stderr_tail,
            ),
        )
    elif rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        details["signal"] = sig
        if -rc == signal.SIGKILL and _looks_oom(stderr_tail):
            status, err = (
                Status.OOM,
                error_info(type_="OOM", message=f"killed by {sig} (out of memory) during {stage}", tb=stderr_tail),
            )
        else:
            status, err = (
                Status.CRASH,
                error_info(type_="Crash", message=f"process died with signal {sig} during {stage}", tb=stderr_tail),
            )
    elif _looks_oom(stderr_tail):
        status, err = (
            Status.OOM,
            error_info(
                type_="OOM", message=f"out of memory during {stage} (budget {req.memory_gb:g} GiB)", tb=stderr_tail
            ),
        )
    else:
        status, err = (
            Status.CRASH,
            error_info(
                type_="Crash", message=f"process exited with code {rc} during {stage} without a result", tb=stderr_tail
            ),
        )
    if stage in REFERENCE_STAGES and status is not Status.OOM:
        # the model never reached the backend: Zoo's gap, not the backend's
        details["reference_failure"] = status.value
        status = Status.REFERENCE_ERROR
    result = failure_result(req, None, status, error=err, duration_s=round(elapsed, 3))
    result.details.update(details)
    return result.to_dict()


def _looks_oom(text: str) -> bool:
    t = text.lower()
    return (
        "memoryerror" in t
        or "out of memory" in t
        or "can't allocate memory" in t
        or "cannot allocate memory" in t
        or "std::bad_alloc" in t
    )


# INTERRUPT (zoo_runner.interrupt) is set on the first Ctrl-C or SIGTERM of a run (zoo/jobs.py): every model
# process this process supervises is ended within a poll interval and its validation raises Interrupted (no row);
# none starts after it
_IN_FLIGHT: set[int] = set()  # the model processes this process supervises now (their pids: their groups)


def kill_in_flight() -> None:
    """Every model process this process supervises killed, with its group (a second Ctrl-C, before exiting)."""
    for pid in list(_IN_FLIGHT):
        _kill_group(pid)


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
