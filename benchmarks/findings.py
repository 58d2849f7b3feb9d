"""Zoo's findings, produced by Zoo: the N largest failure clusters of a backend, triaged.

    python -m benchmarks.findings --backend cpu+openvino --clusters 5 [--state benchmarks/data/backends]
                                  [--out docs/findings] [--check]

Loads the stored real rows (``--state``, as :mod:`benchmarks.backends` keeps them) into a fresh
database over the Hub snapshot, points the real Hub client at the local stand-in of the Hub API,
and runs ``zoo triage --clusters N --backend B`` (:func:`services.triage.triage_clusters`): each
cluster's most downloaded model is validated again with the triage on, and its ``repro.py``,
``repro.safetensors``, ``issue.md`` and ``triage.json`` land in ``OUT/<backend>/<cluster>/``.
``--check`` then runs every ``repro.py`` with this interpreter (exit 1: the failure reproduces on
these versions) and writes what each did into ``OUT/<backend>/README.md`` with the machine; each
``--check-env NAME`` (a ``zoo env``, e.g. the last good and the first bad release ``zoo bisect``
named) runs them again with that env's interpreter, so the README says on which versions each
repro fails and on which it passes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("benchmarks.findings")


def _machine() -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")), "?")
    return f"{os.cpu_count()} cores ({model}), load average {load}, {platform.platform()}"


def _run_repro(python: str, repro: str) -> str:
    """``python repro.py`` from a scratch directory: its exit code and its last line."""
    repro = str(Path(repro).resolve())
    proc = subprocess.run([python, repro], capture_output=True, text=True, timeout=600, cwd=tempfile.gettempdir())
    return f"{proc.returncode} ({_said(proc)[:100]})"


def _said(proc: subprocess.CompletedProcess) -> str:
    """What a repro said, in one line: the message it reproduced with, else its last line."""
    lines = [ln.strip() for ln in (proc.stdout or proc.stderr).strip().splitlines()]
    here = [ln for ln in lines if ln.startswith("here:")]
    if here:
        return "REPRODUCED, " + here[0]
    return next((ln for ln in lines if ln.startswith("REPRODUCED")), lines[-1] if lines else "")


def _env_table(done: list[dict], env_names: list[str]) -> list[str]:
    """Each repro run with each env's interpreter: exit 1 where the failure is there, 0 where not."""
    from zoo_runner import envs

    pythons = {name: envs.python_for(name) for name in env_names}
    pins = {name: ", ".join(envs.describe(name)["pins"]) or "Zoo's own" for name in env_names}
    lines = [
        "",
        "## On which versions each repro fails (`--check-env`: 1 reproduces, 0 does not)",
        "",
        "| cluster | " + " | ".join(f"{n} ({pins[n]})" for n in env_names) + " |",
        "|---|" + "---|" * len(env_names),
    ]
    for d in done:
        if not d.get("repro"):
            continue
        cells = [_run_repro(pythons[n], d["repro"]) for n in env_names]
        lines.append(f"| {Path(d['repro']).parent.name} {d['model_id']} | " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.findings", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", required=True)
    ap.add_argument("--clusters", type=int, default=5)
    ap.add_argument("--state", default=str(ROOT / "benchmarks" / "data" / "backends"))
    ap.add_argument("--csv", default=str(ROOT / "data" / "hub-top1000-2025-03.csv"))
    ap.add_argument("--out", default="docs/findings", help="where the clusters go (default docs/findings)")
    ap.add_argument("--check", action="store_true", help="run every repro.py written and record its exit code")
    ap.add_argument(
        "--check-env",
        action="append",
        default=[],
        metavar="NAME",
        help="also run every repro.py with this zoo env's interpreter (repeatable)",
    )
    ap.add_argument("--timeout", type=float, default=1200.0, help="seconds per model process (default 1200)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    work = Path(tempfile.mkdtemp(prefix="zoo-findings-"))
    os.environ["ZOO_DATABASE_URL"] = f"sqlite:///{work / 'zoo.db'}"
    os.environ["ZOO_TRIAGE_DIR"] = args.out
    from benchmarks.backends import load_rows, standin
    from services import catalog, triage

    stop = standin(argparse.Namespace(csv=args.csv, db=os.environ["ZOO_DATABASE_URL"]), work)
    try:
        catalog.sync(catalog.from_file(args.csv), f"file:{Path(args.csv).name}")
        log.info("loaded %d stored results", load_rows(Path(args.state) / "rows.jsonl.gz"))
        t0 = time.perf_counter()
        done = triage.triage_clusters(args.backend, args.clusters, args.out, timeout_s=args.timeout)
        wall = time.perf_counter() - t0
    finally:
        stop()
    lines = [
        f"# Triaged clusters of {args.backend}",
        "",
        f"Written by `python -m benchmarks.findings --backend {args.backend} --clusters {args.clusters}"
        f"{' --check' if args.check else ''}{''.join(f' --check-env {e}' for e in args.check_env)}` "
        f"(Zoo's own `zoo triage --clusters`) in {wall:.0f} s on {_machine()}.",
        "",
        "| cluster | model | status | attribution | graph nodes → repro nodes | repro exits |",
        "|---|---|---|---|---|---|",
    ]
    for d in done:
        rc = ""
        if args.check and d.get("repro"):
            proc = subprocess.run([sys.executable, d["repro"]], capture_output=True, text=True, timeout=600)
            rc = f"{proc.returncode} ({_said(proc)[:100]})"
            d["repro_exit"] = proc.returncode
        folder = Path(d["repro"]).parent.name if d.get("repro") else ""
        lines.append(
            f"| `{(d.get('cluster') or '')[:90]}` {folder} | {d['model_id']} | {d['status']} | {d.get('attribution')} "
            f"| {d.get('graph_nodes')} → {d.get('repro_nodes')} | {rc} |"
        )
    lines += [
        "",
        "## Findings: clusters grouped by what the triage found (attribution and minimal repro)",
        "",
        "| finding | attribution | clusters | models | downloads | why one finding |",
        "|---|---|---:|---:|---:|---|",
    ]
    for g in triage.group_findings(done):
        lines.append(
            f"| {g['finding']} | {g['attribution']} | {len(g['clusters'])} | {g['models']} | {g['downloads']:,} "
            f"| {g.get('basis') or ''} |"
        )
    if args.check_env:
        lines += _env_table(done, args.check_env)
    changed = [d for d in done if d.get("signature_changed")]
    if changed:
        lines += ["", "Messages that changed between the stored run and the triage's run of the same model:", ""]
        lines += [
            f"- {d['model_id']}: `{d['signature_changed']['stored'][:100]}` → `{d['signature_changed']['now'][:100]}`"
            for d in changed
        ]
    out = Path(args.out) / triage.backend_key(args.backend)
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print(json.dumps(done, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
