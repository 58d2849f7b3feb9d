"""Every model runs in its own process: crash, hang and OOM become rows; the next model runs normally."""
from __future__ import annotations

import os

import pytest

from tests.conftest import ROOT
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


def test_hang_becomes_timeout_and_the_process_group_is_killed():
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_hang", timeout_s=20))
    assert r["status"] == "timeout"
    assert "20s" in r["error"]["message"]
    assert 20 <= r["duration_s"] < 40
    _ok_after()


def test_runaway_allocation_becomes_oom():
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu+zoo_test_oom", timeout_s=120, memory_gb=4))
    assert r["status"] == "oom", (r["status"], r["error"])
    _ok_after()


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


def test_model_process_dies_with_its_requester(tmp_path):
    """A worker killed with -9 leaves no model process running on (forked models are the
    forkserver's children, so they watch their requester)."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "requester.py"
    script.write_text(REQUESTER)
    pidfile = tmp_path / "model.pid"
    env = {**os.environ, "ZOO_TEST_PIDFILE": str(pidfile), "PYTHONPATH": str(ROOT)}
    requester = subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path)
    deadline = time.monotonic() + 240
    while not (pidfile.exists() and pidfile.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert pidfile.exists(), "the model never started"
    model_pid = int(pidfile.read_text())
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
