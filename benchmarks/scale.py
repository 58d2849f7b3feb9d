"""Scale benchmark: N models × W weekly results in PostgreSQL, then the API under load from a
separate process, and the weekly report's generation time.

    python -m benchmarks.scale [--models 100000] [--weeks 52] [--backends neuron]
                               [--rate 200] [--duration 20] [--concurrency 8] [--workers 1]
                               [--admin-url postgresql+psycopg://postgres@127.0.0.1:5432/postgres]
                               [--url URL_OF_AN_ALREADY_SEEDED_DB] [--out benchmarks/scale_latest.txt]

Steps: create a scratch database; `zoo seed`-style bulk load (COPY); start `zoo serve` (uvicorn,
``--workers`` processes); from another process, per endpoint: one cold request (empty query
cache), then an open-loop run at ``--rate`` requests/s (latency p50/p99 at that load), then a
closed-loop run with ``--concurrency`` clients (throughput); finally `zoo report` in a fresh
process (cold caches) for the newest week. The scratch database is dropped unless --keep.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing as mp
import os
import platform
import random
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q / 100 * (len(xs) - 1))))]


MAX_IN_FLIGHT = 64


class _Conn(threading.local):
    """One keep-alive http.client connection per client thread (far lighter than an async client)."""

    def get(self, base: str, path: str) -> int:
        conn = getattr(self, "conn", None)
        if conn is None:
            host, port = base.split("//", 1)[1].split(":")
            conn = self.conn = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            r.read()
            return r.status
        except Exception:
            conn.close()
            self.conn = None
            return 0


def _open_loop(base: str, paths: list[str], rate: float, duration: float) -> dict:
    """Requests leave on schedule whatever the answers do (open loop), from a pool of
    MAX_IN_FLIGHT client threads: a request due while all are busy is dropped and counted."""
    lat: list[float] = []
    errors = dropped = 0
    busy = 0
    lock = threading.Lock()
    conns = _Conn()

    def one(path: str) -> None:
        nonlocal errors, busy
        t = time.perf_counter()
        ok = conns.get(base, path) == 200
        with lock:
            lat.append(time.perf_counter() - t)
            errors += not ok
            busy -= 1

    start = time.perf_counter()
    with ThreadPoolExecutor(MAX_IN_FLIGHT) as ex:
        for i in range(int(rate * duration)):
            delay = start + i / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            with lock:
                if busy >= MAX_IN_FLIGHT:
                    dropped += 1
                    continue
                busy += 1
            ex.submit(one, paths[i % len(paths)])
    wall = time.perf_counter() - start
    return {
        "n": len(lat),
        "errors": errors,
        "dropped": dropped,
        "wall_s": wall,
        "rps": (len(lat) - errors) / wall,
        "p50_ms": 1000 * pct(lat, 50),
        "p99_ms": 1000 * pct(lat, 99),
        "max_ms": 1000 * max(lat) if lat else float("nan"),
    }


def _closed_loop(base: str, paths: list[str], concurrency: int, duration: float) -> dict:
    """``concurrency`` client threads, each sending its next request as soon as the last answered."""
    lat: list[float] = []
    errors = 0
    lock = threading.Lock()
    conns = _Conn()
    stop = time.perf_counter() + duration

    def worker(k: int) -> None:
        nonlocal errors
        i = k
        while time.perf_counter() < stop:
            t = time.perf_counter()
            ok = conns.get(base, paths[i % len(paths)]) == 200
            with lock:
                lat.append(time.perf_counter() - t)
                errors += not ok
            i += concurrency

    start = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    return {
        "n": len(lat),
        "errors": errors,
        "wall_s": wall,
        "rps": (len(lat) - errors) / wall,
        "p50_ms": 1000 * pct(lat, 50),
        "p99_ms": 1000 * pct(lat, 99),
        "max_ms": 1000 * max(lat) if lat else float("nan"),
    }


def load_process(
    base: str, plan: list[tuple[str, list[str]]], rate: float, duration: float, concurrency: int, out: mp.Queue
) -> None:
    """Runs in its own process: cold request, open loop at ``rate``, closed loop, per endpoint."""
    import httpx

    results = {}
    for name, paths in plan:
        t = time.perf_counter()
        r = httpx.get(base + paths[0], timeout=600)
        cold = 1000 * (time.perf_counter() - t)
        assert r.status_code == 200, (paths[0], r.status_code, r.text[:300])
        _closed_loop(base, paths, 4, 3.0)  # warm every worker process (each has its own cache), not measured
        results[name] = {
            "cold_ms": cold,
            "open": _open_loop(base, paths, rate, duration),
            "closed": _closed_loop(base, paths, concurrency, duration),
        }
    out.put(results)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=int, default=100_000)
    p.add_argument("--weeks", type=int, default=52)
    p.add_argument("--backends", default="neuron")
    p.add_argument("--rate", type=float, default=200.0, help="open-loop request rate per endpoint (default 200/s)")
    p.add_argument("--duration", type=float, default=20.0, help="seconds per run (default 20)")
    p.add_argument("--concurrency", type=int, default=8, help="closed-loop clients (default 8)")
    p.add_argument("--workers", type=int, default=1, help="uvicorn worker processes (default 1, as `zoo serve`)")
    p.add_argument(
        "--admin-url",
        default=os.environ.get("ZOO_BENCH_PG_ADMIN", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"),
    )
    p.add_argument("--url", help="use this already seeded database (skips creating and seeding)")
    p.add_argument("--keep", action="store_true", help="keep the scratch database")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "scale_latest.txt"))
    p.add_argument(
        "--skip-report",
        action="store_true",
        help="do not time the weekly report (e.g. when re-measuring the API on --url)",
    )
    a = p.parse_args(argv)

    from sqlalchemy import create_engine, text

    lines: list[str] = []

    def say(s: str = "") -> None:
        print(s, flush=True)
        lines.append(s)

    say(f"# Zoo scale benchmark — {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
    say(
        f"host: {platform.node()} · {os.cpu_count()} CPUs · Python "
        f"{platform.python_version()} · load {os.getloadavg()[0]:.1f} at start"
    )
    say(
        f"data: {a.models:,} models × {a.weeks} weeks × {len(a.backends.split(','))} backend(s) "
        f"({a.backends}) = {a.models * a.weeks * len(a.backends.split(',')):,} results"
    )
    admin = None
    db_name = None
    url = a.url
    if url is None:
        db_name = f"zoo_scale_{uuid.uuid4().hex[:8]}"
        admin = create_engine(a.admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{db_name}"'))
        url = a.admin_url.rsplit("/", 1)[0] + f"/{db_name}"
    os.environ["ZOO_DATABASE_URL"] = url
    env = {
        **os.environ,
        "ZOO_DATABASE_URL": url,
        "ZOO_RATE_LIMIT": "0",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    server = None
    try:
        if a.url is None:
            from tqdm import tqdm

            from db.seed import seed

            t = time.perf_counter()
            total = a.models * a.weeks * len(a.backends.split(","))
            with tqdm(total=total, unit="result", desc="seeding", file=sys.stderr) as bar:
                n = seed(models=a.models, weeks=a.weeks, backends=a.backends.split(","), progress=bar.update)
            seed_s = time.perf_counter() - t
            say(
                f"seed (COPY, with indexes, then VACUUM ANALYZE): {n:,} "
                f"results in {seed_s:.0f} s ({n / seed_s:,.0f} results/s)"
            )
        eng = create_engine(
            url.replace("postgresql://", "postgresql+psycopg://") if url.startswith("postgresql://") else url
        )
        with eng.connect() as c:
            size = c.execute(text("SELECT pg_size_pretty(pg_database_size(current_database()))")).scalar()
            week = c.execute(text("SELECT max(week) FROM results")).scalar()
        eng.dispose()
        say(f"database size: {size} · newest week {week}")

        if not a.skip_report:
            t = time.perf_counter()
            rep = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "zoo.cli",
                    "report",
                    "--format",
                    "md",
                    "--week",
                    week,
                    "--backend",
                    a.backends.split(",")[0],
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            report_s = time.perf_counter() - t
            assert rep.returncode == 0, rep.stderr[-2000:]
            say(
                "weekly report (`zoo report --format md`, fresh process, "
                f"cold caches, {len(rep.stdout):,} chars): {report_s:.1f} s"
            )
            t = time.perf_counter()
            rep = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    f"from dashboards.report import store_weekly_report; store_weekly_report({week!r})",
                ],
                env=env,
                capture_output=True,
                text=True,
                timeout=900,
            )
            assert rep.returncode == 0, rep.stderr[-2000:]
            say(
                "weekly report stored for every backend of the week (Celery "
                f"beat's task, fresh process): {time.perf_counter() - t:.1f} s"
            )

        port = 18000 + random.randint(0, 999)
        base = f"http://127.0.0.1:{port}"
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "api.app:create_app",
                "--factory",
                "--port",
                str(port),
                "--workers",
                str(a.workers),
                "--log-level",
                "warning",
                "--no-access-log",
            ],
            env=env,
            cwd=ROOT,
        )
        import httpx

        for _ in range(240):
            try:
                if httpx.get(f"{base}/api/v1/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        rng = random.Random(1)
        ids = [f"seed-org-{i % 97}/model-{i:06d}" for i in (rng.randrange(a.models) for _ in range(5000))]
        b0 = a.backends.split(",")[0]
        plan = [
            ("/healthz (baseline: server + client overhead, one DB round trip)", ["/api/v1/healthz"]),
            ("/models/{id}", [f"/api/v1/models/{m}" for m in ids]),
            ("/coverage", [f"/api/v1/coverage?backend={b0}&tier=tiny&week={week}"]),
            ("/ops/gaps", [f"/api/v1/ops/gaps?backend={b0}&tier=tiny&week={week}"]),
        ]
        q: mp.Queue = mp.get_context("spawn").Queue()
        proc = mp.get_context("spawn").Process(
            target=load_process, args=(base, plan, a.rate, a.duration, a.concurrency, q)
        )
        proc.start()
        res = q.get()
        proc.join()
        say()
        say(
            f"API: uvicorn × {a.workers} worker(s), load from a separate process; open loop at {a.rate:.0f} "
            f"req/s for {a.duration:.0f} s, closed loop with {a.concurrency} clients for {a.duration:.0f} s"
        )
        say(
            "(cold: first request after start, empty query cache; then 3 s of unmeasured warm-up; /coverage "
            "and /ops/gaps are then served from each worker's query cache, keyed by the data version)"
        )
        say()
        say(
            "| endpoint | cold ms | open loop: ok req/s | p50 ms | p99 ms | errors | dropped "
            f"(>{MAX_IN_FLIGHT} in flight) | closed loop: ok req/s | p50 ms | p99 ms | errors |"
        )
        say("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, r in res.items():
            o, c = r["open"], r["closed"]
            say(
                f"| {name} | {r['cold_ms']:.0f} | {o['rps']:.0f} | {o['p50_ms']:.1f} "
                f"| {o['p99_ms']:.1f} | {o['errors']} | {o['dropped']} | {c['rps']:.0f} "
                f"| {c['p50_ms']:.1f} | {c['p99_ms']:.1f} | {c['errors']} |"
            )
        say()
        say(
            f"load average at the end: {os.getloadavg()[0]:.1f} (2-core "
            "machine shared with other jobs: numbers are pessimistic)"
        )
    finally:
        if server is not None:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
        if admin is not None and not a.keep:
            from db.session import get_engine

            get_engine.cache_clear()
            with admin.connect() as c:
                c.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{db_name}' AND pid <> pg_backend_pid()"
                    )
                )
                c.execute(text(f'DROP DATABASE IF EXISTS "{db_name}"'))
        elif db_name:
            say(f"kept database {url}")
    Path(a.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
