"""Shared fixtures: isolated databases (SQLite and PostgreSQL), Redis, the CLI as a subprocess.

PostgreSQL and Redis are the local services (127.0.0.1:5432 trust auth, 127.0.0.1:6379). Tests
that need them are skipped when they are down, except where ZOO_REQUIRE_SERVICES=1 (CI), where
their absence is a failure.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _share_the_cores_among_workers() -> None:
    """Each pytest-xdist worker's torch, and every process it starts (CLIs, forkservers, model processes: OMP_* passes
    the sandbox), gets its share of the cores, as Zoo gives each of its concurrent model processes
    (zoo_runner.request.share_of_cores): two workers each running torch's default of one thread per core
    oversubscribe the machine, and OpenMP's barriers then wait on descheduled threads. Set before torch is imported
    here; a test about threads names its own (ValidationRequest.threads, ZOO_MODEL_THREADS)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1 and "OMP_NUM_THREADS" not in os.environ:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // workers))


_share_the_cores_among_workers()
SNAPSHOT_CSV = ROOT / "data" / "hub-top1000-2025-03.csv"  # the Hub snapshot kept in the repository (data/README.md)
PG_ADMIN_URL = os.environ.get("ZOO_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
REQUIRE_SERVICES = os.environ.get("ZOO_REQUIRE_SERVICES") == "1"


# The test files that take longest, first (per-file sums of `pytest --durations=0` on two workers, 2-core VM,
# 2026-12-07). pytest-xdist's loadfile hands files out in collection order (with --no-loadscope-reorder, in
# addopts), so these go first: a heavy file picked up last leaves the other worker idle at the end of the run.
# The three that mostly wait (a link down for two minutes, workers killed and their tasks redelivered on the
# broker's schedule) alternate with the ones that keep a core busy, so their waits overlap the other worker's
# work instead of ending the run on an idle machine.
HEAVY_FIRST = (
    "test_envs.py",
    "test_worker_recovery.py",
    "test_triage.py",
    "test_broker_loss.py",
    "test_long_tail_inputs.py",
    "test_fleet_faults.py",
    "test_precision.py",
    "test_engine.py",
    "test_remote_code.py",
    "test_fault_injection.py",
    "test_cache_poisoning.py",
    "test_gguf.py",
    "test_isolation.py",
    "test_fake_neuron.py",
    "test_diffusers_builder.py",
    "test_sandbox.py",
    "test_cli.py",
    "test_onnxrt_plugin.py",
    "test_backends_benchmark.py",
    "test_compile_cache.py",
)


def pytest_collection_modifyitems(config, items):
    """The heaviest files first (HEAVY_FIRST), the rest in their usual order; tests in a file keep theirs."""
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def need_service(name: str, host: str, port: int) -> None:
    if not _port_open(host, port):
        if REQUIRE_SERVICES:
            pytest.fail(f"{name} at {host}:{port} is required (ZOO_REQUIRE_SERVICES=1) but down")
        pytest.skip(f"{name} at {host}:{port} is not running")


@pytest.fixture(scope="session", autouse=True)
def reference_cache_dir(tmp_path_factory):
    """CPU references cached for this test session only (never the user's ~/.cache)."""
    path = tmp_path_factory.mktemp("reference-cache")
    old = os.environ.get("ZOO_REFERENCE_CACHE")
    os.environ["ZOO_REFERENCE_CACHE"] = str(path)
    yield path
    if old is None:
        os.environ.pop("ZOO_REFERENCE_CACHE", None)
    else:
        os.environ["ZOO_REFERENCE_CACHE"] = old


@pytest.fixture(scope="session", autouse=True)
def sandbox_test_env():
    """The test plugins' own settings reach model processes: their environment is an allowlist,
    and ZOO_SANDBOX_ENV names what else to pass."""
    old = os.environ.get("ZOO_SANDBOX_ENV")
    os.environ["ZOO_SANDBOX_ENV"] = "ZOO_TEST_PIDFILE,ZOO_FAKE_NEURON_EXTRA_OPS"
    yield
    if old is None:
        os.environ.pop("ZOO_SANDBOX_ENV", None)
    else:
        os.environ["ZOO_SANDBOX_ENV"] = old


@pytest.fixture(scope="session")
def pg_server_url():
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    need_service("PostgreSQL", "127.0.0.1", 5432)
    from sqlalchemy import create_engine, text

    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")  # one database per xdist worker, each its own name
    name = f"zoo_test_{worker}_{uuid.uuid4().hex[:8]}"
    admin = create_engine(PG_ADMIN_URL, isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.execute(text(f'CREATE DATABASE "{name}"'))
    url = PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
    yield url
    from db.session import get_engine

    get_engine.cache_clear()
    with admin.connect() as c:
        c.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}' AND pid <> pg_backend_pid()"
            )
        )
        c.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
    admin.dispose()


