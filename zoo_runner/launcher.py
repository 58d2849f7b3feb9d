"""Run one validation in its own process with wall-clock and memory budgets.

The parent never dies with the model: a segfault becomes ``crash`` (with its signal), a hang
``timeout`` (the whole process group killed), an allocation failure ``oom``. The child gets no
Hub token, no database or broker credentials and ``HF_HUB_OFFLINE=1``; the parent has already
fetched every file it needs.
"""
from __future__ import annotations

import json
import logging
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .request import ValidationRequest, empty_result, error_info
from .statuses import Status

log = logging.getLogger(__name__)

# Variables the model process must never see.
SECRET_PREFIXES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "ZOO_DATABASE_URL", "ZOO_BROKER_URL", "ZOO_API_KEYS", "AWS_SECRET", "AWS_SESSION", "PGPASSWORD", "DATABASE_URL", "REDIS_URL", "CELERY_")
# Stages before the backend runs: dying there is the reference's failure, not the backend's.
REFERENCE_STAGES = ("start", "build", "reference")


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


def _limit_memory(memory_bytes: int) -> None:  # runs in the child before exec
    os.setsid()
    try:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    except (ValueError, OSError):
        pass


def run_isolated(req: ValidationRequest, python: str | None = None) -> dict[str, Any]:
    """Validate ``req`` in a child process; always returns a result dict."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="zoo-run-") as tmp:
        tmpdir = Path(tmp)
        req_path, out_path, stage_path = tmpdir / "request.json", tmpdir / "result.json", tmpdir / "stage"
        req_path.write_text(json.dumps(req.to_dict()))
        stage_path.write_text("start")
        cmd = [python or sys.executable, "-m", "zoo_runner.child", str(req_path), str(out_path), str(stage_path)]
        mem = int(req.memory_gb * (1 << 30))
        stderr_path = tmpdir / "stderr"
        with open(stderr_path, "wb") as err:
            proc = subprocess.Popen(cmd, env=child_env(), stdin=subprocess.DEVNULL, stdout=err, stderr=err, preexec_fn=lambda: _limit_memory(mem), cwd=tmp)
            try:
                rc = proc.wait(timeout=req.timeout_s)
                timed_out = False
            except subprocess.TimeoutExpired:
                timed_out = True
                _kill_group(proc)
                rc = proc.wait()
        stage = stage_path.read_text().strip() if stage_path.exists() else "start"
        stderr_tail = stderr_path.read_bytes()[-6000:].decode("utf-8", "replace")
        if out_path.exists() and not timed_out:
            try:
                result = json.loads(out_path.read_text())
                result["duration_s"] = round(time.perf_counter() - t0, 3)
                return result
            except json.JSONDecodeError:
                pass
        result = empty_result(req)
        result["duration_s"] = round(time.perf_counter() - t0, 3)
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


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
