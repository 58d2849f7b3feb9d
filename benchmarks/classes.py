"""Class census of transformers itself: every model class in the Auto model mappings, for every
task, built from its model type's default config at tier tiny, with generated inputs and a CPU
reference — an out-of-sample check of Zoo's builders that no snapshot can tune.

    python -m benchmarks.classes [--every N [--start K]] [--limit N] [--jobs 2] [--timeout 120]
                                 [--out FILE] [--rows FILE] [--retry ROWS]

Each class runs as ``arch:<Class>`` through the engine in its own model process (backend ``cpu``,
reference cache off). Prints per task and overall: classes attempted, valid references, failure
clusters (error signature → the model types it covers) and classes skipped because they need a
package Zoo does not install. ``--every N`` takes every N-th class (a sample, said in the header)
from the ``--start``-th (default 0): another start is a sample no fix was tuned on.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from benchmarks.precision import machine

NEEDS_PACKAGE = ("requires the", "requires `", "pip install", "No module named")


def class_census() -> dict[str, set[str]]:
    """Model class name -> the tasks (Auto mappings) that list it, at the pinned transformers."""
    import transformers.models.auto.modeling_auto as auto

    out: dict[str, set[str]] = collections.defaultdict(set)
    for name in dir(auto):
        if not (name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES")):
            continue
        task = (
            name[: -len("_MAPPING_NAMES")].removeprefix("MODEL").removeprefix("_").removeprefix("FOR_").lower()
            or "base"
        )
        for classes in getattr(auto, name).values():
            for cls in classes if isinstance(classes, (list, tuple)) else [classes]:
                out[cls].add(task)
    return out


def _skipped(result: dict) -> str | None:
    msg = (result.get("error") or {}).get("message", "")
    first = next((line.strip() for line in msg.splitlines() if line.strip()), "")
    return first[:120] if any(k in msg for k in NEEDS_PACKAGE) else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--every", type=int, default=1, help="take every N-th class, in name order (default 1: all)")
    p.add_argument("--start", type=int, default=0, help="with --every: begin at the K-th class (default 0)")
    p.add_argument("--limit", type=int, default=None, help="at most this many classes")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=120)
    p.add_argument("--out", help="also write the report here")
    p.add_argument("--rows", help="also write each class's status, reason and error as JSON lines here")
    p.add_argument(
        "--retry",
        metavar="ROWS",
        help="run only the classes a --rows file from an earlier run lists without a valid reference",
    )
    args = p.parse_args(argv)
    os.environ.update(HF_HUB_OFFLINE="1", ZOO_REFERENCE_CACHE="off")

    import transformers
    from tqdm import tqdm

    from zoo_runner.launcher import run_isolated
    from zoo_runner.request import ValidationRequest, share_of_cores

    census = class_census()
    names = sorted(census)[args.start :: args.every][: args.limit]
    if args.retry:
        again = set(_failed(Path(args.retry)))
        names = [n for n in names if n in again]
    header = (
        f"Class census — transformers {transformers.__version__}, {len(names)} of {len(census)} Auto-mapped classes"
        + (f" (every {args.every}th from the {args.start}th)" if args.every > 1 else "")
        + (f" (those without a valid reference in {args.retry})" if args.retry else "")
        + f", tier tiny, backend cpu, {args.jobs} jobs"
    )
    header += "\n" + machine()
    rows: dict[str, dict] = {}
    t0 = time.perf_counter()
    with ThreadPoolExecutor(args.jobs) as pool:
        futures = {
            pool.submit(
                run_isolated,
                ValidationRequest(
                    f"arch:{n}",
                    backend="cpu",
                    timeout_s=args.timeout,
                    reference_cache="",
                    threads=share_of_cores(args.jobs),
                ),
            ): n
            for n in names
        }
        for fut in tqdm(as_completed(futures), total=len(futures), desc="classes", unit="class"):
            rows[futures[fut]] = fut.result()
    wall = time.perf_counter() - t0
    text = report(rows, census, wall, header)
    print(text, end="")
    if args.out:
        Path(args.out).write_text(text)
    if args.rows:
        Path(args.rows).write_text("".join(json.dumps(_row(n, r)) + "\n" for n, r in sorted(rows.items())))
    return 0


def _failed(rows_file: Path) -> list[str]:
    """The classes a ``--rows`` file lists without a valid reference (skipped ones included)."""
    from zoo_runner.statuses import NO_VALID_REFERENCE

    rows = [json.loads(line) for line in rows_file.read_text().splitlines() if line.strip()]
    return [r["class"] for r in rows if r["status"] in NO_VALID_REFERENCE]


def _row(name: str, result: dict) -> dict:
    error = result.get("error") or {}
    return {
        "class": name,
        "status": result["status"],
        "reason": result.get("reason"),
        "signature": error.get("signature"),
        "message": (error.get("message") or "")[-2000:],
        "known_failure": bool((result.get("details") or {}).get("known_failure")),
    }


def report(rows: dict[str, dict], census: dict[str, set[str]], wall: float, header: str) -> str:
    from zoo_runner.statuses import NO_VALID_REFERENCE

    out = [header, f"wall {wall:.0f}s", ""]
    skipped = {n: why for n, r in rows.items() if (why := _skipped(r))}
    attempted = {n: r for n, r in rows.items() if n not in skipped}
    valid = {n for n, r in attempted.items() if r["status"] not in NO_VALID_REFERENCE}
    by_task: dict[str, list[str]] = collections.defaultdict(list)
    for n in attempted:
        for task in census[n]:
            by_task[task].append(n)
    out.append(f"{'task':<36} {'attempted':>9} {'valid ref':>9} {'share':>7}")
    for task in sorted(by_task):
        ns = by_task[task]
        ok = sum(n in valid for n in ns)
        out.append(f"{task:<36} {len(ns):>9} {ok:>9} {ok / len(ns):>7.1%}")
    share = len(valid) / len(attempted) if attempted else 0.0
    out += [
        "",
        f"overall: {len(valid)}/{len(attempted)} attempted classes have a valid reference "
        f"({share:.1%}); {len(skipped)} skipped (need a package Zoo does not install)",
        "",
    ]
    clusters: dict[str, list[str]] = collections.defaultdict(list)
    for n, r in attempted.items():
        if n not in valid:
            sig = (r.get("error") or {}).get("signature") or f"{r['status']} ({r.get('reason')})"
            clusters[f"{r['status']}: {sig}"[:160]].append(n)
    failed = [n for n in attempted if n not in valid]
    known = {n for n in failed if (attempted[n].get("details") or {}).get("known_failure")}
    out.append(
        f"known failures: {len(known)} of the {len(failed)} failures have a known-failure row (marked *; the reason "
        f"and expiry are in zoo_runner/quirks.py), {len(failed) - len(known)} have none"
    )
    out.append("failure clusters (largest first):")
    for sig, ns in sorted(clusters.items(), key=lambda kv: -len(kv[1])):
        out.append(f"  {len(ns):>3}  {sig}")
        out.append(f"       {', '.join(n + '*' if n in known else n for n in sorted(ns))}")
    if skipped:
        out += ["", "skipped (a package Zoo does not install):"]
        out += [f"  {n}: {why}" for n, why in sorted(skipped.items())]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
