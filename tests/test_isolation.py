"""Every model runs in its own process: crash, hang and OOM become rows; the next model runs normally."""

from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT
from zoo_runner.hang import stuck
from zoo_runner.launcher import child_env, run_isolated
from zoo_runner.request import ValidationRequest


@pytest.fixture(autouse=True)
def plugins(monkeypatch):
    monkeypatch.setenv("ZOO_PLUGINS", "tests.plugins.faulty_backends")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))


def _ok_after():
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=120))
    assert r["status"] == "pass", r["error"]


def test_segfault_becomes_crash_with_signal_then_next_model_runs():
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_segfault", timeout_s=120))
    assert r["status"] == "crash"
    assert r["details"]["signal"] == "SIGSEGV" and r["details"]["stage"] == "target"
    assert "SIGSEGV" in r["error"]["message"]
    _ok_after()


@pytest.mark.parametrize("launcher", ["forkserver", "spawn"])
def test_hang_becomes_timeout_that_says_where_it_was_stuck(monkeypatch, launcher):
    monkeypatch.setenv("ZOO_LAUNCHER", launcher)
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_hang", timeout_s=20))
    assert r["status"] == "timeout"
    assert "20s" in r["error"]["message"]
    assert 20 <= r["duration_s"] < 40
    # it dumped its stacks when asked at the deadline: the row names the call that never returned
    assert r["details"]["stuck_in"].startswith("zoo_test_hang (tests/plugins/faulty_backends.py:")
    assert "stuck in zoo_test_hang" in r["error"]["message"]
    assert "in zoo_test_hang" in r["error"]["traceback"] and "(most recent call first)" in r["error"]["traceback"]
    _ok_after()


def test_the_deepest_thread_of_a_stack_dump_is_where_it_was_stuck():
    dump = """noise before
Thread 0x00007f01 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 331 in wait
  File "/usr/lib/python3.11/threading.py", line 1002 in _bootstrap

Current thread 0x00007f02 (most recent call first):
  File "/v/lib/python3.11/site-packages/openvino/runtime/ie_api.py", line 543 in compile_model
  File "/v/lib/python3.11/site-packages/openvino/frontend/pytorch/torchdynamo/compile.py", line 140 in openvino_compile
  File "/w/zoo_runner/engine.py", line 10 in validate_here
"""
    found = stuck(dump)
    assert found is not None and found.frame == "compile_model (openvino/runtime/ie_api.py:543)"
    assert found.stack.startswith("Current thread") and "threading.py" not in found.stack
    assert stuck('Traceback (most recent call last):\n  File "x.py", line 3, in f\nValueError') is None


def test_runaway_allocation_becomes_oom():
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_oom", timeout_s=120, memory_gb=4))
    assert r["status"] == "oom", (r["status"], r["error"])
    _ok_after()


def test_reserved_address_space_is_not_memory():
    # a GPU machine's model process reserves far more address space than its memory budget before any model
    # is built (CUDA; one 64 MiB malloc arena per thread): an address-space limit made every model there a
    # reference_error. The budget is RLIMIT_DATA: 64 GiB reserved and never written passes within 4 GiB.
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_reserve", timeout_s=120, memory_gb=4))
    assert r["status"] == "pass", (r["status"], r["error"])


def test_shared_memory_is_held_to_the_budget_and_its_headroom(monkeypatch):
    # RLIMIT_DATA does not count MAP_SHARED memory: the address-space limit (budget + headroom) still stops it
    monkeypatch.setenv("ZOO_SANDBOX_AS_HEADROOM_GB", "1")
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_shm_hog", timeout_s=120, memory_gb=2))
    assert r["status"] == "oom", (r["status"], r["error"])


def test_a_device_that_refuses_forks_gets_a_spawned_model_process(monkeypatch):
    # CUDA refuses a child forked from a process that touched it ("Cannot re-initialize CUDA in forked
    # subprocess": 81 of 100 models on an H200 machine): its model processes are spawned, never forked
    from zoo_runner import backends, launcher
    from zoo_runner.backends import DevicePlugin, fork_safe

    assert fork_safe("cpu+inductor") and fork_safe("xla")
    assert not fork_safe("cuda") and not fork_safe("cuda+inductor@bfloat16")
    assert not fork_safe("auto")  # not resolved in the parent (torch, devices): spawned
    monkeypatch.setitem(backends.DEVICE_PLUGINS, "zootestnofork", DevicePlugin("zootestnofork", fork_safe=False))
    assert not fork_safe("zootestnofork")
    called = []
    monkeypatch.setattr(launcher, "_run_forked", lambda *a, **k: called.append("forked") or (1, False))
    monkeypatch.setattr(launcher, "_run_spawned", lambda *a, **k: called.append("spawned") or (1, False))
    monkeypatch.setattr(launcher, "launcher_kind", lambda: "forkserver")
    for backend in ("cuda", "cpu"):
        launcher.run_isolated(ValidationRequest("arch:BertModel", backend=backend, timeout_s=30))
    assert called == ["spawned", "forked"]


