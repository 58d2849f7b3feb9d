"""Prompt recovery (``workers.recovery``): a dead worker's task is back on its queue within 2
minutes with default settings, and a live worker's task is never put back.

- the sweep on real Redis with kombu's own unacked bookkeeping: a message whose owner's liveness
  key is gone comes back after the grace, once; a live owner's does not; a stale ownership record
  does not move another delivery of the same message;
- the acceptance, with real processes and default settings (nothing shortened): kill -9 a worker
  mid-run, start another, and `zoo run --top 12` ends with 12 rows within 5 minutes.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import _reset_pg, child_env
from tests.test_fleet_faults import Fleet, alive, descendants, kill9_tree, latest_run, results_of_run, wait_until

pytestmark = pytest.mark.services


# ---------------------------------------------------------------- the sweep, on real Redis


@pytest.fixture
def broker(redis_url):
    import redis
    from kombu import Connection

    from workers.celery_app import transport_options

    client = redis.Redis.from_url(redis_url)
    client.flushdb()
    conns: list = []

    def connect():
        conn = Connection(redis_url, transport_options=transport_options())
        conns.append(conn)
        return conn

    yield SimpleNamespace(client=client, app=SimpleNamespace(connection_for_write=connect), connect=connect)
    for conn in conns:
        conn.release()
    client.flushdb()


def _deliver(broker, body: str):
    """Publish ``body`` to queue q and take it without acknowledging, as a worker's consumer does."""
    from kombu import Exchange, Queue

    conn = broker.connect()
    ch = conn.channel()
    queue = Queue("q", Exchange("q", type="direct"), routing_key="q")
    queue(ch).declare()
    conn.Producer(ch).publish(body, exchange=queue.exchange, routing_key="q", serializer="json")
    msg = ch.basic_get("q", no_ack=False)
    assert msg is not None
    return ch, msg


def _age_suspects(client, by: int) -> None:
    from workers.recovery import SUSPECTS_KEY

    for wid, since in client.hgetall(SUSPECTS_KEY).items():
        client.hset(SUSPECTS_KEY, wid, int(since) - by)


def test_a_dead_workers_message_comes_back_once_after_the_grace_and_a_live_ones_never(broker):
    from workers.recovery import GRACE_S, OWNERS_KEY, Recovery

    r = broker.client
    dead, live = Recovery(broker.app, "dead@h/1/a"), Recovery(broker.app, "live@h/2/b")
    _, m1 = _deliver(broker, "for the dead worker")
    _, m2 = _deliver(broker, "for the live worker")
    dead.claim(m1.delivery_tag)
    live.claim(m2.delivery_tag)
    assert r.hlen("unacked") == 2 and r.hlen(OWNERS_KEY) == 2
    r.delete(dead.alive_key(dead.worker_id))  # its liveness key expired: it died

    sweeper = Recovery(broker.app)
    assert sweeper.sweep() == 0, "first seen missing: the grace starts"
    assert r.llen("q") == 0 and r.hlen("unacked") == 2
    _age_suspects(r, GRACE_S)
    live.heartbeat()
    assert sweeper.sweep() == 1
    assert r.llen("q") == 1 and json.loads(r.lindex("q", 0))["properties"]["delivery_tag"] == m1.delivery_tag
    assert set(r.hkeys("unacked")) == {m2.delivery_tag.encode()}, "the live worker's message stays with it"
    assert r.hkeys(OWNERS_KEY) == [m2.delivery_tag.encode()]
    _age_suspects(r, GRACE_S)
    assert sweeper.sweep() == 0 and r.llen("q") == 1, "restored once"

    # the live worker acknowledges: its ownership record is forgotten at the next sweep
    m2.ack()
    sweeper.sweep()
    assert r.hlen(OWNERS_KEY) == 0
    for rec in (sweeper, dead, live):
        rec.close()


def test_a_stale_record_does_not_move_another_delivery_of_the_same_message(broker):
    """A message put back by someone else (kombu at shutdown, the visibility timeout) and taken
    by a live worker that has not recorded itself yet: the dead owner's record must not move it."""
    from workers.recovery import GRACE_S, OWNERS_KEY, Recovery

    r = broker.client
    dead = Recovery(broker.app, "dead@h/1/a")
    ch, m = _deliver(broker, "once")
    dead.claim(m.delivery_tag)
    r.delete(dead.alive_key(dead.worker_id))
    ch.qos.restore_by_tag(m.delivery_tag)  # back on the queue without Zoo ...
    time.sleep(0.01)
    again = ch.basic_get("q", no_ack=False)  # ... and delivered again, same tag, later time
    assert again.delivery_tag == m.delivery_tag and r.hlen("unacked") == 1
    sweeper = Recovery(broker.app)
    sweeper.sweep()
    _age_suspects(r, GRACE_S)
    assert sweeper.sweep() == 0
    assert r.llen("q") == 0 and r.hlen("unacked") == 1, "the new delivery stays unacknowledged with its worker"
    assert r.hlen(OWNERS_KEY) == 0, "the stale record is gone"
    for rec in (sweeper, dead):
        rec.close()


