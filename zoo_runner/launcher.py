"""Run one validation in its own process with wall-clock and memory budgets.

The parent never dies with the model: a segfault becomes ``crash`` (with its signal), a hang
``timeout`` (the whole process group killed), an allocation failure ``oom``. The model process
gets no Hub token, no database or broker credentials and ``HF_HUB_OFFLINE=1``; the parent has
already fetched every file it needs.

Model processes are forked from a forkserver that has imported torch and transformers once (and
was started with the cleaned environment), so each model pays milliseconds, not seconds, to
start. ``ZOO_LAUNCHER=spawn`` starts a fresh interpreter per model instead.
"""
from __future__ import annotations

import json
import logging
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from . import reference_cache
from .request import ValidationRequest, empty_result, error_info
from .statuses import Status

log = logging.getLogger(__name__)

# Variables the model process must never see.
SECRET_PREFIXES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "ZOO_DATABASE_URL", "ZOO_BROKER_URL", "ZOO_API_KEYS", "AWS_SECRET", "AWS_SESSION", "PGPASSWORD", "DATABASE_URL", "REDIS_URL", "CELERY_")
# Stages before the backend runs: dying there is the reference's failure, not the backend's.
REFERENCE_STAGES = ("start", "build", "reference")
PRELOAD = ["zoo_runner.preload"]


def child_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(SECRET_PREFIXES)}
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_OFFLINE"] = "1"
    env["HF_HUB_DISABLE_TELEMETRY"] = "1"
    env.setdefault("PYTHONHASHSEED", "0")
    # no proxies: the model process has no business on the network
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"):
        env.pop(k, None)
    return env


def _limit_memory(memory_bytes: int) -> None:
    os.setsid()
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ValueError, OSError):
        pass


# ------------------------------------------------------------------ forkserver

_FORK_LOCK = threading.Lock()
_FORK_CTX: Any = None
_FORK_ENV: dict[str, str] | None = None


def _forkserver_context():
    """A forkserver started with the cleaned environment; restarted if that environment changed."""
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
        ctx.set_forkserver_preload(PRELOAD)
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


def _watch_requester(pid: int, interval_s: float = 1.0) -> None:
    """A forked model process is the forkserver's child, not its requester's: if the requester
    (a worker killed with -9, say) disappears, nobody would stop the model. It stops itself."""

    def watch() -> None:
        while True:
            time.sleep(interval_s)
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os.killpg(os.getpgid(0), signal.SIGKILL)

    threading.Thread(target=watch, name="zoo-requester-watch", daemon=True).start()


def _forked_child(req_path: str, out_path: str, stage_path: str, stderr_path: str, memory_bytes: int, requester: int = 0) -> None:
    """Runs in the forked model process."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 2)
    os.dup2(fd, 1)
    _limit_memory(memory_bytes)
    if requester:
        _watch_requester(requester)
    from .child import main

    main(["child", req_path, out_path, stage_path])


def _run_forked(cmd_paths: tuple[str, str, str, str], memory_bytes: int, timeout_s: float) -> tuple[int, bool]:
    ctx = _forkserver_context()
    proc = ctx.Process(target=_forked_child, args=(*cmd_paths, memory_bytes, os.getpid()), daemon=False)
    proc.start()
    proc.join(timeout_s)
    timed_out = proc.is_alive()
    if timed_out:
        _kill_group(proc.pid)
        proc.join()
    return proc.exitcode if proc.exitcode is not None else -signal.SIGKILL, timed_out


def _run_spawned(cmd_paths: tuple[str, str, str, str], memory_bytes: int, timeout_s: float, cwd: str, python: str | None) -> tuple[int, bool]:
    req_path, out_path, stage_path, stderr_path = cmd_paths
    cmd = [python or sys.executable, "-m", "zoo_runner.child", req_path, out_path, stage_path]
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(cmd, env=child_env(), stdin=subprocess.DEVNULL, stdout=err, stderr=err, preexec_fn=lambda: _limit_memory(memory_bytes), cwd=cwd)
        try:
            return proc.wait(timeout=timeout_s), False
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid)
            return proc.wait(), True


def launcher_kind() -> str:
    kind = os.environ.get("ZOO_LAUNCHER", "forkserver" if sys.platform.startswith("linux") else "spawn")
    return kind if kind in ("forkserver", "spawn") else "forkserver"


def run_isolated(req: ValidationRequest, python: str | None = None) -> dict[str, Any]:
    """Validate ``req`` in a child process; always returns a result dict."""
    t0 = time.perf_counter()
    if req.plugins is None:
        req.plugins = os.environ.get("ZOO_PLUGINS", "")
    if req.reference_cache is None:
        req.reference_cache = reference_cache.configured_dir() or ""
    with tempfile.TemporaryDirectory(prefix="zoo-run-") as tmp:
        tmpdir = Path(tmp)
        paths = tuple(str(tmpdir / n) for n in ("request.json", "result.json", "stage", "stderr"))
        req_path, out_path, stage_path, stderr_path = (Path(p) for p in paths)
        req_path.write_text(json.dumps(req.to_dict()))
        stage_path.write_text("start")
        mem = int(req.memory_gb * (1 << 30))
        if python is None and launcher_kind() == "forkserver":
            rc, timed_out = _run_forked(paths, mem, req.timeout_s)  # type: ignore[arg-type]
        else:
            rc, timed_out = _run_spawned(paths, mem, req.timeout_s, tmp, python)  # type: ignore[arg-type]
        stage = stage_path.read_text().strip() if stage_path.exists() else "start"
        stderr_tail = stderr_path.read_bytes()[-6000:].decode("utf-8", "replace") if stderr_path.exists() else ""
        if out_path.exists() and not timed_out:
            try:
                result = json.loads(out_path.read_text())
                result["duration_s"] = round(time.perf_counter() - t0, 3)
                return result
            except json.JSONDecodeError:
                pass
        return _failure_result(req, rc, timed_out, stage, stderr_tail, time.perf_counter() - t0)


def _failure_result(req: ValidationRequest, rc: int, timed_out: bool, stage: str, stderr_tail: str, elapsed: float) -> dict[str, Any]:
    result = empty_result(req)
    result["duration_s"] = round(elapsed, 3)
    result["details"]["stage"] = stage
    if timed_out:
        status, err = Status.TIMEOUT, error_info(type_="Timeout", message=f"exceeded the time budget of {req.timeout_s:g}s during {stage}", tb=stderr_tail)
    elif rc < 0:
        sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
        result["details"]["signal"] = sig
        if -rc == signal.SIGKILL and _looks_oom(stderr_tail):
            status, err = Status.OOM, error_info(type_="OOM", message=f"killed by {sig} (out of memory) during {stage}", tb=stderr_tail)
        else:
            status, err = Status.CRASH, error_info(type_="Crash", message=f"process died with signal {sig} during {stage}", tb=stderr_tail)
    elif _looks_oom(stderr_tail):
        status, err = Status.OOM, error_info(type_="OOM", message=f"out of memory during {stage} (budget {req.memory_gb:g} GiB)", tb=stderr_tail)
    else:
        status, err = Status.CRASH, error_info(type_="Crash", message=f"process exited with code {rc} during {stage} without a result", tb=stderr_tail)
    if stage in REFERENCE_STAGES and status is not Status.OOM:
        # the model never reached the backend: Zoo's gap, not the backend's
        result["details"]["reference_failure"] = status.value
        status = Status.REFERENCE_ERROR
    result["status"] = status.value
    result["error"] = err
    return result


def _looks_oom(text: str) -> bool:
    t = text.lower()
    return "memoryerror" in t or "out of memory" in t or "can't allocate memory" in t or "cannot allocate memory" in t or "std::bad_alloc" in t


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
