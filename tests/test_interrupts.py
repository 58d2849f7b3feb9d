"""Ctrl-C and SIGTERM during `zoo run`: nothing starts after the signal, what finished is kept, the run is marked
interrupted, and the same command validates only what is missing (issue 51)."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import child_env

TOP = 6


def _rows(url: str) -> list:
    eng = create_engine(url)
    try:
        with eng.connect() as c:
            return c.execute(text("SELECT model_id, attempts, run_id, started_at FROM results")).all()
    except Exception:  # the schema is not there yet
        return []
    finally:
        eng.dispose()


def test_an_interrupted_run_keeps_what_finished_and_the_next_one_does_only_the_rest(tmp_path):
    """Ctrl-C (SIGINT) once a row is stored; then the same command."""
    url = f"sqlite:///{tmp_path / 'zoo.db'}"
    env = child_env(ZOO_DATABASE_URL=url)
    argv = [sys.executable, "-m", "zoo.cli", "run", "--top", str(TOP), "--backend", "cpu", "--jobs", "2"]
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not _rows(url) and proc.poll() is None:
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        sent = dt.datetime.now(dt.timezone.utc)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert took < 10, f"exited {took:.1f} s after the signal"
    assert "SIGINT: stopping" in err and "interrupted:" in err, err[-2000:]
    first = _rows(url)
    assert 1 <= len(first) < TOP, first
    for row in first:  # no model started after the signal (a stored row started before it)
        started = dt.datetime.fromisoformat(str(row.started_at))
        started = started if started.tzinfo else started.replace(tzinfo=dt.timezone.utc)
        assert started <= sent, (row, sent)
    eng = create_engine(url)
    with eng.connect() as c:
        ((state, missing),) = c.execute(text("SELECT state, missing FROM runs")).all()
    assert (state, missing) == ("interrupted", TOP - len(first))
    # the same command resumes it: only what is missing, no attempts counted again, one run
    again = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"resuming run 1, interrupted with {TOP - len(first)} of {TOP} models missing" in again.stderr
    rows = _rows(url)
    assert len(rows) == TOP and {r.run_id for r in rows} == {1}
    assert all(r.attempts == 1 for r in rows), rows
    with eng.connect() as c:
        assert c.execute(text("SELECT state, missing FROM runs")).all() == [("finished", None)]
    eng.dispose()


def test_only_the_newest_run_of_the_same_parameters_is_resumed(database_url):
    from db import repository
    from db.session import session_scope

    args = ("cpu", "tiny", 6, None, "auto", None)
    with session_scope() as s:
        run = repository.start_run(s, "cpu", "tiny", "inprocess", 6, None)
        repository.interrupt_run(s, run.id, 4)
    with session_scope() as s:
        assert repository.resumable_run(s, *args).id == run.id
        assert repository.resumable_run(s, "cpu", "tiny", 7, None, "auto", None) is None  # another --top
        assert repository.resumable_run(s, "cpu", "tiny", 6, None, "fp32", None) is None  # another precision
        assert repository.resumable_run(s, "cpu", "tiny", 6, None, "auto", "ov-old") is None  # another env
        repository.resume_run(s, run.id)
        repository.finish_run(s, run.id)
        assert repository.resumable_run(s, *args) is None  # finished
        repository.interrupt_run(s, run.id, 2)
        newer = repository.start_run(s, "cpu", "tiny", "inprocess", 6, None)  # e.g. --fresh
        assert repository.resumable_run(s, *args) is None and newer.state == "running"


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_two_runs_at_once_on_one_database_split_the_work(tmp_path, request, kind):
    """Two `zoo run --top 10` on one fresh database: each model validated once, each run validates some, and
    their printed counts sum to the rows stored."""
    import re

    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'zoo.db'}"
    else:
        from tests.conftest import _reset_pg

        url = request.getfixturevalue("pg_server_url")
        _reset_pg(url)
    env = child_env(ZOO_DATABASE_URL=url)
    subprocess.run([sys.executable, "-m", "zoo.cli", "sync"], env=env, cwd=tmp_path, capture_output=True, timeout=120)
    argv = [sys.executable, "-m", "zoo.cli", "run", "--top", "10", "--backend", "cpu", "--jobs", "1"]
    procs = [
        subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [e[-2000:] for _, e in outs]
    counts = [int(re.search(r"run \d+: (\d+) results stored", o).group(1)) for o, _ in outs]
    rows = _rows(url)
    assert len(rows) == 10 and all(r.attempts == 1 for r in rows), rows  # each model once
    assert sum(counts) == 10 and min(counts) >= 3, counts
    assert sorted(sum(1 for r in rows if r.run_id == run) for run in (1, 2)) == sorted(counts)


def test_a_claim_is_one_runs_until_released_or_expired(database_url):
    from db import repository
    from db.repository import HELD, MINE, STORED
    from db.session import session_scope
    from tests.test_storage import _result

    key = ("org/m", "cpu", "tiny", "auto", None)
    with session_scope() as s:
        a = repository.start_run(s, "cpu", "tiny", "inprocess", 2, None).id
        b = repository.start_run(s, "cpu", "tiny", "inprocess", 2, None).id
    with session_scope() as s:
        assert repository.claim_model(s, *key, a, 600) == MINE
    with session_scope() as s:
        assert repository.claim_model(s, *key, b, 600) == HELD  # a holds it
        assert repository.claim_model(s, *key, a, 600) == MINE  # still a's
        assert repository.claim_model(s, "org/m", "cpu", "tiny", "fp32", None, b, 600) == MINE  # another key
        repository.release_model(s, *key, a)
    with session_scope() as s:
        assert repository.claim_model(s, *key, b, -1) == MINE  # released: b's, with a lease already over
    with session_scope() as s:
        assert repository.claim_model(s, *key, a, 600) == MINE  # b's expired: a dead run frees it
        repository.store_result(s, _result("org/m", "pass", backend="cpu"), run_id=a)  # a stores its row
        repository.release_model(s, *key, a)
    with session_scope() as s:
        assert repository.claim_model(s, *key, b, 600) == STORED  # a run beside b stored it: b does not
        repository.finish_run(s, a)
        repository.finish_run(s, b)
    with session_scope() as s:  # a run started after both ended validates it again (a rerun, as before)
        c = repository.start_run(s, "cpu", "tiny", "inprocess", 2, None).id
    with session_scope() as s:
        assert repository.claim_model(s, *key, c, 600) == MINE
