"""Fleet planning (services.planning) and the fleet's bookkeeping, in-process (fast): priorities and triggers, sweeps
claimed once per period, fingerprint groups, attempts and permanent failure, redelivered tasks,
the beat leader lock, the worker's visibility-timeout check, and the raw Redis messages."""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import sys

import pytest

from db import repository
from db.session import session_scope
from db.weeks import iso_week
from tests.conftest import child_env
from zoo_runner.request import HARNESS_VERSION

NOW = dt.datetime(2025, 3, 19, 12, 0, tzinfo=dt.timezone.utc)  # a Wednesday of 2025-W12


def entries(*rows):
    return [repository.CatalogEntry(model_id=m, downloads=d, sha=sha, library="transformers") for m, d, sha in rows]


def result(
    model_id,
    when,
    status="pass",
    revision=None,
    versions=None,
    harness=HARNESS_VERSION,
    backend="cpu",
    tier="tiny",
    fingerprint=None,
):
    return {
        "model_id": model_id,
        "revision": revision,
        "backend": backend,
        "tier": tier,
        "status": status,
        "fingerprint": fingerprint,
        "versions": versions or {"torch": "2.6", "transformers": "5.0", "zoo": "0.1"},
        "started_at": when.isoformat(),
        "details": {"harness_version": harness},
    }


# ---------------------------------------------------------------- priorities and triggers


def test_priority_is_download_weight_times_staleness_with_triggers(database_url):
    from services.planning import candidates, daily_selection, weekly_selection

    with session_scope() as s:
        repository.store_snapshot(
            s,
            entries(
                ("org/big-stale", 1_000_000, "a1"),
                ("org/big-fresh", 900_000, "b1"),
                ("org/new-rev", 50_000, "c2"),
                ("org/flaky", 40_000, "d1"),
                ("org/old-torch", 30_000, "e1"),
                ("org/old-harness", 20_000, "f1"),
                ("org/never", 10, "g1"),
            ),
            "test",
        )
        repository.store_result(s, result("org/big-stale", NOW - dt.timedelta(days=20), revision="a1"))
        repository.store_result(s, result("org/big-fresh", NOW - dt.timedelta(hours=3), revision="b1"))
        repository.store_result(s, result("org/new-rev", NOW - dt.timedelta(hours=3), revision="c1"))
        repository.store_result(s, result("org/flaky", NOW - dt.timedelta(hours=3), status="mismatch", revision="d1"))
        repository.store_result(
            s,
            result(
                "org/old-torch",
                NOW - dt.timedelta(days=2),
                revision="e1",
                versions={"torch": "2.5", "transformers": "5.0"},
            ),
        )
        repository.store_result(s, result("org/old-harness", NOW - dt.timedelta(hours=3), revision="f1", harness="0"))
        # a result on another backend never counts for this one
        repository.store_result(s, result("org/never", NOW - dt.timedelta(hours=1), backend="neuron"))

    with session_scope() as s:
        cands = candidates(s, "cpu", "tiny", now=NOW)
    by_id = {c.model_id: c for c in cands}
    assert by_id["org/big-stale"].triggers == []
    assert by_id["org/big-fresh"].triggers == []
    assert by_id["org/new-rev"].triggers == ["new_revision"]
    assert by_id["org/flaky"].triggers == ["reconfirm_failure"]
    assert by_id["org/old-torch"].triggers == ["new_versions"]
    assert by_id["org/old-harness"].triggers == ["new_harness"]
    assert by_id["org/never"].triggers == ["new_model"]
    assert abs(sum(c.weight for c in cands) - 1.0) < 1e-9
    # weight x staleness: the stale big model outranks the fresh one of about the same weight
    assert by_id["org/big-stale"].score > by_id["org/big-fresh"].score
    # score = weight x (1 + weeks stale) x (10 with a trigger); never validated counts as 8 weeks
    c = by_id["org/new-rev"]
    assert c.score == pytest.approx(c.weight * (1 + 0.125 / 7) * 10)
    c = by_id["org/never"]
    assert c.score == pytest.approx(c.weight * 9 * 10)
    assert [c.score for c in cands] == sorted((c.score for c in cands), reverse=True)

    daily = daily_selection(cands, top=3)
    assert "org/big-fresh" not in [c.model_id for c in daily_selection(cands, top=100)], (
        "validated 3 hours ago, nothing changed: not due"
    )
    assert daily[0].model_id == "org/big-stale" and len(daily) == 3
    weekly = {c.model_id for c in weekly_selection(cands, iso_week(NOW))}
    # this week's untriggered results are done; the rest (stale, triggered, never) are swept
    assert weekly == {"org/big-stale", "org/new-rev", "org/flaky", "org/old-torch", "org/old-harness", "org/never"}


