"""Fleet benchmark: enqueue throughput into Redis, catalog ingest time, and the dedup factor.

    python -m benchmarks.fleet [--tasks 100000] [--entries 100000] [--out benchmarks/fleet_latest.txt]

1. **Enqueue**: ``--tasks`` validation tasks published to the local Redis (a dedicated database,
   ``--redis-db``, refused if not empty, flushed afterwards) through ``workers.publish.enqueue_groups``
   (the path of ``zoo run`` and the sweeps: pipelined LPUSH of Celery's own messages), and, for
   comparison, a sample through Celery's ``apply_async`` one by one.
2. **Ingest**: a catalog CSV of ``--entries`` models synthesized from the shared snapshot's
   distribution (downloads: the snapshot's own rank/downloads power law, fitted and extended to
   rank N; tasks, tags, libraries and sizes drawn from its rows), stored twice through
   ``zoo sync --from-file``'s code path (two dated snapshots: insert, then update) into a fresh
   PostgreSQL database (``--database-url``; default a temporary one on 127.0.0.1, dropped after).
3. **Dedup factor**: the shared snapshot's models prepared through a local Hub stand-in and
   planned (fingerprint, no model run): models with a plan / distinct fingerprints.
"""

from __future__ import annotations

import argparse
import csv
import math
import os
import platform
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_CSV = ROOT / "data" / "hub-top1000-2025-03.csv"  # the Hub snapshot kept in the repository (data/README.md)
PG_ADMIN = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


# ---------------------------------------------------------------- 1. enqueue


def bench_enqueue(n: int, redis_db: int, sample: int) -> list[str]:
    import redis

    url = f"redis://127.0.0.1:6379/{redis_db}"
    r = redis.Redis.from_url(url)
    if r.dbsize():
        raise SystemExit(f"fleet benchmark: redis db {redis_db} is not empty; pick another with --redis-db")
    os.environ["ZOO_BROKER_URL"] = url
    from services.planning import Candidate, Group
    from workers.celery_app import app
    from workers.publish import enqueue_groups
    from workers.tasks import validate_task

    lines = []
    try:
        groups = [Group(Candidate(model_id=f"org{i % 997}/model-{i}", downloads=0, weight=0.0)) for i in range(n)]
        enqueue_groups(groups[:10], "cpu", "tiny", None)  # connect, declare (no run: publishing alone is measured)
        r.delete("cpu")
        t0 = time.perf_counter()
        ids = enqueue_groups(groups, "cpu", "tiny", None)
        dt_fast = time.perf_counter() - t0
        depth = r.llen("cpu")
        assert depth == n == len(set(ids)), (depth, n, len(set(ids)))
        mem = r.info("memory").get("used_memory_human")
        r.delete("cpu")
        lines.append(
            f"enqueue: {n:,} tasks in {dt_fast:.2f} s = {n / dt_fast:,.0f} tasks/s "
            f"(pipelined, batches of 2,000; queue depth {depth:,}, redis memory {mem})"
        )

        with app.producer_or_acquire() as producer:
            args = [{"model_id": "org/model", "backend": "cpu", "tier": "tiny", "timeout_s": 600.0}, 1]
            t0 = time.perf_counter()
            for _ in range(sample):
                validate_task.apply_async(args=args, queue="cpu", producer=producer)
            dt_plain = time.perf_counter() - t0
        assert r.llen("cpu") == sample
        lines.append(
            f"         for comparison, Celery apply_async one by one: {sample:,} "
            f"tasks in {dt_plain:.2f} s = {sample / dt_plain:,.0f} tasks/s"
        )
    finally:
        r.flushdb()
    return lines


# ---------------------------------------------------------------- 2. ingest


def synthesize(src: Path, n: int, out: Path, seed: int = 0) -> tuple[float, float]:
    """Write ``n`` catalog rows drawn from ``src``'s distribution; returns the fitted power law
    (a, b) of downloads = a * rank^-b."""
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    pts = [
        (math.log(i + 1), math.log(max(1, int(float(r["downloads"])))))
        for i, r in enumerate(sorted(rows, key=lambda r: -int(float(r["downloads"]))))
    ]
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    a, b = math.exp(my - slope * mx), -slope
    rng = random.Random(seed)
    cols = list(rows[0].keys())
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        for rank in range(1, n + 1):
            proto = rng.choice(rows)
            row = dict(proto)
            org, name = proto["model_id"].split("/", 1) if "/" in proto["model_id"] else ("org", proto["model_id"])
            row["model_id"] = f"{org}/{name}-s{rank}"
            row["downloads"] = str(max(1, int(a * rank ** (-b) * rng.uniform(0.8, 1.25))))
            w.writerow(row)
    return a, b


