"""The version matrix: OpenVINO releases (and torch) on the snapshot's top models, then the first bad
OpenVINO release of each guard cluster.

    python -m benchmarks.versions --top 20 --out benchmarks/versions_latest.txt

Each cell of the matrix is one env (``zoo env``, built or reused under ``ZOO_ENV_HOME``) pinned to
an OpenVINO release and a torch release, every other package Zoo's own; the same models run in each
on ``cpu+openvino`` at tier tiny through the Hub stand-in over ``data/`` (the real
``huggingface_hub`` client over HTTP). Consecutive envs are compared with ``zoo compare``'s query
(fixed, broken, still failing), and each ``--bisect`` model is bisected with ``zoo bisect``'s code
between the oldest and the newest release. Everything is measured in one sitting on one machine;
the header names it and its load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.backends import SNAPSHOT_CSV, standin
from benchmarks.precision import machine

BACKEND = "cpu+openvino"
DEFAULT_OPENVINO = "2025.0.0,2025.4.1,2026.0.0,2026.1.0,2026.4.1"
# the guard clusters' largest models in the stored real rows (docs/findings/cpu+openvino)
DEFAULT_BISECT = "google-bert/bert-base-uncased,Falconsai/nsfw_image_detection"


def env_name(openvino: str, torch: str) -> str:
    return f"bench-ov{openvino}-t{torch}".replace("+", "-")


def ensure_env(openvino: str, torch: str) -> str:
    from services import environments
    from zoo_runner import envs

    name = env_name(openvino, torch)
    if name not in envs.names():
        environments.create(name, [f"openvino=={openvino}", f"torch=={torch}"])
    return name


Row = tuple  # (openvino, torch, env, coverage dict, wall s, median backend_share or None, env build s or None)


def _cell(s, ov: str, torch: str, env: str, run_id: int, wall: float, built: float | None) -> Row:
    """One cell of the matrix from its stored rows."""
    from sqlalchemy import select

    from db import queries
    from db.models import Result

    cov = queries.coverage(s, backend=BACKEND, tier="tiny", env=env)
    shares = [
        float(d["backend_share"])
        for d in s.scalars(select(Result.details).where(Result.run_id == run_id))
        if (d or {}).get("backend_share") is not None
    ]
    return (ov, torch, env, cov.to_dict(), wall, statistics.median(shares) if shares else None, built)


def _table(rows: list[Row], top: int, models: int, csv: str, header: str, note: str = "") -> list[str]:
    """The matrix and the release-to-release comparison of ``rows`` (consecutive cells)."""
    from db import queries
    from db.session import session_scope

    lines = [
        "# OpenVINO releases x torch on the snapshot's top models (cpu+openvino, tier tiny)",
        "",
        f"Written by `python -m benchmarks.versions --top {top}` · {header}",
        f"models: the top {models} of {Path(csv).name} through the Hub stand-in; one env per cell "
        "(only its pins installed; env build time in the last column, 0 when reused)" + note,
        "",
        "| openvino | torch | pass | pass_with_fallback | compile_error | runtime_error | mismatch | other "
        "| functional, by downloads | passing under half on OpenVINO | median backend_share | wall s | env s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for ov, torch, _env, cov, wall, share, built in rows:
        sc = cov["status_counts"]
        main_keys = ("pass", "pass_with_fallback", "compile_error", "runtime_error", "mismatch")
        other = sum(v for k, v in sc.items() if k not in main_keys)
        fw = cov["functional_weighted"]
        env_s = "n/a" if built is None else f"{built:.0f}"
        lines.append(
            f"| {ov} | {torch} | {sc.get('pass', 0)} | {sc.get('pass_with_fallback', 0)} | "
            f"{sc.get('compile_error', 0)} | {sc.get('runtime_error', 0)} | {sc.get('mismatch', 0)} | {other} | "
            f"{'n/a' if fw is None else f'{100 * fw:.1f} %'} | {cov['below_half_on_backend']} | "
            f"{'n/a' if share is None else f'{share:.2f}'} | {wall:.0f} | {env_s} |"
        )
    lines += ["", "## Release to release (the same models; `zoo compare --env A --env B`)", ""]
    lines += ["| from | to | fixed | broken | still failing, same | another signature | numerics moved |",
              "|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    with session_scope() as s:
        for (ova, ta, ea, *_), (ovb, tb, eb, *_) in zip(rows, rows[1:]):
            c = queries.compare_envs(s, ea, eb, backend=BACKEND)["counts"]
            lines.append(
                f"| {ova} / torch {ta} | {ovb} / torch {tb} | {c['fixed']['models']} | {c['broken']['models']} | "
                f"{c['still_failing_same']['models']} | {c['still_failing_other']['models']} | "
                f"{c['numerics_moved']['models']} |"
            )
    return lines


def _from_db(url: str) -> tuple[list[Row], int, str]:
    """The finished cells of a kept database (``--from-db``): rows, models per cell, when they ran."""
    import re

    from sqlalchemy import select

    from db.models import Run
    from db.session import session_scope

    os.environ["ZOO_DATABASE_URL"] = url
    rows: list[Row] = []
    requested, spans = 0, []
    with session_scope() as s:
        for run in s.scalars(select(Run).where(Run.env.like("bench-ov%")).order_by(Run.id)):
            m = re.fullmatch(r"bench-ov(.+)-t(.+)", run.env)
            if run.finished_at is None or not m:
                continue  # a cell cut short: not shown
            wall = (run.finished_at - run.started_at).total_seconds()
            rows.append(_cell(s, m[1], m[2], run.env, run.id, wall, None))
            requested = max(requested, run.requested)
            spans.append((run.started_at, run.finished_at))
    when = f"{spans[0][0]:%Y-%m-%d %H:%M}-{spans[-1][1]:%H:%M} UTC" if spans else "no finished cell"
    return rows, requested, when


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--csv", default=str(SNAPSHOT_CSV))
    p.add_argument("--top", type=int, default=20, help="the snapshot's N most-downloaded models (default 20)")
    p.add_argument("--openvino", default=DEFAULT_OPENVINO, help="OpenVINO releases, oldest first")
    p.add_argument("--torch", default="2.13.0", help="torch releases (comma-separated); each with every OpenVINO")
    p.add_argument(
        "--extra", default="2026.4.1@2.9.0", help="more cells OPENVINO@TORCH (default: the silent-fallback one)"
    )
    p.add_argument("--bisect", default=DEFAULT_BISECT, help="models to bisect (comma-separated; empty: none)")
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--out", help="also write the report here")
    p.add_argument(
        "--from-db",
        metavar="URL",
        help="validate nothing: write the report of the finished cells in the database a run kept (it prints its "
        "URL first), e.g. of a run stopped before its last cells",
    )
    args = p.parse_args(argv)

    if args.from_db:
        rows, models, when = _from_db(args.from_db)
        note = f"; re-rendered from the database the run kept ({len(rows)} finished cells, run {when})"
        lines = _table(rows, args.top, models, args.csv, machine() + " (now, not when it ran)", note)
        return _write(lines, args.out)
    header = machine()
    work = Path(tempfile.mkdtemp(prefix="zoo-versions-"))
    args.db = f"sqlite:///{work / 'zoo.db'}"
    print(f"results database (kept, for the Releases page and --from-db): {args.db}", flush=True)
    stop = standin(args, work)
    lines: list[str] = []
    try:
        from db import repository
        from db.session import session_scope
        from services import catalog
        from zoo import bisect as zbisect
        from zoo import jobs as zjobs

        catalog.sync(catalog.from_file(args.csv), f"file:{Path(args.csv).name}")
        _, ids = zjobs.pick_models(args.top)
        ovs = [v.strip() for v in args.openvino.split(",") if v.strip()]
        cells = [(ov, t.strip()) for t in args.torch.split(",") if t.strip() for ov in ovs]
        cells += [tuple(c.split("@", 1)) for c in args.extra.split(",") if "@" in c]  # type: ignore[misc]
        rows: list[Row] = []
        for ov, torch in cells:
            t0 = time.perf_counter()
            env = ensure_env(ov, torch)
            built = time.perf_counter() - t0
            with session_scope() as s:
                run_id = repository.start_run(s, BACKEND, "tiny", "inprocess", len(ids), None, env=env).id
            t0 = time.perf_counter()
            zjobs.run_inprocess(ids, BACKEND, "tiny", run_id, args.timeout, jobs=args.jobs, env=env)
            wall = time.perf_counter() - t0
            with session_scope() as s:
                repository.finish_run(s, run_id)
            with session_scope() as s:
                rows.append(_cell(s, ov, torch, env, run_id, wall, built))
            print(f"openvino {ov} torch {torch}: {wall:.0f} s, {rows[-1][3]['status_counts']}", flush=True)
        lines = _table(rows, args.top, len(ids), args.csv, header)
        models = [m.strip() for m in args.bisect.split(",") if m.strip()]
        if models:
            lines += ["", f"## First bad OpenVINO release (`zoo bisect ... --good {ovs[0]} --bad {ovs[-1]}`)", ""]
            lines += ["| model | bad means | last good | first bad | versions tried | seconds |",
                      "|---|---|---|---|---|---:|"]  # fmt: skip
        for model in models:
            t0 = time.perf_counter()
            try:
                out = zbisect.bisect(model, BACKEND, "openvino", ovs[0], ovs[-1], timeout_s=args.timeout)
            except Exception as exc:  # a good end that is bad too: said, not hidden
                lines.append(f"| {model} | | | | {str(exc).splitlines()[0][:160]} | {time.perf_counter() - t0:.0f} |")
                continue
            tried = ", ".join(f"{st['version']} {st['status']}" for st in out["steps"])
            lines.append(
                f"| {model} | {out['bad_status']}: {(out['bad_signature'] or '')[:70]} | {out['last_good']} | "
                f"**{out['first_bad']}** | {tried} | {time.perf_counter() - t0:.0f} |"
            )
    finally:
        stop()
    os.environ.pop("HF_ENDPOINT", None)
    return _write(lines, args.out)


def _write(lines: list[str], out: str | None) -> int:
    text = "\n".join(lines) + "\n"
    print(text)
    if out:
        Path(out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