def test_a_failure_confirmed_twice_is_no_longer_a_trigger(database_url):
    from services.planning import candidates

    with session_scope() as s:
        repository.store_snapshot(s, entries(("org/broken", 100, None)), "test")
        repository.store_result(s, result("org/broken", NOW - dt.timedelta(hours=5), status="compile_error"))
        repository.store_result(
            s, result("org/broken", NOW - dt.timedelta(hours=4), status="compile_error")
        )  # same week: attempts 2
    with session_scope() as s:
        (c,) = candidates(s, "cpu", "tiny", now=NOW)
    assert c.triggers == []


# ---------------------------------------------------------------- fingerprint groups


def test_models_sharing_a_fingerprint_are_one_task(database_url):
    from services.planning import Candidate, attach_fingerprints, group_by_fingerprint

    cands = [
        Candidate(m, d, 0.0, sha=sha)
        for m, d, sha in [
            ("a/bert-1", 9, "s1"),
            ("b/gpt", 8, "s2"),
            ("c/bert-2", 7, "s3"),
            ("d/unknown", 6, "s4"),
            ("e/bert-3", 5, "s5"),
        ]
    ]
    with session_scope() as s:
        for m, fp in [("a/bert-1", "fp-bert"), ("b/gpt", "fp-gpt"), ("c/bert-2", "fp-bert"), ("e/bert-3", "fp-bert")]:
            repository.store_plan(s, m, "tiny", f"s{'abcde'.index(m[0]) + 1}", fp)
        repository.store_plan(s, "d/unknown", "tiny", "old-sha", "fp-stale")  # another commit: not used
    with session_scope() as s:
        assert attach_fingerprints(s, cands, "cpu", "tiny", compute=False) == 0
    groups = group_by_fingerprint(cands)
    assert [g.model_ids for g in groups] == [["a/bert-1", "c/bert-2", "e/bert-3"], ["b/gpt"], ["d/unknown"]]
    with session_scope() as s:
        assert attach_fingerprints(s, cands, "cpu", "full", compute=False) == 0  # never for real weights


# ---------------------------------------------------------------- sweeps


def test_a_weekly_sweep_runs_once_per_iso_week(database_url, monkeypatch):
    from services.planning import plan_sweep

    sent = []

    def publish(groups, backend, tier, run_id, timeout=600.0):
        sent.append([g.model_ids for g in groups])
        return [str(i) for i in range(len(groups))]

    def run_sweep(*args, **kwargs):
        return plan_sweep(*args, publish=publish, **kwargs)

    with session_scope() as s:
        repository.store_snapshot(s, entries(("a/x", 30, "1"), ("b/y", 20, "2"), ("c/z", 10, "3")), "test")
        repository.store_plan(s, "a/x", "tiny", "1", "fp1")
        repository.store_plan(s, "b/y", "tiny", "2", "fp2")
        repository.store_plan(s, "c/z", "tiny", "3", "fp1")

    first = run_sweep("weekly", "cpu", "tiny", now=NOW)
    assert not first["skipped"] and first["models"] == 3 and first["tasks"] == 2 and first["deduplicated"] == 1
    assert sent == [[["a/x", "c/z"], ["b/y"]]]
    again = run_sweep("weekly", "cpu", "tiny", now=NOW + dt.timedelta(days=2))  # same ISO week
    assert again["skipped"] and len(sent) == 1
    other_backend = run_sweep("weekly", "neuron", "tiny", now=NOW)
    assert not other_backend["skipped"]
    next_week = run_sweep("weekly", "cpu", "tiny", now=NOW + dt.timedelta(days=7))
    assert not next_week["skipped"] and next_week["period"] == "2025-W13"
    with session_scope() as s:
        from sqlalchemy import select

        from db.models import Run, Sweep

        sweeps = s.scalars(select(Sweep).order_by(Sweep.id)).all()
        assert [(w.period, w.backend, w.enqueued, w.deduplicated) for w in sweeps] == [
            ("2025-W12", "cpu", 2, 1),
            ("2025-W12", "neuron", 2, 1),
            ("2025-W13", "cpu", 2, 1),
        ]
        assert all(w.finished_at for w in sweeps)
        assert s.get(Run, first["run_id"]).requested == 3

    daily = run_sweep("daily", "cpu", "tiny", top=1, now=NOW)
    assert daily["models"] == 1 and daily["period"] == "2025-03-19"
    assert run_sweep("daily", "cpu", "tiny", top=1, now=NOW)["skipped"]