def bench_ingest(n: int, database_url: str | None) -> list[str]:
    from sqlalchemy import create_engine, text

    own_db = None
    if not database_url:
        own_db = f"zoo_fleet_bench_{uuid.uuid4().hex[:8]}"
        admin = create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as c:
            c.execute(text(f'CREATE DATABASE "{own_db}"'))
        database_url = PG_ADMIN.rsplit("/", 1)[0] + f"/{own_db}"
    os.environ["ZOO_DATABASE_URL"] = database_url
    lines = []
    try:
        from db.session import get_engine, session_scope, upgrade

        upgrade(database_url)
        from services import catalog

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "catalog-100k.csv"
            t0 = time.perf_counter()
            a, b = synthesize(SNAPSHOT_CSV, n, path)
            lines.append(
                f"ingest: synthesized {n:,} entries in {time.perf_counter() - t0:.1f} s "
                f"({path.stat().st_size / 1e6:.0f} MB CSV; downloads = "
                f"{a:.3g} x rank^-{b:.3f}, fitted on the shared top 1,000)"
            )
            times = []
            for label in ("first sync (insert)", "second sync (update)"):
                t0 = time.perf_counter()
                snap, stored = catalog.sync(catalog.from_file(str(path)), f"file:{path}")
                times.append(time.perf_counter() - t0)
                lines.append(
                    f"        {label}: {stored:,} models in {times[-1]:.1f} s = {stored / times[-1]:,.0f} entries/s"
                )
        with session_scope() as s:
            n_models = s.execute(text("SELECT count(*) FROM models")).scalar()
            n_snaps = s.execute(text("SELECT count(*) FROM snapshots")).scalar()
            n_entries = s.execute(text("SELECT count(*) FROM snapshot_entries")).scalar()
        dialect = get_engine(database_url).dialect.name
        lines.append(
            f"        {dialect}: {n_models:,} models, {n_snaps} dated "
            f"snapshots, {n_entries:,} snapshot entries (downloads history)"
        )
        get_engine(database_url).dispose()
    finally:
        if own_db:
            from db.session import get_engine

            get_engine.cache_clear()
            with admin.connect() as c:
                c.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        f"WHERE datname = '{own_db}' AND pid <> pg_backend_pid()"
                    )
                )
                c.execute(text(f'DROP DATABASE IF EXISTS "{own_db}"'))
            admin.dispose()
    return lines


# ---------------------------------------------------------------- 3. dedup factor


def start_hub(csv_path: Path):
    """The Hub stand-in, and the environment pointing at it: before anything imports
    huggingface_hub, which reads the endpoint once."""
    sys.path.insert(0, str(ROOT))
    from tests.hub_standin import start_standin

    work = Path(tempfile.mkdtemp(prefix="zoo-fleet-dedup-"))
    base, stop = start_standin(str(csv_path))
    os.environ.update(
        HF_ENDPOINT=base, HF_HUB_OFFLINE="0", HF_HUB_CACHE=str(work / "hf"), HF_HOME=str(work / "hf-home")
    )
    return stop


def bench_dedup(csv_path: Path, tier: str, threads: int, stop) -> list[str]:
    from collections import Counter
    from concurrent.futures import ThreadPoolExecutor

    from services.planning import compute_plan

    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = [(r["model_id"], int(float(r["downloads"] or 0))) for r in csv.DictReader(f)]
    t0 = time.perf_counter()
    try:
        with ThreadPoolExecutor(max_workers=threads) as pool:
            plans = list(pool.map(lambda r: (r, compute_plan(r[0], "cpu", tier)), rows))
    finally:
        stop()
    elapsed = time.perf_counter() - t0
    fps = Counter()
    dl = Counter()
    refused = unplanned = 0
    for (_mid, downloads), (_sha, fp, cacheable) in plans:
        if fp:
            fps[fp] += 1
            dl[fp] += downloads
        elif cacheable:
            refused += 1
        else:
            unplanned += 1
    planned = sum(fps.values())
    lines = [
        f"dedup: {len(rows):,} models of the shared snapshot planned in "
        f"{elapsed:.0f} s ({threads} threads, {tier} tier, through the Hub stand-in)",
        f"       {planned} with a plan, {len(fps)} distinct "
        f"fingerprints: dedup factor {planned / max(1, len(fps)):.2f} "
        f"({planned - len(fps)} model runs saved per backend and "
        f"week); {refused} refused by policy, {unplanned} without a plan",
    ]
    top = [(n, fp) for fp, n in fps.most_common(5) if n > 1]
    if top:
        lines.append("       largest groups: " + ", ".join(f"{n} models" for n, _ in top))
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=100_000)
    p.add_argument(
        "--sample", type=int, default=5_000, help="tasks enqueued one by one through apply_async, for comparison"
    )
    p.add_argument("--redis-db", type=int, default=13)
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--database-url", help="where to ingest (default: a temporary PostgreSQL database on 127.0.0.1)")
    p.add_argument("--csv", default=str(SNAPSHOT_CSV))
    p.add_argument("--tier", default="tiny", choices=["census", "tiny"])
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--skip", action="append", default=[], choices=["enqueue", "ingest", "dedup"])
    p.add_argument("--out", help="also write the report here")
    args = p.parse_args(argv)
    import logging

    logging.basicConfig(level=logging.ERROR)
    os.environ.setdefault("TQDM_DISABLE", "1")
    lines = [
        f"# zoo fleet benchmark, {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}",
        f"# {platform.platform()}, python {platform.python_version()}, {os.cpu_count()} CPUs (shared)",
    ]
    stop = start_hub(Path(args.csv)) if "dedup" not in args.skip else None
    for name, fn in (
        ("enqueue", lambda: bench_enqueue(args.tasks, args.redis_db, args.sample)),
        ("ingest", lambda: bench_ingest(args.entries, args.database_url)),
        ("dedup", lambda: bench_dedup(Path(args.csv), args.tier, args.threads, stop)),
    ):
        if name in args.skip:
            continue
        for line in fn():
            print(line, flush=True)
            lines.append(line)
    if args.out:
        Path(args.out).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
