"""The README's first command, timed as a newcomer meets it: a fresh clone, nothing beside it.

    python -m benchmarks.main_job [--top 20] [--out benchmarks/main_job_latest.txt]

Clones this checkout's HEAD into a temporary directory, gives it an empty HOME (so Zoo's reference
and compile caches, ``~/.cache/zoo``, start cold, as on a user's machine), then runs
``bash scripts/setup.sh && .venv/bin/zoo run --top N`` there with stderr a pipe (progress comes as
plain lines). It prints the time to set up, to the first result row (the first ``n/N`` line that
counts a finished model) and in all, with the machine and its load at the start and the end, and
the run's own summary (statuses, headline).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.precision import machine

ROOT = Path(__file__).resolve().parent.parent
FIRST_ROW = re.compile(r"^validate \S+: ([1-9]\d*)/\d+ ")


def _clean_env(home: Path) -> dict[str, str]:
    """The caller's environment without Zoo's settings or an active venv, with ``home`` as HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(HOME=str(home), HF_HUB_OFFLINE="1")  # the offline default: the builtin arch: catalog
    env.pop("HF_HOME", None)
    return env


def run(top: int, workdir: Path) -> list[str]:
    clone, home = workdir / "zoo", workdir / "home"
    home.mkdir()
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    env = _clean_env(home)
    commit = subprocess.check_output(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], text=True).strip()
    lines = [machine(), f"commit {commit}"]
    start = time.monotonic()
    setup = subprocess.run(["bash", "scripts/setup.sh"], cwd=clone, env=env, capture_output=True, text=True)
    setup_s = time.monotonic() - start
    if setup.returncode != 0:
        raise SystemExit(f"setup failed ({setup.returncode}):\n{setup.stderr[-3000:]}")
    lines.append(f"setup: {setup_s:.0f} s; what it printed:")
    lines += [f"  {ln}" for ln in setup.stderr.splitlines()]
    cmd = [".venv/bin/zoo", "run", "--top", str(top)]
    run_start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=clone, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first_row_s = None
    progress = 0
    assert proc.stderr is not None and proc.stdout is not None
    for line in proc.stderr:
        if first_row_s is None and FIRST_ROW.match(line):
            first_row_s = time.monotonic() - run_start
        progress += line.startswith("validate ")
        print(line, end="", file=sys.stderr, flush=True)
    out = proc.stdout.read()
    rc = proc.wait()
    run_s = time.monotonic() - run_start
    total_s = time.monotonic() - start
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    first = f"{first_row_s:.0f} s after `zoo run` started" if first_row_s is not None else "never"
    lines += [
        f"`{' '.join(cmd)}`: exit {rc}, {run_s:.0f} s; first result row {first}; {progress} progress lines",
        f"total, setup included: {total_s:.0f} s ({total_s / 60:.1f} min); target 300 s "
        f"({'met' if total_s <= 300 else 'missed'}); first row target 60 s "
        f"({'met' if first_row_s is not None and first_row_s <= 60 else 'missed'})",
        f"load average at the end: {load}",
        "what `zoo run` printed on stdout:",
    ]
    lines += [f"  {ln}" for ln in out.splitlines() if ln.strip()]
    lines += where_the_time_goes(clone / "zoo.db")
    return lines


def where_the_time_goes(db: Path) -> list[str]:
    """Seconds per stage of the model processes (``details.stage_s``), summed over the run's rows,
    and the slowest models: the profile of the run (model processes run two at a time)."""
    import json
    import sqlite3

    if not db.exists():
        return ["no zoo.db: nothing to profile"]
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT model_id, status, duration_s, details FROM results").fetchall()
    stages: dict[str, float] = {}
    per_model = []
    for model_id, status, duration, details in rows:
        d = json.loads(details or "{}")
        for name, sec in (d.get("stage_s") or {}).items():
            stages[name] = stages.get(name, 0.0) + float(sec)
        per_model.append((duration or 0.0, model_id, status, d.get("compile_cache")))
    total = sum(stages.values()) or 1.0
    out = [f"where the time goes ({len(rows)} rows; model process seconds summed, two run at once):"]
    out += [
        f"  stage {k:<12} {v:7.1f} s  {100 * v / total:5.1f} %"
        for k, v in sorted(stages.items(), key=lambda kv: -kv[1])
    ]
    out.append("slowest models (seconds in the model process, status, compile cache):")
    out += [f"  {sec:6.1f} s  {mid}  {st}  {cache}" for sec, mid, st, cache in sorted(per_model, reverse=True)[:8]]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--top", type=int, default=20, help="models, as the README's command (default 20)")
    ap.add_argument("--out", help="also write the summary to this file")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="zoo-main-job-") as tmp:
        lines = run(args.top, Path(tmp))
    text = "\n".join(["# python -m benchmarks.main_job: the README's first command from a fresh clone", *lines]) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