def test_a_failed_sweep_releases_its_claim_and_a_dead_one_is_taken_over(database_url, monkeypatch):
    from services.planning import plan_sweep
    from zoo_runner.exceptions import BrokerUnavailable

    with session_scope() as s:
        repository.store_snapshot(s, entries(("a/x", 30, None)), "test")

    def down(*a, **k):
        raise BrokerUnavailable("broker down")

    with pytest.raises(BrokerUnavailable):
        plan_sweep("weekly", "cpu", "tiny", publish=down, now=NOW, dedup=False)
    assert not plan_sweep("weekly", "cpu", "tiny", publish=lambda *a, **k: ["1"], now=NOW, dedup=False)["skipped"], (
        "the failed attempt left no claim"
    )

    with session_scope() as s:  # a claim whose sweeper died long ago
        sid = repository.claim_sweep(s, "daily", "2025-03-19", "cpu", "tiny")
        assert repository.claim_sweep(s, "daily", "2025-03-19", "cpu", "tiny") is None
        from db.models import Sweep

        s.get(Sweep, sid).started_at = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=2)
    with session_scope() as s:
        assert repository.claim_sweep(s, "daily", "2025-03-19", "cpu", "tiny") == sid
        assert repository.claim_sweep(s, "daily", "2025-03-19", "cpu", "tiny") is None


# ---------------------------------------------------------------- attempts, redelivery


def test_attempts_are_counted_per_task(database_url):
    with session_scope() as s:
        assert [repository.record_attempt(s, "t-1", "a/x", "cpu", "tiny") for _ in range(3)] == [1, 2, 3]
        assert repository.record_attempt(s, "t-2", "a/x", "cpu", "tiny") == 1


def test_a_task_delivered_after_max_attempts_is_stored_as_a_permanent_failure(sqlite_url, monkeypatch):
    from services import validation
    from workers.celery_app import MAX_ATTEMPTS
    from workers.tasks import validate_task

    monkeypatch.setattr(validation, "validate_and_store", lambda *a, **k: pytest.fail("must not run again"))
    with session_scope() as s:
        for _ in range(MAX_ATTEMPTS):
            repository.record_attempt(s, "t-dies", "arch:BertModel", "cpu", "tiny")
    out = validate_task.apply(
        args=[{"model_id": "arch:BertModel", "backend": "cpu", "tier": "tiny"}, None],
        kwargs={"followers": ["arch:RobertaModel"]},
        task_id="t-dies",
    ).get()
    assert out == "crash"
    with session_scope() as s:
        from sqlalchemy import select

        from db.models import Result, TaskAttempt

        rows = s.scalars(select(Result).order_by(Result.model_id)).all()
        assert [(r.model_id, r.status, r.task_id) for r in rows] == [
            ("arch:BertModel", "crash", "t-dies"),
            ("arch:RobertaModel", "crash", "t-dies"),
        ]
        assert rows[0].details["permanent_failure"] and rows[0].error["type"] == "WorkerLost"
        assert s.get(TaskAttempt, "t-dies").gave_up


def test_a_redelivered_task_whose_rows_are_stored_only_acknowledges(sqlite_url, monkeypatch):
    from services import validation
    from workers.tasks import validate_task

    with session_scope() as s:
        repository.store_result(s, result("arch:BertModel", dt.datetime.now(dt.timezone.utc)), task_id="t-done")
    monkeypatch.setattr(validation, "validate_and_store", lambda *a, **k: pytest.fail("must not run again"))
    assert (
        validate_task.apply(args=[{"model_id": "arch:BertModel", "backend": "cpu"}, None], task_id="t-done").get()
        == "pass"
    )
    with session_scope() as s:
        from sqlalchemy import func, select

        from db.models import Result, TaskAttempt

        assert s.scalar(select(func.count()).select_from(Result)) == 1
        assert s.get(TaskAttempt, "t-done") is None


def test_a_bug_is_retried_then_stored_as_zoos_own_failure(sqlite_url, monkeypatch):
    from services import validation
    from workers.celery_app import MAX_ATTEMPTS
    from workers.tasks import validate_task

    def boom(*a, **k):
        raise KeyError("a bug")

    monkeypatch.setattr(validation, "validate_and_store", boom)
    with session_scope() as s:
        for _ in range(MAX_ATTEMPTS - 1):
            repository.record_attempt(s, "t-bug", "arch:BertModel", "cpu", "tiny")
    assert (
        validate_task.apply(args=[{"model_id": "arch:BertModel", "backend": "cpu"}, None], task_id="t-bug").get()
        == "reference_error"
    )
    with session_scope() as s:
        from sqlalchemy import select

        from db.models import Result

        (row,) = s.scalars(select(Result)).all()
        assert row.error["type"] == "KeyError" and row.details["permanent_failure"]


