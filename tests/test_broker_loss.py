"""Nothing is lost when the broker is (issue 27): the run's state comes from the database.

Real processes with Zoo's default settings (no ZOO_* timeout shortened): a Celery worker, `zoo run`
waiting for it, PostgreSQL, and a redis-server of the test's own that keeps nothing on disk, as the
one on these machines. Killed and restarted empty in the middle of `zoo run --top 12 --tier tiny`,
the run still ends with 12 rows, each model once, within 5 minutes of the restart.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time

import pytest

from tests.conftest import _reset_pg, child_env, free_port
from tests.test_fleet_faults import Fleet, _ping, latest_run, results_of_run, wait_until

pytestmark = pytest.mark.services


@pytest.fixture
def volatile_redis(tmp_path):
    """A private redis-server with nothing on disk: restarted, it is empty."""
    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("redis-server is not installed")
    port = free_port()
    data = tmp_path / "redis"
    data.mkdir()
    cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "", "--appendonly", "no"]
    state: dict = {}

    def start():
        state["proc"] = subprocess.Popen(
            cmd, stdout=open(data / "redis.log", "a"), stderr=subprocess.STDOUT, start_new_session=True
        )
        import redis

        wait_until(lambda: _ping(redis.Redis(port=port)), 30, "redis-server to answer")

    def stop(sig=signal.SIGKILL):
        p = state["proc"]
        p.send_signal(sig)
        p.wait(30)

    start()
    yield {"url": f"redis://127.0.0.1:{port}/0", "start": start, "stop": stop, "port": port}
    if state["proc"].poll() is None:
        stop()


@pytest.fixture
def fleet_on_volatile_redis(pg_server_url, volatile_redis, tmp_path):
    _reset_pg(pg_server_url)
    from db.session import upgrade

    upgrade(pg_server_url)
    env = child_env(ZOO_DATABASE_URL=pg_server_url, ZOO_BROKER_URL=volatile_redis["url"])
    assert sorted(k for k in env if k.startswith("ZOO_")) == [
        "ZOO_BROKER_URL",
        "ZOO_DATABASE_URL",
        "ZOO_REFERENCE_CACHE",
    ]  # default settings: nothing shortened
    f = Fleet(env, tmp_path, pg_server_url, volatile_redis["url"])
    yield f
    f.close()


def test_redis_restarted_empty_mid_run_loses_nothing(fleet_on_volatile_redis, volatile_redis):
    fleet = fleet_on_volatile_redis
    w = fleet.worker("w1")
    run = fleet.start("run", "run", "--top", "12", "--tier", "tiny", "--backend", "cpu")
    logs = [w.log_path, run.log_path]
    wait_until(lambda: (rid := latest_run(fleet)) and results_of_run(fleet, rid), 600, "the first result", logs=logs)
    assert fleet.redis.llen("cpu") > 0, "nothing was left queued to lose"
    stored_before = len(results_of_run(fleet, latest_run(fleet)))
    assert stored_before < 12
    volatile_redis["stop"](signal.SIGKILL)  # the broker dies mid-run; nothing of it is on disk
    time.sleep(2)
    volatile_redis["start"]()
    t_restart = time.monotonic()
    assert fleet.redis.dbsize() == 0, "the broker came back with its queues"
    wait_until(lambda: run.poll() is not None, 300, "`zoo run` to finish within 5 minutes", interval=2, logs=logs)
    took = time.monotonic() - t_restart
    out = run.log_path.read_text()
    assert run.returncode == 0, out[-3000:]
    assert "12 results stored" in out and "published again" in out, out[-3000:]
    rows = results_of_run(fleet, latest_run(fleet))
    assert len(rows) == 12 and len({r.model_id for r in rows}) == 12, rows
    assert fleet.sql("SELECT count(*) FROM results")[0][0] == 12
    assert w.poll() is None, "the worker survived the broker's restart"
    print(f"stored before the restart: {stored_before}; the run ended {took:.0f} s after it")
