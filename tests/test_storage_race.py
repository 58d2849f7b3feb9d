"""Concurrent stores of one result key, on SQLite and PostgreSQL: a true upsert loses nothing."""

from __future__ import annotations

import threading
import time

from sqlalchemy import event, select, text

from db import repository
from db.models import Result
from db.session import get_engine, session_scope
from tests.test_storage import _result


def _wait_until_blocked(url: str, started: threading.Event) -> None:
    """Return once the second writer's INSERT is running and waiting for the first's commit."""
    assert started.wait(30), "the second writer never sent its INSERT"
    if not url.startswith("postgresql"):
        time.sleep(0.5)  # SQLite: it waits on the write lock (busy timeout); nothing to observe it by
        return
    with get_engine(url).connect() as c:
        for _ in range(300):
            waiting = c.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock' AND query ILIKE 'INSERT INTO results%'"
                )
            ).scalar()
            if waiting:
                return
            time.sleep(0.05)
    raise AssertionError("the second writer's INSERT never waited on the first's row")


def test_forced_race_of_two_stores_gives_one_row_with_two_attempts(database_url):
    """The first writer has inserted the key and not committed when the second stores the same
    key: the second waits, then updates that row (select-then-insert lost it to an IntegrityError)."""
    with session_scope():
        pass  # migrations
    engine = get_engine(database_url)
    started = threading.Event()
    errors: list[BaseException] = []

    def second_writer() -> None:
        try:
            with session_scope() as s:
                conn = s.connection()

                @event.listens_for(conn, "before_cursor_execute")
                def _mark(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
                    if statement.lstrip().upper().startswith("INSERT INTO RESULTS"):
                        started.set()

                repository.store_result(
                    s, _result("org/race", "mismatch", details={"harness_version": "1", "writer": 2}), task_id="t2"
                )
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    with session_scope() as first:
        row = repository.store_result(
            first, _result("org/race", "pass", details={"harness_version": "1", "writer": 1}), task_id="t1"
        )
        assert row.attempts == 1
        t = threading.Thread(target=second_writer)
        t.start()
        _wait_until_blocked(database_url, started)
        assert t.is_alive(), errors  # still waiting for this commit
    t.join(60)
    assert not t.is_alive() and not errors, errors
    with session_scope() as s:
        rows = s.scalars(select(Result).where(Result.model_id == "org/race")).all()
        assert len(rows) == 1
        r = rows[0]
        assert (r.attempts, r.status, r.details["writer"], r.task_id) == (
            2,
            "mismatch",
            2,
            "t2",
        )  # the later store's result
    engine.dispose()


def test_concurrent_stores_of_one_key_all_count(database_url):
    """Eight threads store the same key at once (a barrier): one row, attempts = 8."""
    with session_scope():
        pass
    n = 8
    barrier = threading.Barrier(n)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            barrier.wait(10)
            with session_scope() as s:
                repository.store_result(s, _result("org/race", "pass", duration_s=float(i)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    with session_scope() as s:
        assert [r.attempts for r in s.scalars(select(Result).where(Result.model_id == "org/race"))] == [n]


def test_upsert_keeps_precision_source_and_run(database_url):
    """The stored-source rule and the run/task ids survive the upsert (_stored_source)."""
    base = dict(precision="fp32")
    with session_scope() as s:
        repository.store_result(
            s,
            _result("org/p", "pass", details={"harness_version": "1", "precision_source": "plugin"}, **base),
            run_id=None,
            task_id="a",
        )
        row = repository.store_result(
            s, _result("org/p", "pass", details={"harness_version": "1", "precision_source": "flag"}, **base)
        )
        assert (row.precision_source, row.attempts, row.task_id) == ("plugin", 2, "a")
        other = repository.store_result(
            s, _result("org/q", "pass", details={"harness_version": "1", "precision_source": "flag"}, **base)
        )
        other = repository.store_result(
            s, _result("org/q", "pass", details={"harness_version": "1", "precision_source": "default"}, **base)
        )
        assert other.precision_source == "default"
