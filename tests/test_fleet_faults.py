"""The fleet under faults, with real processes: `zoo worker` and `zoo beat` subprocesses on the
local Redis and PostgreSQL, killed and restarted the ways machines die.

- kill -9 of a worker mid-task, then a new worker: `zoo run --top 12` still ends with exactly 12
  results (the killed task is put back by the new worker's recovery sweep, `workers.recovery`;
  `tests/test_worker_recovery.py` does the same with default settings);
- the same task delivered twice: one row, and the second delivery does not run the model again;
- two beats: one leader sends, one weekly sweep (a second sweep finds the week claimed);
- SIGTERM on a worker: the running task's message goes back to the queue at once;
- Redis (a private, append-only instance) restarted mid-run: nothing lost, nothing doubled.

Conditions are polled, never slept for; limits are generous for a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import _reset_pg, child_env, free_port, run_zoo

pytestmark = pytest.mark.services

# A short visibility timeout (the last resort behind `workers.recovery`) and soft shutdown; the
# hard limit stays above the slowest tiny model's first run (forkserver start included).
FAST_REDELIVERY = {
    "ZOO_TASK_TIME_LIMIT": "90",
    "ZOO_VISIBILITY_TIMEOUT": "100",
    "ZOO_VISIBILITY_MARGIN": "5",
    "ZOO_SOFT_SHUTDOWN_TIMEOUT": "1",
}


# ---------------------------------------------------------------- helpers


def descendants(pid: int) -> list[int]:
    from workers.celery_app import descendants as tree  # imported late: the app reads its broker URL at import

    return tree(pid)


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def kill9_tree(proc: subprocess.Popen) -> list[int]:
    """SIGKILL a process and everything below it (pool, forkserver, model): a machine dying."""
    pids = [proc.pid] + descendants(proc.pid)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait(30)
    return pids


def wait_until(cond, timeout: float, what: str, interval: float = 0.5, logs: list[Path] = ()):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = cond()
        if value:
            return value
        time.sleep(interval)
    tails = "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs if p.exists())
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}\n{tails}")


class Fleet:
    """Processes of one test: started with a log each, all killed (with their trees) at the end."""

    def __init__(self, env: dict[str, str], tmp: Path, pg_url: str, redis_url: str):
        self.env, self.tmp, self.pg_url, self.redis_url = env, tmp, pg_url, redis_url
        self.procs: list[subprocess.Popen] = []
        self.engine = create_engine(pg_url)

    @property
    def redis(self):
        import redis

        return redis.Redis.from_url(self.env["ZOO_BROKER_URL"])

    def log(self, name: str) -> Path:
        return self.tmp / f"{name}.log"

    def start(
        self, name: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> subprocess.Popen:
        cwd = cwd or self.tmp
        cwd.mkdir(parents=True, exist_ok=True)
        out = open(self.log(name), "w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "zoo.cli", *args],
            env=env or self.env,
            cwd=cwd,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        proc.log_path = self.log(name)  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def worker(self, name: str, queues: str = "cpu") -> subprocess.Popen:
        return self.start(name, "worker", "--queues", queues, "--hostname", f"{name}@%h")

    def sql(self, query: str, **params):
        with self.engine.connect() as c:
            return c.execute(text(query), params).all()

    def logs(self) -> list[Path]:
        return [p.log_path for p in self.procs]  # type: ignore[attr-defined]

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                kill9_tree(p)
        self.engine.dispose()


@pytest.fixture
def fleet(pg_server_url, redis_url, tmp_path):
    _reset_pg(pg_server_url)
    import redis

    redis.Redis.from_url(redis_url).flushdb()
    from db.session import upgrade

    upgrade(pg_server_url)  # the tables exist before any process polls them
    env = child_env(ZOO_DATABASE_URL=pg_server_url, ZOO_BROKER_URL=redis_url, **FAST_REDELIVERY)
    f = Fleet(env, tmp_path, pg_server_url, redis_url)
    yield f
    f.close()
    redis.Redis.from_url(redis_url).flushdb()


def results_of_run(fleet: Fleet, run_id: int):
    return fleet.sql("SELECT model_id, status, task_id FROM results WHERE run_id = :r", r=run_id)


def latest_run(fleet: Fleet) -> int | None:
    rows = fleet.sql("SELECT max(id) FROM runs")
    return rows[0][0] if rows else None


# ---------------------------------------------------------------- kill -9


def test_kill9_mid_run_then_a_new_worker_every_model_gets_exactly_one_result(fleet):
    """Over 60 s in CI (two workers on two cores): a run of 12 models on real worker processes, one killed mid-task;
    its task comes back only after the broker's visibility timeout."""
    a = fleet.worker("wA")
    run = fleet.start("run", "run", "--top", "12", "--backend", "cpu", "--timeout", "60")
    logs = [a.log_path, run.log_path]
    # mid-run and mid-task: at least one row stored, and a task delivered but not acknowledged
    wait_until(
        lambda: (rid := latest_run(fleet)) and results_of_run(fleet, rid) and fleet.redis.hlen("unacked") >= 1,
        600,
        "worker A to store a result and hold a task",
        logs=logs,
    )
    killed = kill9_tree(a)
    wait_until(lambda: not any(alive(p) for p in killed), 30, "the whole worker tree to be dead")
    stored_before = len(results_of_run(fleet, latest_run(fleet)))
    assert stored_before < 12, "killed mid-run"
    # what the dead worker held, read once, after its death: kombu's unacked hash maps a delivery tag to
    # [message, exchange, routing key]; the message's headers carry the task id
    held = fleet.redis.hgetall("unacked")
    in_flight_tasks = {json.loads(v)[0]["headers"]["id"] for v in held.values()}
    assert in_flight_tasks, "the killed worker's task is still unacknowledged in the broker"

    b = fleet.worker("wB")
    logs.append(b.log_path)
    wait_until(lambda: run.poll() is not None, 900, "`zoo run` to finish", interval=2, logs=logs)
    out = run.log_path.read_text()
    assert run.returncode == 0, out[-3000:]
    assert "12 results stored" in out, out[-3000:]

    run_id = latest_run(fleet)
    rows = results_of_run(fleet, run_id)
    assert len(rows) == 12 and len({r.model_id for r in rows}) == 12
    assert fleet.sql("SELECT count(*) FROM results")[0][0] == 12, "no duplicate rows"
    assert all(r.status for r in rows)
    # every task A held when it died was delivered again, to B, and its rows are stored once. (Its
    # attempt count may still be 1: A can die after receiving a task and before the task body
    # records its attempt, or after storing the row and before the ack.)
    # B gets them back only after the recovery sweep finds A gone (about a minute after the kill); if A
    # had stored a task's rows before dying, `zoo run` may have finished before B ran it again
    wait_until(
        lambda: all(f"zoo.validate[{t}] succeeded" in b.log_path.read_text() for t in in_flight_tasks),
        300,
        f"worker B to run again the tasks A held ({', '.join(sorted(in_flight_tasks))})",
        logs=logs,
    )
    for task_id in in_flight_tasks:
        stored = fleet.sql("SELECT model_id FROM results WHERE task_id = :t", t=task_id)
        assert stored and len(stored) == len({m for (m,) in stored}), (task_id, stored)
    assert {t for (t,) in fleet.sql("SELECT task_id FROM task_attempts WHERE attempts >= 2")} <= {
        r.task_id for r in rows
    }
    wait_until(
        lambda: fleet.redis.hlen("unacked") == 0 and fleet.redis.llen("cpu") == 0,
        120,
        "the broker to be empty",
        logs=logs,
    )


