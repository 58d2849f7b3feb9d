"""The test suite's own harness (issue 46): two xdist workers never share a Redis database or a
PostgreSQL database, and every run prints what its slowest tests cost."""

from __future__ import annotations

import os

import pytest
import tomllib

from tests.conftest import HEAVY_FIRST, ROOT, redis_db_for_worker


def test_each_xdist_worker_gets_its_own_redis_database():
    dbs = [redis_db_for_worker(f"gw{i}") for i in range(6)]
    assert len(set(dbs)) == 6 and redis_db_for_worker("") not in dbs  # a lone session: another one again
    assert 0 not in dbs and all(0 < db < 16 for db in dbs)  # never a developer's default, all within Redis's 16
    with pytest.raises(pytest.fail.Exception, match="at most 6 workers"):
        redis_db_for_worker("gw6")


def test_this_session_uses_its_workers_databases(redis_url, pg_server_url):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    assert redis_url.endswith(f"/{redis_db_for_worker(worker)}")
    assert f"/zoo_test_{worker or 'main'}_" in pg_server_url


def test_the_readme_command_runs_on_two_workers_and_prints_the_slowest_tests():
    addopts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["addopts"].split()
    assert "-n" in addopts and addopts[addopts.index("-n") + 1] == "2" and "--durations=30" in addopts
    assert "--no-loadscope-reorder" in addopts  # else xdist hands out files by test count, not HEAVY_FIRST's order
    ci = (ROOT / ".ci" / "run").read_text()
    assert ".venv/bin/python -m pytest\n" in ci  # the README's command, options from pyproject.toml
    assert "bash scripts/setup.sh dev && .venv/bin/python -m pytest" in (ROOT / "README.md").read_text()


def test_the_heaviest_files_are_handed_out_first(pytestconfig):
    """Every file HEAVY_FIRST names exists (a renamed one would silently go last again), and the session's
    items start with them, in that order."""
    assert all((ROOT / "tests" / name).is_file() for name in HEAVY_FIRST)
    from tests.conftest import pytest_collection_modifyitems

    class Item:
        def __init__(self, name):
            self.path = ROOT / "tests" / name

    items = [Item(n) for n in ("test_api.py", "test_cli.py", "test_api.py", "test_envs.py")]
    pytest_collection_modifyitems(pytestconfig, items)
    assert [i.path.name for i in items] == ["test_envs.py", "test_cli.py", "test_api.py", "test_api.py"]