# ---------------------------------------------------------------- the worker's startup check


@pytest.mark.parametrize("how", ["zoo", "celery"])
def test_a_worker_refuses_a_visibility_timeout_below_the_hard_limit(tmp_path, how):
    env = child_env(
        ZOO_BROKER_URL="redis://127.0.0.1:1/0",
        ZOO_TASK_TIME_LIMIT="3600",
        ZOO_VISIBILITY_TIMEOUT="1800",
        ZOO_DATABASE_URL=f"sqlite:///{tmp_path / 'z.db'}",
    )
    cmd = (
        [sys.executable, "-m", "zoo.cli", "worker"]
        if how == "zoo"
        else [sys.executable, "-m", "celery", "-A", "workers.celery_app", "worker", "--loglevel", "warning"]
    )
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if "visibility timeout" in line]
    assert len(lines) == 1 and "1800 s" in lines[0] and "3600 s" in lines[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_visibility_check_accepts_a_sane_configuration():
    from types import SimpleNamespace

    from workers.celery_app import visibility_problem

    def conf(vt, limit, url="redis://x/0"):
        return SimpleNamespace(
            broker_url=url, broker_transport_options={"visibility_timeout": vt}, task_time_limit=limit
        )

    assert visibility_problem(conf(4200, 3600)) is None
    assert "must exceed" in visibility_problem(conf(3600, 3600))
    assert visibility_problem(conf(10, 3600, url="amqp://x//")) is None


# ---------------------------------------------------------------- beat leader lock


def test_one_beat_holds_the_leader_lock_and_a_standby_takes_over(redis_url):
    import redis

    from workers.schedules import LOCK_KEY, LeaderScheduler

    def beat(node):
        b = object.__new__(LeaderScheduler)
        b.lock_ttl_s, b.node, b.is_leader, b._announced = 3.0, node, False, False
        b._redis = redis.Redis.from_url(redis_url)
        b.app = type("App", (), {"conf": type("Conf", (), {"broker_url": redis_url})()})()
        return b

    client = redis.Redis.from_url(redis_url)
    client.delete(LOCK_KEY)
    one, two = beat("one"), beat("two")
    assert one.hold_lock() and not two.hold_lock()
    assert one.hold_lock() and not two.hold_lock(), "the leader renews; the standby stays standby"
    assert 0 < client.pttl(LOCK_KEY) <= 3000
    client.eval(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0",
        1,
        LOCK_KEY,
        "one",
    )  # the leader exits
    assert two.hold_lock() and not one.hold_lock()
    client.delete(LOCK_KEY)


# ---------------------------------------------------------------- the raw Redis messages


def test_pipelined_messages_are_the_messages_celery_writes(redis_url):
    import redis

    from workers.celery_app import app
    from workers.publish import redis_messages
    from workers.tasks import validate_task

    args, kwargs = (
        [{"model_id": "org/m", "backend": "cpu", "tier": "tiny", "timeout_s": 60.0}, 7],
        {"followers": ["org/n"]},
    )
    r = redis.Redis.from_url(redis_url)
    r.delete("cmpq")
    with app.connection_for_write(redis_url) as conn:
        validate_task.apply_async(
            args=args, kwargs=kwargs, queue="cmpq", connection=conn, time_limit=None, soft_time_limit=None
        )
    celery_msg = json.loads(r.rpop("cmpq"))
    ((tid, raw),) = list(redis_messages(app, validate_task.name, "cmpq", [("t-1", args, kwargs)]))
    ours = json.loads(raw)
    assert set(ours) == set(celery_msg)
    assert set(ours["headers"]) == set(celery_msg["headers"]) and set(ours["properties"]) == set(
        celery_msg["properties"]
    )
    for key in (
        "lang",
        "task",
        "retries",
        "timelimit",
        "ignore_result",
        "shadow",
        "eta",
        "expires",
        "group",
        "parent_id",
    ):
        assert ours["headers"][key] == celery_msg["headers"][key], key
    assert ours["headers"]["id"] == ours["headers"]["root_id"] == ours["properties"]["correlation_id"] == tid
    assert ours["properties"]["delivery_info"] == celery_msg["properties"]["delivery_info"]
    assert json.loads(base64.b64decode(ours["body"])) == json.loads(base64.b64decode(celery_msg["body"]))
    assert (
        ours["content-type"] == celery_msg["content-type"]
        and ours["properties"]["body_encoding"] == celery_msg["properties"]["body_encoding"]
    )
