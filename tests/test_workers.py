"""Real Redis, real PostgreSQL, a real `zoo worker` process: `zoo run` enqueues and waits."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import _reset_pg, child_env, run_zoo

pytestmark = pytest.mark.services


@pytest.fixture
def fleet_env(pg_server_url, redis_url, tmp_path):
    _reset_pg(pg_server_url)
    env = child_env(ZOO_DATABASE_URL=pg_server_url, ZOO_BROKER_URL=redis_url)
    return env


def start_worker(env, tmp_path, name="w1"):
    log = open(tmp_path / f"{name}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli", "worker", "--queues", "cpu", "--hostname", f"{name}@%h"],
        env=env,
        cwd=tmp_path,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    return proc


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


def test_run_enqueues_to_redis_and_a_separate_worker_stores_in_postgres(fleet_env, tmp_path, pg_server_url):
    worker = start_worker(fleet_env, tmp_path)
    try:
        proc = run_zoo(["run", "--top", "3", "--backend", "cpu"], fleet_env, tmp_path, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:] + (tmp_path / "w1.log").read_text()[-3000:]
        assert "3 results stored" in proc.stdout and "functional" in proc.stdout
    finally:
        stop(worker)
    eng = create_engine(pg_server_url)
    with eng.connect() as c:
        rows = c.execute(text("SELECT model_id, status, task_id, run_id FROM results ORDER BY model_id")).all()
        runs = c.execute(text("SELECT mode, requested FROM runs")).all()
    eng.dispose()
    assert len(rows) == 3 and all(r.status == "pass" for r in rows)
    assert all(r.task_id for r in rows), "rows were written by Celery tasks"
    assert runs == [("celery", 3)]
    assert "zoo.validate" in (tmp_path / "w1.log").read_text()


def test_detach_returns_immediately_and_work_waits_in_the_queue(fleet_env, tmp_path, redis_url):
    import redis

    proc = run_zoo(["run", "--top", "2", "--backend", "cpu", "--detach"], fleet_env, tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "enqueued 2 validations" in proc.stdout
    assert redis.Redis.from_url(redis_url).llen("cpu") == 2
    redis.Redis.from_url(redis_url).delete("cpu")


def test_unreachable_broker_is_one_line(tmp_path, pg_server_url):
    _reset_pg(pg_server_url)
    env = child_env(ZOO_DATABASE_URL=pg_server_url, ZOO_BROKER_URL="redis://127.0.0.1:1/0")
    proc = run_zoo(["run", "--top", "1", "--backend", "cpu"], env, tmp_path, timeout=120)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "broker" in proc.stderr and "unreachable" in proc.stderr
