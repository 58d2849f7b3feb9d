"""Real backends side by side: the Hub snapshot at tier tiny on several backends, into one database.

    python -m benchmarks.backends [--top 100] [--backends cpu+inductor,cpu+openvino,cpu+onnxrt]
                                  [--fp32 cpu+openvino] [--db sqlite:///backends.db] [--out FILE]

Runs the real path (Hub client against the local stand-in of the Hub API over
``data/hub-top1000-2025-03.csv`` → policy → fingerprint dedup → one model process each → the
database), one backend after the other, each twice: the second run starts after the first with
the same compile cache directory (``ZOO_COMPILE_CACHE`` when set) and the reference cache warm.
``--fp32 SPEC`` adds a run of SPEC at ``--precision fp32``. Prints per backend: functional, strict
and harness coverage by count and download-weighted with their denominators, status counts, the
fallback ops that would unlock the most downloads, the largest failure clusters, and both wall
times. Every number covers the ``--top`` slice named in the header.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.precision import _machine

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_CSV = ROOT / "data" / "hub-top1000-2025-03.csv"  # the Hub snapshot kept in the repository (data/README.md)


def _pct(x: float | None) -> str:
    return f"{x:.1%}" if x is not None else "n/a"


def run_backend(ids: list[str], backend: str, precision: str, jobs: int, timeout: float) -> float:
    from zoo import jobs as zjobs
    from db import repository
    from db.session import session_scope

    with session_scope() as s:
        snap = repository.latest_snapshot(s)
        run_id = repository.start_run(s, backend, "tiny", "inprocess", len(ids), snap.id if snap else None, precision=precision).id
    t0 = time.perf_counter()
    zjobs.run_inprocess(ids, backend, "tiny", run_id, timeout, jobs=jobs, precision=precision)
    return time.perf_counter() - t0


def section(backend: str, precision: str | None, walls: tuple[float, float]) -> list[str]:
    from db import queries
    from db.session import session_scope

    with session_scope() as s:
        cov = queries.coverage(s, backend=backend, tier="tiny", precision=precision).to_dict()
        gaps = queries.op_gaps(s, backend=backend, tier="tiny", limit=10, precision=precision)
        fails = queries.failure_clusters(s, backend=backend, tier="tiny", limit=5, precision=precision)
    label = f"{backend} at {precision}" if precision else f"{backend} at its declared precision"
    out = [f"== {label}", f"wall: first run {walls[0]:.0f}s, second run (warm caches) {walls[1]:.0f}s, ratio {walls[0] / max(walls[1], 1e-9):.1f}x"]
    rows = (
        ("functional", "passing", "valid_reference", cov["functional"], cov["functional_weighted"]),
        ("strict", "strict", "valid_reference", cov["strict_rate"], cov["strict_weighted"]),
        ("harness", "valid_reference", "attempted", cov["harness"], cov["harness_weighted"]),
    )
    for name, num, den, by_count, by_dl in rows:
        out.append(f"  {name:<10} by count {_pct(by_count)} ({cov[num]}/{cov[den]}), by downloads {_pct(by_dl)} ({cov[num + '_downloads']:,}/{cov[den + '_downloads']:,})")
    out.append("  statuses: " + ", ".join(f"{k} {v}" for k, v in sorted((cov.get("status_counts") or {}).items()) if v))
    items = gaps.get("items") or []
    if items:
        out.append("  fallback ops by the downloads they would unlock:")
        out += [f"    {g['op']}: {g['unlocked_models']} models, {g['unlocked_downloads']:,} downloads" for g in items[:10]]
    clusters = fails.get("items") or []
    if clusters:
        out.append("  largest failure clusters:")
        out += [f"    {c['models']} models, {c['downloads']:,} downloads: {str(c['signature'])[:140]}" for c in clusters[:5]]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", default=str(SNAPSHOT_CSV))
    p.add_argument("--top", type=int, default=100)
    p.add_argument("--backends", default="cpu+inductor,cpu+openvino,cpu+onnxrt")
    p.add_argument("--fp32", default="cpu+openvino", help="comma-separated backends also run at --precision fp32 ('' for none)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--db", default=None, help="database URL (default: a fresh SQLite file in a temp dir)")
    p.add_argument("--out", help="also write the report here")
    args = p.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="zoo-backends-"))
    from tests.hub_standin import start_standin

    base, stop = start_standin(args.csv)
    os.environ.update(HF_ENDPOINT=base, HF_HUB_OFFLINE="0", HF_HUB_CACHE=str(work / "hf"), ZOO_DATABASE_URL=args.db or f"sqlite:///{work / 'zoo.db'}")
    os.environ.setdefault("ZOO_REFERENCE_CACHE", str(work / "references"))
    import huggingface_hub.constants as c

    c.ENDPOINT, c.HF_HUB_OFFLINE, c.HF_HUB_CACHE = base, False, str(work / "hf")
    c.HUGGINGFACE_CO_URL_TEMPLATE = base + "/{repo_id}/resolve/{revision}/{filename}"

    from zoo import catalog, jobs as zjobs

    zjobs.sync(catalog.from_file(args.csv), f"file:{Path(args.csv).name}")
    _, ids = zjobs.pick_models(args.top)
    runs = [(b, None) for b in args.backends.split(",") if b] + [(b, "fp32") for b in args.fp32.split(",") if b]
    header = [f"Backends benchmark — tier tiny, top {len(ids)} models of {Path(args.csv).name}, {args.jobs} jobs", _machine()]
    body: list[str] = []
    for backend, precision in runs:
        try:
            backend = zjobs.resolve_backend(backend)
        except Exception as exc:  # a backend this machine lacks is reported, not fatal
            body += [f"== {backend}: not run here: {exc}", ""]
            continue
        walls = tuple(run_backend(ids, backend, precision or "auto", args.jobs, args.timeout) for _ in range(2))
        body += section(backend, precision, walls) + [""]
        print("\n".join(body[-12:]), file=sys.stderr)
    stop()
    text = "\n".join(header + [""] + body)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