# ---------------------------------------------------------------- the acceptance, real processes


def model_running(worker_pid: int) -> bool:
    """A model process (a child of the forkserver) runs below the worker."""
    for pid in descendants(worker_pid):
        try:
            ppid = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
            if b"forkserver" in Path(f"/proc/{ppid}/cmdline").read_bytes():
                return True
        except (OSError, IndexError):
            continue
    return False


@pytest.fixture
def default_fleet(pg_server_url, redis_url, tmp_path):
    """Worker and run processes with Zoo's default settings: no ZOO_* timeout is set."""
    import redis

    _reset_pg(pg_server_url)
    redis.Redis.from_url(redis_url).flushdb()
    from db.session import upgrade

    upgrade(pg_server_url)
    env = child_env(ZOO_DATABASE_URL=pg_server_url, ZOO_BROKER_URL=redis_url)
    assert sorted(k for k in env if k.startswith("ZOO_")) == [
        "ZOO_BROKER_URL",
        "ZOO_DATABASE_URL",
        "ZOO_REFERENCE_CACHE",
    ]
    f = Fleet(env, tmp_path, pg_server_url, redis_url)
    yield f
    f.close()
    redis.Redis.from_url(redis_url).flushdb()


def test_kill9_with_default_settings_the_run_ends_with_12_rows_within_5_minutes(default_fleet):
    """Over 60 s in CI (two workers on two cores): default settings, nothing shortened: the killed worker's task is
    redelivered on the broker's own schedule, and 12 models run."""
    fleet = default_fleet
    a = fleet.worker("wA")
    run = fleet.start("run", "run", "--top", "12", "--backend", "cpu")
    logs = [a.log_path, run.log_path]

    def a_mid_task():  # a row stored, the next task held, and its model process running
        assert run.poll() is None, "the run ended before worker A could be killed mid-task"
        rid = latest_run(fleet)
        return rid and results_of_run(fleet, rid) and fleet.redis.hlen("unacked") == 1 and model_running(a.pid)

    wait_until(a_mid_task, 900, "worker A to store a result and run the next model", interval=0.1, logs=logs)
    (tag,) = fleet.redis.hkeys("unacked")
    stored_before = len(results_of_run(fleet, latest_run(fleet)))
    killed = kill9_tree(a)
    t_kill = time.monotonic()
    wait_until(lambda: not any(alive(p) for p in killed), 30, "the whole worker tree to be dead")
    assert stored_before < 12, "killed mid-run"
    assert fleet.redis.hexists("unacked", tag), "the killed worker's task is unacknowledged"

    b = fleet.worker("wB")
    logs.append(b.log_path)
    # back on the queue (and so taken by B) within 2 minutes: out of `unacked`, or in it again for B
    wait_until(
        lambda: not fleet.redis.hexists("unacked", tag) or fleet.sql("SELECT 1 FROM task_attempts WHERE attempts >= 2"),
        150,
        "the killed worker's task to be put back",
        interval=1,
        logs=logs,
    )
    t_back = time.monotonic() - t_kill
    wait_until(lambda: run.poll() is not None, 600, "`zoo run` to finish", interval=1, logs=logs)
    t_done = time.monotonic() - t_kill
    out = run.log_path.read_text()
    print(
        f"stored before the kill: {stored_before}; task back after "
        f"{t_back:.0f} s; run done {t_done:.0f} s after the kill"
    )
    assert run.returncode == 0, out[-3000:]
    assert "12 results stored" in out, out[-3000:]
    assert t_back <= 120, f"the dead worker's task came back after {t_back:.0f} s"
    assert t_done <= 300, f"the run ended {t_done:.0f} s after the kill"

    rows = results_of_run(fleet, latest_run(fleet))
    assert len(rows) == 12 and len({r.model_id for r in rows}) == 12
    assert fleet.sql("SELECT count(*) FROM results")[0][0] == 12, "no duplicate rows"
    attempts = dict(fleet.sql("SELECT task_id, attempts FROM task_attempts"))
    assert sorted(attempts.values()).count(2) == 1 and max(attempts.values()) == 2, (
        f"only the killed task was delivered twice: {attempts}"
    )
    assert "put back on the queue" in b.log_path.read_text()
    wait_until(
        lambda: fleet.redis.hlen("unacked") == 0 and fleet.redis.llen("cpu") == 0,
        60,
        "the broker to be empty",
        logs=logs,
    )