# ---------------------------------------------------------------- the same task twice


def test_the_same_task_delivered_twice_gives_one_row_and_one_model_run(fleet):
    proc = run_zoo(["run", "--top", "1", "--backend", "cpu", "--detach"], fleet.env, fleet.tmp, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    r = fleet.redis
    assert r.llen("cpu") == 1
    r.lpush("cpu", r.lindex("cpu", 0))  # the very same message (same task id) delivered twice
    w = fleet.worker("w1")
    wait_until(
        lambda: w.log_path.read_text().count("succeeded") >= 2,
        600,
        "both deliveries to be processed",
        logs=[w.log_path],
    )
    rows = fleet.sql("SELECT model_id, attempts, task_id FROM results")
    assert len(rows) == 1 and rows[0].attempts == 1, rows
    assert "are stored already" in w.log_path.read_text(), "the second delivery only acknowledged"
    assert fleet.sql("SELECT attempts FROM task_attempts")[0][0] == 1

    # the same model enqueued again as a new task (another run, the same week): still one row
    proc = run_zoo(["run", "--top", "1", "--backend", "cpu", "--detach"], fleet.env, fleet.tmp, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    wait_until(lambda: w.log_path.read_text().count("succeeded") >= 3, 600, "the second run's task", logs=[w.log_path])
    rows = fleet.sql("SELECT model_id, attempts, run_id FROM results")
    assert len(rows) == 1 and rows[0].attempts == 2 and rows[0].run_id == latest_run(fleet), rows


# ---------------------------------------------------------------- two beats


def test_two_beats_one_leader_and_one_weekly_sweep(fleet):
    proc = run_zoo(["sync", "--builtin"], fleet.env, fleet.tmp, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    n_models = int(proc.stdout.split("stored ")[1].split()[0])
    beat_env = {**fleet.env, "ZOO_BEAT_SWEEP_EVERY_S": "2", "ZOO_BEAT_LOCK_TTL": "15", "ZOO_SCHEDULE_BACKENDS": "cpu"}
    b1 = fleet.start("beat1", "beat", env=beat_env, cwd=fleet.tmp / "b1")
    b2 = fleet.start("beat2", "beat", env=beat_env, cwd=fleet.tmp / "b2")
    w = fleet.worker("wsched", queues="scheduler")  # sweeps run here; the validations wait in `cpu`
    logs = [b1.log_path, b2.log_path, w.log_path]
    wait_until(
        lambda: fleet.sql("SELECT id FROM sweeps WHERE finished_at IS NOT NULL"),
        600,
        "a finished weekly sweep",
        logs=logs,
    )
    # the leader keeps sending the sweep every 2 s: later ones must find the week claimed
    wait_until(
        lambda: w.log_path.read_text().count("already claimed") >= 2, 300, "repeated sweeps to be skipped", logs=logs
    )

    sweeps = fleet.sql("SELECT kind, period, enqueued, deduplicated, candidates, run_id FROM sweeps")
    assert len(sweeps) == 1 and sweeps[0].kind == "weekly", sweeps
    sweep = sweeps[0]
    assert sweep.candidates == n_models and sweep.enqueued + sweep.deduplicated == n_models
    assert fleet.redis.llen("cpu") == sweep.enqueued, "one task per fingerprint group, enqueued once"
    assert fleet.sql("SELECT requested FROM runs WHERE id = :r", r=sweep.run_id)[0][0] == n_models

    sent = [p.read_text().count("Sending due task weekly-sweep") for p in (b1.log_path, b2.log_path)]
    assert sorted(sent)[0] == 0 and sorted(sent)[1] >= 2, f"only the leader sends: {sent}"
    leader, standby = (b1, b2) if sent[0] else (b2, b1)
    assert "standby" in standby.log_path.read_text()

    # the leader dies: the standby takes over within the lock's TTL, and the week stays swept once
    kill9_tree(leader)
    before = standby.log_path.read_text().count("Sending due task weekly-sweep")
    wait_until(
        lambda: standby.log_path.read_text().count("Sending due task weekly-sweep") > before,
        120,
        "the standby to take over",
        logs=logs,
    )
    assert "leader: sending due tasks" in standby.log_path.read_text()
    assert len(fleet.sql("SELECT id FROM sweeps")) == 1
    fleet.redis.delete("cpu")


# ---------------------------------------------------------------- SIGTERM


def test_sigterm_puts_the_running_task_back_on_the_queue(fleet):
    env = {**fleet.env, "ZOO_PLUGINS": "tests.plugins.faulty_backends"}
    fleet.env = env
    proc = run_zoo(
        ["run", "--top", "1", "--backend", "cpu+zoo_test_hang", "--timeout", "15", "--detach"],
        env,
        fleet.tmp,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    a = fleet.worker("wA")
    r = fleet.redis
    # the model is running (it hangs): the message is delivered, unacknowledged, off the queue
    wait_until(
        lambda: r.hlen("unacked") == 1 and r.llen("cpu") == 0 and "received" in a.log_path.read_text(),
        300,
        "worker A to take the task",
        logs=[a.log_path],
    )
    wait_until(
        lambda: len(descendants(a.pid)) >= 3,
        120,
        "the model process to start (pool, forkserver, model)",
        logs=[a.log_path],
    )
    tree = descendants(a.pid)
    t0 = time.monotonic()
    a.send_signal(signal.SIGTERM)
    wait_until(lambda: a.poll() is not None, 120, "worker A to exit on SIGTERM", logs=[a.log_path])
    # back on the queue at once, not after the visibility timeout (100 s)
    wait_until(
        lambda: r.llen("cpu") == 1 and r.hlen("unacked") == 0,
        30,
        "the message to be back on the queue",
        logs=[a.log_path],
    )
    assert time.monotonic() - t0 < 60
    wait_until(
        lambda: not any(alive(p) for p in tree), 30, "the model process to be gone with its worker", logs=[a.log_path]
    )
    assert fleet.sql("SELECT count(*) FROM results")[0][0] == 0

    b = fleet.worker("wB")
    wait_until(lambda: fleet.sql("SELECT status FROM results"), 300, "worker B to store the result", logs=[b.log_path])
    rows = fleet.sql("SELECT status FROM results")
    assert [x.status for x in rows] == ["timeout"]
    assert fleet.sql("SELECT attempts FROM task_attempts")[0][0] == 2


# ---------------------------------------------------------------- Redis restarted


def private_redis(tmp_path, *options: str):
    """A redis-server of the test's own on a free port, with ``options`` (persistence); yields its
    URL, port, and ``start``/``stop`` to restart it."""
    import shutil

    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("redis-server is not installed")
    port = free_port()
    data = tmp_path / "redis"
    data.mkdir()
    cmd = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(data), "--save", "", *options]
    state = {}

    def start():
        state["proc"] = subprocess.Popen(
            cmd, stdout=open(data / "redis.log", "a"), stderr=subprocess.STDOUT, start_new_session=True
        )
        import redis

        wait_until(lambda: _ping(redis.Redis(port=port)), 30, "redis-server to answer")

    def stop(sig=signal.SIGTERM):
        p = state["proc"]
        p.send_signal(sig)
        p.wait(30)

    start()
    yield {"url": f"redis://127.0.0.1:{port}/0", "port": port, "start": start, "stop": stop}
    if state["proc"].poll() is None:
        stop(signal.SIGKILL)


@pytest.fixture
def own_redis(tmp_path):
    """A private append-only redis-server (the shared one keeps its queues in memory only)."""
    yield from private_redis(tmp_path, "--appendonly", "yes", "--appendfsync", "always")


def _ping(client) -> bool:
    import redis

    try:
        return bool(client.ping())
    except redis.RedisError:
        return False


def test_redis_restarted_mid_run_loses_nothing(fleet, own_redis):
    fleet.env = {**fleet.env, "ZOO_BROKER_URL": own_redis["url"]}
    w = fleet.worker("w1")
    run = fleet.start("run", "run", "--top", "6", "--backend", "cpu", "--timeout", "60")
    logs = [w.log_path, run.log_path]
    wait_until(lambda: (rid := latest_run(fleet)) and results_of_run(fleet, rid), 600, "the first result", logs=logs)
    stored_before = len(results_of_run(fleet, latest_run(fleet)))
    assert stored_before < 6
    own_redis["stop"](signal.SIGKILL)  # the broker dies mid-run (append-only file, fsync always)
    time.sleep(2)  # the broker stays down a moment: the worker must notice and wait for it
    own_redis["start"]()
    wait_until(lambda: run.poll() is not None, 900, "`zoo run` to finish", interval=2, logs=logs)
    assert run.returncode == 0, run.log_path.read_text()[-3000:]
    assert "6 results stored" in run.log_path.read_text()
    rows = results_of_run(fleet, latest_run(fleet))
    assert len(rows) == 6 and len({r.model_id for r in rows}) == 6
    assert fleet.sql("SELECT count(*) FROM results")[0][0] == 6
    assert w.poll() is None, "the worker survived the broker's restart"