def test_model_process_gets_no_secrets_and_runs_offline(monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    monkeypatch.setenv("ZOO_DATABASE_URL", "postgresql://user:pw@db/zoo")
    monkeypatch.setenv("ZOO_BROKER_URL", "redis://:pw@redis:6379/0")
    env = child_env()
    assert "HF_TOKEN" not in env and "ZOO_DATABASE_URL" not in env and "ZOO_BROKER_URL" not in env
    assert env["HF_HUB_OFFLINE"] == "1"


REQUESTER = """
import sys
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest
if __name__ == "__main__":
    run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_hang", timeout_s=600))
"""


def _model_process(requester: int) -> int | None:
    """The requester's model process once it hangs in the backend: a descendant whose working
    directory is its run's work directory, at stage ``target`` (found through /proc: the sandboxed
    model process can write nowhere a test could look)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/status") as f:
                    ppid = int(next(line.split()[1] for line in f if line.startswith("PPid:")))
            except (OSError, StopIteration, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    todo, found = [requester], []
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    for pid in found:
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/cwd")) == "work":
                with open(f"/proc/{pid}/cwd/stage") as f:
                    if f.read().strip() == "target":
                        return pid
        except OSError:
            continue
    return None


def test_model_process_dies_with_its_requester(tmp_path):
    """A worker killed with -9 leaves no model process running on (forked models are the
    forkserver's children, so they watch their requester, sandboxed as another uid)."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "requester.py"
    script.write_text(REQUESTER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    requester = subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path)
    deadline = time.monotonic() + 240
    model_pid = None
    while model_pid is None and time.monotonic() < deadline:
        time.sleep(0.5)
        model_pid = _model_process(requester.pid)
    assert model_pid, "the model never started"
    os.kill(requester.pid, signal.SIGKILL)
    requester.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(model_pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    os.kill(model_pid, signal.SIGKILL)
    raise AssertionError("the model process outlived its requester")


def _exit_with_whether_the_compiler_is_loaded():  # a forked model process's target, imported by reference
    import sys

    os._exit(3 if "torch._inductor.compile_fx" in sys.modules else 4)


def test_a_forkserver_for_an_eager_backend_skips_the_compiler_stack_and_one_for_a_compiler_preloads_it():
    """An eager model process never imports inductor's compile_fx (a second of a core): a forkserver started
    for one does not preload it; one started for a compiling backend does, so its model processes start warm."""
    from tests.conftest import fresh_python

    out = fresh_python(
        "from multiprocessing import forkserver\n"
        "from zoo_runner import launcher\n"
        "from tests.test_isolation import _exit_with_whether_the_compiler_is_loaded as probe\n"
        "print(launcher._compiles('cpu'), launcher._compiles('cpu+inductor'), launcher._compiles('cpu@x!'))\n"
        "for compiles in (False, True):\n"
        "    launcher._FORK_CTX = None\n"
        "    if getattr(forkserver._forkserver, '_forkserver_pid', None):\n"
        "        forkserver._forkserver._stop()\n"
        "    p = launcher._forkserver_context(compiles).Process(target=probe)\n"
        "    p.start(); p.join(120)\n"
        "    print(compiles, p.exitcode)\n",
        timeout=180,
    )
    assert out.split("\n")[:3] == ["False True True", "False 4", "True 3"], out


def test_zoo_run_starts_its_forkserver_early_only_where_model_processes_are_forked(monkeypatch):
    """`zoo run` starts the forkserver before it imports torch, with the compiler stack only for a backend that
    compiles (auto: not resolved yet, the whole preload), and none at all where model processes are spawned."""
    from zoo_runner import launcher

    started: list[bool] = []
    monkeypatch.setattr(launcher, "_forkserver_context", lambda compiles=True: started.append(compiles))
    monkeypatch.setattr(launcher, "launcher_kind", lambda: "forkserver")
    answers = [launcher.start_forkserver(b) for b in ("cpu", "cpu+inductor", "auto", "neuron", "cuda+inductor")]
    assert answers == [True, True, True, False, False] and started == [False, True, True]
    monkeypatch.setattr(launcher, "launcher_kind", lambda: "spawn")
    assert launcher.start_forkserver("cpu") is False and started == [False, True, True]


def test_a_backend_stage_that_hangs_ends_at_its_own_budget(monkeypatch):
    """ZOO_TARGET_BUDGET_S: a compile stuck in the backend stage ends at that stage's budget (here 5 s of a 120-s
    whole budget), named in the row with where it was stuck; the full tier keeps only the whole budget."""
    monkeypatch.setenv("ZOO_TARGET_BUDGET_S", "5")
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_hang", timeout_s=120))
    assert r["status"] == "timeout" and r["details"]["stage_budget_s"] == 5, r["error"]
    assert "exceeded the target stage's budget of 5s (ZOO_TARGET_BUDGET_S) during target" in r["error"]["message"]
    assert "stuck in zoo_test_hang" in r["error"]["message"]
    assert r["duration_s"] < 60
    _ok_after()
