"""Real backends side by side: the Hub snapshot at tier tiny on several backends, into one database.

    python -m benchmarks.backends [--plan cpu+inductor:100x2,cpu+openvino:1000,cpu+openvino@fp32:100]
                                  [--db sqlite:///.bench/backends.db] [--jobs 2] [--out FILE]
    python -m benchmarks.backends --report-only --db sqlite:///.bench/backends.db --out benchmarks/backends_latest.txt

Runs the real path (Hub client against the local stand-in of the Hub API over
``data/hub-top1000-2025-03.csv`` → policy → fingerprint dedup → one model process each → the
database). ``--plan`` lists the runs in order: ``BACKEND[@PRECISION][:TOP][xPASSES]``; a second
pass re-validates the same slice with the compile cache (``ZOO_COMPILE_CACHE``; default: a fresh one in the
work directory, so the first pass starts cold) and the
reference cache warm, and fingerprint dedup does the same work as in the first pass. The wall
times go beside the database (``<db>.walls.json``), so runs from several venvs (torch-xla pins
its own torch: run ``--plan xla:1000`` from ``.venv-xla``) add up in one database and one report.
Prints per run: functional, strict and harness coverage by count and download-weighted with their
denominators, status counts, the fallback ops that would unlock the most downloads, the largest
failure clusters, and the wall times. Each section names the top-N slice its numbers cover.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from benchmarks.precision import machine

log = logging.getLogger("benchmarks.backends")
ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_CSV = ROOT / "data" / "hub-top1000-2025-03.csv"  # the Hub snapshot kept in the repository (data/README.md)


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "n/a"


def run_backend(ids: list[str], backend: str, precision: str, jobs: int, timeout: float) -> dict:
    """One pass over ``ids``: its wall time, the load average at its start, and how the compile
    cache answered its model processes (``details.compile_cache`` counted over the pass's rows)."""
    from sqlalchemy import select

    from db import queries, repository
    from db.models import Result
    from db.session import session_scope
    from zoo import jobs as zjobs

    with session_scope() as s:
        snap = queries.latest_snapshot(s)
        run_id = repository.start_run(
            s, backend, "tiny", "inprocess", len(ids), snap.id if snap else None, precision=precision
        ).id
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    zjobs.run_inprocess(ids, backend, "tiny", run_id, timeout, jobs=jobs, precision=precision)
    wall = time.perf_counter() - t0
    with session_scope() as s:
        repository.finish_run(s, run_id)
        caches = Counter(
            str((details or {}).get("compile_cache") or "not reported")
            for details in s.scalars(select(Result.details).where(Result.run_id == run_id))
        )
    return {"wall_s": round(wall, 1), "load": round(load, 2), "compile_cache": dict(sorted(caches.items()))}


def _judged_precision(backend: str, requested: str | None) -> str:
    from zoo_runner.backends import BackendSpec
    from zoo_runner.precision import resolve

    return resolve(requested, BackendSpec.parse(backend))[0]


def section(backend: str, requested: str, run: dict) -> list[str]:
    """One backend's lines; ``run`` is its entry in the walls file (slice, wall times, judged precision)."""
    from db import queries

    precision = run["precision"]
    from db.session import session_scope

    with session_scope() as s:
        cov = queries.coverage(s, backend=backend, tier="tiny", precision=precision).to_dict()
        gaps = queries.op_gaps(s, backend=backend, tier="tiny", limit=10, precision=precision)
        fails = queries.failure_clusters(s, backend=backend, tier="tiny", limit=5, precision=precision)
    how = "its declared precision" if requested == "declared" else f"--precision {requested}"
    out = [
        f"== {backend} at {precision} ({how}), top {run['top']} "
        f"models, {run.get('jobs', '?')} jobs; {run.get('machine', '')}"
    ]
    walls = run["walls_s"]
    passes = run.get("passes") or [{} for _ in walls]  # older walls files kept the times only
    for i, (wall, p) in enumerate(zip(walls, passes)):
        name = "first run (cold caches)" if i == 0 else "second run (warm caches)" if i == 1 else f"run {i + 1}"
        line = f"  wall: {name} {wall:.0f}s"
        if i:
            line += f", {walls[0] / max(wall, 1e-9):.1f}x faster than the first"
        if "load" in p:
            line += f"; load {p['load']:.2f} at its start"
        if p.get("compile_cache"):
            line += "; compile cache: " + ", ".join(f"{k} {v}" for k, v in p["compile_cache"].items())
        out.append(line)
    if run.get("timeout_s"):
        out.append(f"  time budget per model process: {run['timeout_s']:.0f}s")
    rows = (
        ("functional", "passing", "valid_reference", cov["functional"], cov["functional_weighted"]),
        ("strict", "strict", "valid_reference", cov["strict_rate"], cov["strict_weighted"]),
        ("harness", "valid_reference", "attempted", cov["harness"], cov["harness_weighted"]),
    )
    for name, num, den, by_count, by_dl in rows:
        out.append(
            f"  {name:<10} by count {_pct(by_count)} ({cov[num]}/{cov[den]}), by downloads "
            f"{_pct(by_dl)} ({cov[num + '_downloads']:,}/{cov[den + '_downloads']:,})"
        )
    out.append("  statuses: " + ", ".join(f"{k} {v}" for k, v in sorted((cov.get("status_counts") or {}).items()) if v))
    items = gaps.get("items") or []
    if items:
        out.append("  fallback ops by the downloads they would unlock:")
        out += [
            f"    {g['op']}: unlocks {g['unlocked_models']} models / {g['unlocked_downloads']:,} downloads alone; "
            f"falls back in {g['affected_models']} models / {g['affected_downloads']:,} downloads"
            for g in items[:10]
        ]
    clusters = fails.get("items") or []
    if clusters:
        out.append("  largest failure clusters:")
        for c in clusters[:5]:
            example = (c.get("example_models") or [{}])[0].get("model_id")
            flag = f" --precision {requested}" if requested != "declared" else ""
            out.append(f"    {c['models']} models, {c['downloads']:,} downloads: {str(c['signature'])[:140]}")
            if example:
                out.append(f"      repro: zoo validate {example} --backend {backend} --tier tiny{flag}")
    return out


def _walls_file(db_url: str) -> Path:
    return (
        Path(db_url.split("///", 1)[-1] + ".walls.json")
        if db_url.startswith("sqlite")
        else ROOT / ".bench" / "walls.json"
    )


def _standin(args: argparse.Namespace, work: Path) -> Callable[[], None]:
    """The local stand-in of the Hub API over the snapshot; the environment points the real client at it."""
    from tests.hub_standin import start_standin

    base, stop = start_standin(args.csv)
    os.environ.update(HF_ENDPOINT=base, HF_HUB_OFFLINE="0", HF_HUB_CACHE=str(work / "hf"), ZOO_DATABASE_URL=args.db)
    os.environ.setdefault("ZOO_REFERENCE_CACHE", str(work / "references"))
    # the first pass starts cold: not the machine's default compile cache, which earlier runs warmed
    os.environ.setdefault("ZOO_COMPILE_CACHE", str(work / "compile"))
    import huggingface_hub.constants as c

    c.ENDPOINT, c.HF_HUB_OFFLINE, c.HF_HUB_CACHE = base, False, str(work / "hf")
    c.HUGGINGFACE_CO_URL_TEMPLATE = base + "/{repo_id}/resolve/{revision}/{filename}"
    return stop


def _plan(text: str) -> list[tuple[str, str | None, int, int]]:
    """``cpu+openvino:1000,cpu+inductor:100x2,cpu+openvino@fp32:100`` -> (backend, precision, top, passes)."""
    out = []
    for item in filter(None, (t.strip() for t in text.split(","))):
        m = re.fullmatch(r"([^:@]+)(?:@(\w+))?(?::(\d+))?(?:x(\d+))?", item)
        if not m:
            raise SystemExit(f"benchmarks.backends: cannot read {item!r} (BACKEND[@PRECISION][:TOP][xPASSES])")
        out.append((m[1], m[2], int(m[3] or 100), int(m[4] or 1)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", default=str(SNAPSHOT_CSV))
    p.add_argument(
        "--plan",
        default="cpu+inductor:100x2,cpu+openvino:100,cpu+openvino@fp32:100,cpu+onnxrt:100",
        help="runs, in order: BACKEND[@PRECISION][:TOP][xPASSES], comma-separated (default %(default)s)",
    )
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument(
        "--db",
        default=None,
        help="database URL; an existing one keeps its runs, so backends from several venvs "
        "(xla needs its own) can go into one database (default: a fresh SQLite file in a temp dir)",
    )
    p.add_argument("--report-only", action="store_true", help="run nothing: print the report of what --db holds")
    p.add_argument("--out", help="also write the report here")
    args = p.parse_args(argv)

    work = Path(os.environ.get("ZOO_BENCH_WORK") or tempfile.mkdtemp(prefix="zoo-backends-"))
    work.mkdir(parents=True, exist_ok=True)
    args.db = args.db or f"sqlite:///{work / 'zoo.db'}"
    walls_path = _walls_file(args.db)
    walls: dict[str, dict] = json.loads(walls_path.read_text()) if walls_path.exists() else {}
    mine: dict[str, dict] = {}  # the runs this invocation made
    stop = _standin(args, work)
    try:
        from services import catalog
        from zoo import jobs as zjobs

        if not args.report_only:
            from db import queries
            from db.session import session_scope

            with session_scope() as s:
                have = queries.latest_snapshot(s) is not None
            if not have:
                catalog.sync(catalog.from_file(args.csv), f"file:{Path(args.csv).name}")
            for backend, precision, top, passes in _plan(args.plan):
                try:
                    backend = zjobs.resolve_backend(backend)
                except Exception as exc:  # a backend this machine (or venv) lacks is said, not fatal
                    log.warning("%s: not run here: %s", backend, exc)
                    continue
                _, ids = zjobs.pick_models(top)
                runs = [run_backend(ids, backend, precision or "auto", args.jobs, args.timeout) for _ in range(passes)]
                judged = _judged_precision(backend, precision)
                mine[f"{backend}@{precision or 'declared'}"] = {
                    "top": len(ids),
                    "walls_s": [r["wall_s"] for r in runs],
                    "passes": runs,
                    "timeout_s": args.timeout,
                    "jobs": args.jobs,
                    "precision": judged,
                    "machine": machine(),
                }
                # another venv's run may have written its own since this one started: keep them
                walls = {**(json.loads(walls_path.read_text()) if walls_path.exists() else {}), **mine}
                walls_path.write_text(json.dumps(walls, indent=1))
        header = [
            f"Backends benchmark — tier tiny, {Path(args.csv).name}; each section names the top-N slice it covers",
            machine(),
            "",
        ]
        body: list[str] = []
        for key, w in walls.items():
            backend, _, precision = key.partition("@")
            body += section(backend, precision, w) + [""]
    finally:
        stop()
    text = "\n".join(header + body)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
