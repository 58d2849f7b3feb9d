"""Harness benchmark: validate the shared snapshot through a local Hub stand-in and print
valid-reference coverage by library (count and download-weighted), time per model, the dedup
factor and the slowest builders.

    python -m benchmarks.harness --tier tiny --backend cpu [--top N] [--jobs 2] [--out FILE]

Runs the real path (Hub client → policy → plan/fingerprint dedup → model process → SQLite).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from tqdm import tqdm

from benchmarks.precision import machine, packages
from zoo_runner.statuses import NO_VALID_REFERENCE, Reason, Status

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_CSV = ROOT / "data" / "hub-top1000-2025-03.csv"  # the Hub snapshot kept in the repository (data/README.md)
# repos with no PyTorch model at all: ONNX/MLX-only files, or a library whose models are not PyTorch
# (ctranslate2, Core ML, ...): counted in every row's denominator, grouped under this name
NOT_PYTORCH = "not PyTorch"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", default=str(SNAPSHOT_CSV))
    p.add_argument("--tier", default="tiny", choices=["census", "tiny"])
    p.add_argument("--backend", default="cpu")
    p.add_argument("--top", type=int, default=None)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--out", help="also write the report here")
    p.add_argument(
        "--reference-cache",
        default="off",
        metavar="DIR",
        help="reuse CPU references from DIR (default off: every reference is computed, so times are real)",
    )
    args = p.parse_args(argv)
    args.machine = machine()  # cores, CPU and the load as the run starts: every time below is this machine's
    os.environ["ZOO_REFERENCE_CACHE"] = args.reference_cache

    work = Path(tempfile.mkdtemp(prefix="zoo-harness-"))
    from tests.hub_standin import start_standin

    base, stop = start_standin(args.csv)
    os.environ.update(
        HF_ENDPOINT=base,
        HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(work / "hf"),
        ZOO_DATABASE_URL=f"sqlite:///{work / 'zoo.db'}",
    )
    import huggingface_hub.constants as c

    c.ENDPOINT, c.HF_HUB_OFFLINE, c.HF_HUB_CACHE = base, False, str(work / "hf")
    c.HUGGINGFACE_CO_URL_TEMPLATE = base + "/{repo_id}/resolve/{revision}/{filename}"

    from services import catalog
    from services.validation import validate_and_store
    from zoo_runner.exceptions import ZooError
    from zoo_runner.request import ValidationRequest, share_of_cores
    from zoo_runner.result import failure_result

    entries = list(catalog.from_file(args.csv))[: args.top]
    rows = []
    t_start = time.perf_counter()

    def one(e):
        req = ValidationRequest(
            e.model_id,
            backend=args.backend,
            tier=args.tier,
            timeout_s=args.timeout,
            library=None,
            threads=share_of_cores(args.jobs),
        )
        t0 = time.perf_counter()
        try:
            r = validate_and_store(req).to_dict()
        except ZooError as exc:  # an unknown model, an unreachable Hub: Zoo's, a reference_error row
            r = failure_result(req, exc).to_dict()
        return e, r, time.perf_counter() - t0

    with (
        ThreadPoolExecutor(args.jobs) as pool,
        tqdm(total=len(entries), desc=f"harness {args.tier}/{args.backend}", file=sys.stderr) as bar,
    ):
        for fut in as_completed([pool.submit(one, e) for e in entries]):
            rows.append(fut.result())
            bar.update(1)
    wall = time.perf_counter() - t_start
    stop()
    report = render(rows, wall, args)
    print(report)
    if args.out:
        Path(args.out).write_text(report)
    return 0


def _lib(e, r) -> str:
    if r.get("reason") == Reason.NO_PYTORCH_WEIGHTS:  # decided from the repo's files, whatever its tags
        return NOT_PYTORCH
    if e.library:  # the library the snapshot's tags name
        return e.library
    # no library tag: the library Zoo recognised from the repo's config, where it has a builder for it
    from zoo_runner.builders import registered_libraries

    if r.get("library") in registered_libraries() and r.get("reason") != Reason.LIBRARY_UNSUPPORTED:
        return f"{r['library']} (from its config)"
    return "other"


def render(rows, wall: float, args) -> str:
    by_lib = collections.defaultdict(lambda: [0, 0, 0, 0])  # attempted, valid, dl attempted, dl valid
    statuses = collections.Counter()
    reasons = collections.Counter()
    errors = collections.Counter()
    left = collections.defaultdict(lambda: [0, 0])  # (library, reason or status) -> models, downloads
    ran, deduped, durations, slow = 0, 0, [], []
    for e, r, dt in rows:
        statuses[r["status"]] += 1
        if r.get("reason"):
            reasons[r["reason"]] += 1
        valid = r["status"] not in NO_VALID_REFERENCE
        if not valid and r["status"] == Status.REFERENCE_ERROR:
            errors[((r.get("error") or {}).get("message") or "")[:90]] += 1
        lib = _lib(e, r)
        tagged_transformers = (
            e.library in ("transformers", "sentence-transformers") and lib != NOT_PYTORCH and not e.custom_code
        )
        if not valid:  # what is left, by library and why
            left[(lib, r.get("reason") or r["status"])][0] += 1
            left[(lib, r.get("reason") or r["status"])][1] += e.downloads
        for key in (
            ["(every row)", lib]
            + ([f"(all but {NOT_PYTORCH})"] if lib != NOT_PYTORCH else [])
            + (["transformers+ST, no custom_code"] if tagged_transformers else [])
        ):
            b = by_lib[key]
            b[0] += 1
            b[2] += e.downloads
            if valid:
                b[1] += 1
                b[3] += e.downloads
        if (r.get("details") or {}).get("deduplicated_from"):
            deduped += 1
        elif r["status"] != Status.UNSUPPORTED:
            ran += 1
            durations.append(dt)
            slow.append((dt, e.model_id, r.get("architecture")))
    n = len(rows)
    out = [
        f"Harness benchmark — tier {args.tier}, backend {args.backend}, {n} "
        f"models from {Path(args.csv).name}, {args.jobs} jobs, wall {wall:.0f}s",
        getattr(args, "machine", machine()),
        packages(),
        "",
    ]
    out.append(f"{'library':<34} {'models':>6} {'valid ref':>9} {'by count':>9} {'by downloads':>13}")
    for lib, (a, v, da, dv) in sorted(by_lib.items(), key=lambda kv: -kv[1][2]):
        out.append(f"{lib:<34} {a:>6} {v:>9} {100 * v / a if a else 0:>8.1f}% {100 * dv / da if da else 0:>12.1f}%")
    every = sum(e.downloads for e, _, _ in rows) or 1
    out += ["", "left without a valid reference, by library and reason (models, downloads, share of every row's):"]
    for (lib, why), (m, dl) in sorted(left.items(), key=lambda kv: -kv[1][1]):
        out.append(f"  {lib:<34} {why:<22} {m:>4} {dl:>14,} {100 * dl / every:6.2f}%")
    out += [
        "",
        "statuses: " + ", ".join(f"{k} {v}" for k, v in statuses.most_common()),
        "unsupported reasons: " + ", ".join(f"{k} {v}" for k, v in reasons.most_common()),
    ]
    if durations:
        out.append(
            f"time per model process: median {statistics.median(durations):.1f}s, mean "
            f"{statistics.mean(durations):.1f}s, max {max(durations):.1f}s; "
            f"wall per catalog model {wall / max(n, 1):.2f}s"
        )
    out.append(
        f"dedup: {ran} model processes for {ran + deduped} validated "
        f"models (factor {(ran + deduped) / max(ran, 1):.2f})"
    )
    out += breakdown(rows)
    out += ["", "slowest builders:"] + [
        f"  {dt:6.1f}s {mid} ({arch})" for dt, mid, arch in sorted(slow, reverse=True)[:8]
    ]
    if errors:
        out += ["", "top reference errors (Zoo's gaps):"] + [f"  {v:3d} × {k}" for k, v in errors.most_common(12)]
    return "\n".join(out) + "\n"


def breakdown(rows) -> list[str]:
    """Where the time of the model processes that ran goes, summed over them: the parent's part
    (Hub files, policy, plan, dedup, storing the row), starting the model process (fork or spawn,
    the sandbox, imports), and each stage the engine timed in it (``details.stage_s``)."""
    parts: collections.Counter[str] = collections.Counter()
    for _e, r, dt in rows:
        details = r.get("details") or {}
        stages = details.get("stage_s")
        if details.get("deduplicated_from") or not isinstance(stages, dict) or r.get("duration_s") is None:
            continue
        in_child = sum(float(v) for v in stages.values())
        parts["parent: prepare, dedup, store"] += max(0.0, dt - float(r["duration_s"]))
        parts["model process start"] += max(0.0, float(r["duration_s"]) - in_child)
        for name, seconds in stages.items():
            parts[f"stage {name}"] += float(seconds)
    total = sum(parts.values())
    if not total:
        return []
    out = ["", "where the time goes (model processes that ran, summed; jobs run in parallel):"]
    out += [f"  {name:<32} {sec:8.1f}s {100 * sec / total:5.1f}%" for name, sec in parts.most_common()]
    return out


if __name__ == "__main__":
    sys.exit(main())