def _reset_pg(url: str) -> None:
    from sqlalchemy import create_engine, text

    eng = create_engine(url)
    with eng.begin() as c:
        c.execute(text("DROP SCHEMA public CASCADE"))
        c.execute(text("CREATE SCHEMA public"))
    eng.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request, tmp_path, monkeypatch):
    """Each DB test runs on SQLite and on PostgreSQL, on an empty schema; sets ZOO_DATABASE_URL."""
    from db import session as dbs

    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'zoo.db'}"
    else:
        url = request.getfixturevalue("pg_server_url")
        _reset_pg(url)
        dbs.get_engine.cache_clear()
        dbs._factory.cache_clear()
    monkeypatch.setenv("ZOO_DATABASE_URL", url)
    dbs._READY.clear()
    yield url
    dbs._READY.clear()


@pytest.fixture
def sqlite_url(tmp_path, monkeypatch):
    from db import session as dbs

    url = f"sqlite:///{tmp_path / 'zoo.db'}"
    monkeypatch.setenv("ZOO_DATABASE_URL", url)
    dbs._READY.clear()
    return url


def redis_db_for_worker(worker: str) -> int:
    """Redis database of a test session: 9 alone, 10 + N for pytest-xdist's worker gwN, so no two workers of a
    run share one (each clears its own, and tests flush it) and none is 0, a developer's default."""
    if not worker:
        return 9
    index = int(worker.removeprefix("gw"))
    if index > 5:
        pytest.fail(f"xdist worker {worker}: Redis has databases 10-15 for at most 6 workers")
    return 10 + index


@pytest.fixture(scope="session")
def redis_url():
    need_service("Redis", REDIS_HOST, REDIS_PORT)
    db = redis_db_for_worker(os.environ.get("PYTEST_XDIST_WORKER", ""))
    url = f"redis://{REDIS_HOST}:{REDIS_PORT}/{db}"
    import redis

    redis.Redis.from_url(url).flushdb()
    yield url
    redis.Redis.from_url(url).flushdb()


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a `zoo` subprocess: offline, the repo importable, test plugins reachable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "HF_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["HF_HUB_OFFLINE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    if "ZOO_REFERENCE_CACHE" in os.environ:  # the session's private reference cache (below)
        env["ZOO_REFERENCE_CACHE"] = os.environ["ZOO_REFERENCE_CACHE"]
    env.update(extra)
    return env


def run_zoo(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "zoo.cli", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def zoo(tmp_path):
    """Run the CLI in a subprocess against a private SQLite DB: zoo(args, **env) -> CompletedProcess."""

    def _run(args: list[str], timeout: float = 300, **extra: str) -> subprocess.CompletedProcess:
        env = child_env(**{"ZOO_DATABASE_URL": f"sqlite:///{tmp_path / 'zoo.db'}", **extra})
        return run_zoo(args, env, tmp_path, timeout)

    _run.db_url = f"sqlite:///{tmp_path / 'zoo.db'}"  # type: ignore[attr-defined]
    _run.cwd = tmp_path  # type: ignore[attr-defined]
    return _run


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def seed_database(tmp: Path, models: int, weeks: int) -> tuple[dict[str, str], str]:
    """`zoo seed --models N --weeks W` into a fresh SQLite database under ``tmp``: the environment that
    points at it (rate limit off, for browser tests) and what the seed printed."""
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp / 'zoo.db'}", ZOO_RATE_LIMIT="0")
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "seed", "--models", str(models), "--weeks", str(weeks)],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return env, proc.stdout


@contextlib.contextmanager
def serving(env: dict[str, str], cwd: Path):
    """`zoo serve` as users run it, on a free port; yields its base URL once /healthz answers."""
    import httpx

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli", "serve", "--port", str(port)],
        env=env,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(120):
            try:
                if httpx.get(f"{base}/api/v1/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        else:
            pytest.fail("zoo serve did not come up")
        yield base
    finally:
        server.terminate()
        server.wait(10)


CHROMIUM = "/usr/bin/chromium"  # Debian's chromium, driven by Playwright (browser downloads fail here)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="session")
def snapshot_hub():
    """The Hub stand-in over the shared snapshot (synthetic repos plus recorded files), one a session."""
    from tests.hub_standin import start_standin

    base, stop = start_standin(str(SNAPSHOT_CSV))
    yield base
    stop()


def validate_through(zoo, hub: str, tmp_path: Path, model_id: str) -> dict:
    """`zoo validate MODEL --backend cpu --json` as users run it, against the stand-in at ``hub``."""
    proc = zoo(
        ["validate", model_id, "--backend", "cpu", "--json"],
        HF_ENDPOINT=hub,
        HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(tmp_path / "hf"),
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: a verdict other than pass
    return json.loads(proc.stdout)


def fresh_python(code: str, timeout: float = 60) -> str:
    """Run ``code`` in a fresh interpreter at the repo root (what a module imports on its own);
    returns its stdout, failing the test with its stderr if it exits non-zero."""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout
