"""Ctrl-C and SIGTERM during `zoo run`: nothing starts after the signal, what finished is kept, the run is marked
interrupted, and the same command validates only what is missing (issue 51)."""

from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time

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
