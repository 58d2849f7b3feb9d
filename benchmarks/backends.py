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

A slice too long for one sitting (the top 1000 on ``xla`` is hours of a 2-core machine) goes in
several: ``--state DIR`` keeps every stored result as JSON lines (``DIR/rows.jsonl.gz``) and the wall
times (``DIR/walls.json``), loads them into a fresh database at the start and writes them back
after every ``--chunk`` models, so a crash or a new machine loses at most one chunk. With it, a
first pass skips the models that already have a result this ISO week for that backend and
precision, and its wall time is the sum of its sittings (each listed with its load and commit);
later passes (the warm-cache re-runs) start only once the first is complete and run in one sitting.
A plan item's entry is keyed by the precision the backend declares on the machine that runs it
(``walls_key``): OpenVINO on a CPU with bf16 units declares bf16, so a sitting there validates its
slice again at bf16 beside the fp32 rows of a machine without them, and each gets its own section.
Every section's figures cover the results of its slice's models only, and a slice has its entry of
its own (``xla:100x2`` beside ``xla:1000``). ``--fresh`` runs a plan item from nothing although its
models have results this week (a cold first pass, then the warm ones, in one sitting): its rows
replace the stored ones, so a larger slice of the same backend then shows them too. ``--redo
unsupported`` validates again, as one more sitting, only the slice's models whose result this week is
``unsupported`` (after a builder was added, or from a venv with more libraries): the rest keep theirs.

    python -m benchmarks.backends --state benchmarks/data/backends --plan cpu+openvino:1000 \
        --out benchmarks/backends_latest.txt
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import logging
import os
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from benchmarks.precision import machine, packages
from zoo_runner.statuses import Status

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


def _stored_this_week(ids: list[str], backend: str, precision: str, judged: str) -> set[str]:
    """The models of ``ids`` that already have a result this ISO week on ``backend`` at tier tiny,
    judged as a request of ``precision`` would be, at ``judged`` precision or before any precision
    applied (a resumed first pass skips them; a machine that declares another precision does not)."""
    from sqlalchemy import select

    from db.models import Result
    from db.session import session_scope

    with session_scope() as s:
        q = select(Result.model_id).where(*_judged_rows(backend, precision, judged), Result.model_id.in_(ids))
        return set(s.scalars(q).all())


def _stored_with_status(ids: list[str], backend: str, precision: str, judged: str, statuses: list[str]) -> list[str]:
    """The models of ``ids`` whose result this week (as ``_stored_this_week`` finds it) has one of
    ``statuses``, in the order of ``ids`` (``--redo``)."""
    from sqlalchemy import select

    from db.models import Result
    from db.session import session_scope

    with session_scope() as s:
        q = select(Result.model_id).where(
            *_judged_rows(backend, precision, judged), Result.model_id.in_(ids), Result.status.in_(statuses)
        )
        found = set(s.scalars(q).all())
    return [m for m in ids if m in found]


def _judged_rows(backend: str, scope: str, judged: str) -> tuple:
    """The conditions on this week's results of ``backend`` at tier tiny judged as a request of
    ``scope`` would be, at ``judged`` precision, or refused before any precision applied (those are
    the same at every precision: keyed at fp32 with no source, ``db.rows.precision_scope``)."""
    from db import queries, repository
    from db.models import Result
    from db.weeks import iso_week

    return (
        Result.backend == backend,
        Result.tier == "tiny",
        Result.week == iso_week(),
        repository.same_precision(scope),
        queries.precision_scope(judged),
    )


STORED_SOURCE = "stored_precision_source"  # a state row's source column, beside its SPEC result


def _store_rows(rows: Iterable[dict]) -> int:
    """Store saved results (``_saved_row``) in the database, each with the source column it had when
    saved; returns how many."""
    from db import repository
    from db.session import session_scope

    n = 0
    with session_scope() as s:
        for row in rows:
            row = dict(row)
            row.pop("week", None)  # the week follows from started_at, as for any stored result
            keep = STORED_SOURCE in row
            source = row.pop(STORED_SOURCE, None)
            stored = repository.store_result(s, row)
            if keep:
                # a --precision flag run over a declared row kept the row declared while its details
                # say "flag" (db.repository._stored_source): the column, not the details, says which
                stored.precision_source = source
            n += 1
    return n


def _load_rows(path: Path) -> int:
    """Store every result kept in ``path`` (JSON lines, gzip) in the database; returns how many."""
    if not path.exists():
        return 0
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return _store_rows(json.loads(line) for line in fh if line.strip())


def _saved_row(r: Any) -> dict:
    """A stored result as the state keeps it: its SPEC result and its row's source column."""
    from db.rows import result_dict

    return {**result_dict(r), STORED_SOURCE: r.precision_source}


@contextlib.contextmanager
def _set_aside(backend: str, scope: str, judged: str, models: list[str] | None = None) -> Iterator[None]:
    """Take this week's results of ``backend`` judged as ``scope`` at ``judged`` (of ``models`` only,
    where given) out of the database while a ``--fresh`` item (or a ``--redo`` chunk) runs, so it
    starts from nothing as a new database would (no stored result skips a model or stands in for its
    fingerprint), then put back each one whose model has no new result (the models outside the
    slice, or left undone by a failure)."""
    from sqlalchemy import delete, select

    from db.models import Result
    from db.session import session_scope

    where = _judged_rows(backend, scope, judged)
    if models is not None:
        where = (*where, Result.model_id.in_(models))
    with session_scope() as s:
        aside = [_saved_row(r) for r in s.scalars(select(Result).where(*where)).all()]
        s.execute(delete(Result).where(*where))
    log.info("%s: %d results of this week set aside while the slice runs from nothing", backend, len(aside))
    try:
        yield
    finally:
        with session_scope() as s:
            now = set(s.scalars(select(Result.model_id).where(*where)).all())
        _store_rows(r for r in aside if r["model_id"] not in now)


def _save_rows(path: Path) -> int:
    """Write every stored result to ``path`` (JSON lines, gzip), in a stable order, each with its
    row's source column (``STORED_SOURCE``); returns how many."""
    from sqlalchemy import select

    from db.models import Result
    from db.session import session_scope

    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with session_scope() as s:
        rows = s.scalars(select(Result).order_by(Result.backend, Result.precision, Result.model_id, Result.week)).all()
        with gzip.GzipFile(tmp, "wb", mtime=0) as raw:
            for r in rows:
                raw.write((json.dumps(_saved_row(r), sort_keys=True, default=str) + "\n").encode())
    tmp.replace(path)
    return len(rows)


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _chunks(ids: list[str], n: int) -> list[list[str]]:
    return [ids[i : i + n] for i in range(0, len(ids), max(1, n))]


def _fold_sittings(entry: dict) -> None:
    """A resumed first pass's totals from its sittings: the wall times and compile-cache answers add up."""
    first = entry["passes"][0]
    sittings = first.get("sittings") or []
    first["wall_s"] = round(sum(x["wall_s"] for x in sittings), 1)
    if sittings:
        first["load"] = sittings[0]["load"]
    caches: Counter = Counter()
    for x in sittings:
        caches.update(x.get("compile_cache") or {})
    first["compile_cache"] = dict(sorted(caches.items()))
    entry["walls_s"][0] = first["wall_s"]


def resume_plan_item(
    ids: list[str],
    backend: str,
    precision: str | None,
    passes: int,
    entry: dict | None,
    args: argparse.Namespace,
    save: Callable[[dict], None],
) -> dict:
    """One plan item under ``--state``: the first pass validates only the models of ``ids`` with no
    result this week (``--chunk`` at a time, ``save(entry)`` after each, so the state on disk is at
    most one chunk behind), as one more sitting of that pass; once every model has its result, the
    later passes run over all of ``ids``. Returns the walls entry."""
    requested = precision or "auto"
    scope = _rows_scope(backend, precision)
    judged = _judged_precision(backend, precision)
    done = _stored_this_week(ids, backend, scope, judged)
    todo = [m for m in ids if m not in done]
    redo = _stored_with_status(ids, backend, scope, judged, list(getattr(args, "redo", None) or []))
    if entry is None or entry.get("top") != len(ids) or (todo and len(entry.get("passes") or []) > 1):
        # a new slice, or a complete one whose rows belong to an earlier week: its first pass starts over
        entry = {"walls_s": [0.0], "passes": [{"wall_s": 0.0, "sittings": []}]}
    if redo and len(entry["passes"]) > 1:
        # the warm passes re-validated the old results: they run again once the first pass is redone
        entry["passes"], entry["walls_s"] = entry["passes"][:1], entry["walls_s"][:1]
    entry.update(
        top=len(ids),
        timeout_s=args.timeout,
        jobs=args.jobs,
        precision=judged,
        machine=machine(),
    )
    entry["declared_rows"] = bool(precision) and scope == "auto"  # see section()

    def sitting(models: list[str], aside: bool, **extra: Any) -> None:
        """One more sitting of the first pass over ``models``, ``--chunk`` at a time, saved after each
        (``aside``: each chunk's stored rows set aside while it runs, ``--redo``)."""
        x = {"wall_s": 0.0, "load": round(os.getloadavg()[0], 2), "models": 0, "commit": _commit(), **extra}
        x["started"] = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        entry["passes"][0].setdefault("sittings", []).append(x)
        caches: Counter = Counter()
        for chunk in _chunks(models, args.chunk):
            with _set_aside(backend, scope, judged, chunk) if aside else contextlib.nullcontext():
                r = run_backend(chunk, backend, requested, args.jobs, args.timeout)
            caches.update(r["compile_cache"])
            x.update(
                wall_s=round(x["wall_s"] + r["wall_s"], 1),
                models=x["models"] + len(chunk),
                compile_cache=dict(sorted(caches.items())),
            )
            _fold_sittings(entry)
            entry["stored"] = len(_stored_this_week(ids, backend, scope, judged))
            save(entry)

    if todo:
        sitting(todo, aside=False)
    if redo:
        # the models whose result this week has a --redo status, validated again: each chunk's old rows
        # are set aside while it runs (put back for a model left without a new one)
        sitting(redo, aside=True, redo=sorted(args.redo))
    entry["stored"] = len(_stored_this_week(ids, backend, scope, judged))
    save(entry)  # a slice whose rows all came from elsewhere (the declared run's) has its section too
    while len(entry["passes"]) < passes:
        r = run_backend(ids, backend, requested, args.jobs, args.timeout)
        entry["passes"].append(r)
        entry["walls_s"].append(r["wall_s"])
        save(entry)
    return entry


def _rows_scope(backend: str, precision: str | None) -> str:
    """The request whose stored rows are a plan item's: ``auto`` for the declared precision, and for
    a ``--precision`` flag naming the precision the backend declares on this machine (``@fp32`` on
    OpenVINO without bf16 units): such a flag judges the same thing, and the database keeps its
    results as the declared rows (``db.repository._stored_source``). Otherwise the flag itself."""
    if not precision or precision == "auto":
        return "auto"
    return "auto" if _judged_precision(backend, precision) == _judged_precision(backend, None) else precision


def walls_key(backend: str, precision: str | None, top: int) -> str:
    """A plan item's entry in the walls file: the backend, what was asked (``declared`` or the
    ``--precision`` flag), the precision the backend declares on this machine and the slice, so a
    machine that declares another one (OpenVINO: bf16 with bf16 units, fp32 without) gets its own
    section beside the other machine's, and a top-100 slice run twice its own beside the top 1000's,
    instead of taking over their entries."""
    return f"{backend}@{precision or 'declared'}/{_judged_precision(backend, None)}:{top}"


def _parse_walls_key(key: str) -> tuple[str, str]:
    """``(backend, requested)`` of a walls key (keys written before the declared suffix have none)."""
    backend, _, rest = key.partition("@")
    return backend, rest.partition("/")[0].partition(":")[0]


def _keyed_by_slice(walls: dict[str, dict]) -> dict[str, dict]:
    """A walls file written before keys named their slice, with each key given its entry's ``:TOP``."""
    return {k if ":" in k else f"{k}:{w['top']}": w for k, w in walls.items()}


def _judged_precision(backend: str, requested: str | None) -> str:
    from zoo_runner.backends import BackendSpec
    from zoo_runner.precision import resolve

    return resolve(requested, BackendSpec.parse(backend))[0]


def section(backend: str, requested: str, run: dict) -> list[str]:
    """One backend's lines; ``run`` is its entry in the walls file (slice, wall times, judged
    precision). Every figure covers the results of the slice's models only."""
    from db import queries
    from db.session import session_scope
    from zoo import jobs as zjobs

    precision = run["precision"]
    models = tuple(zjobs.pick_models(run["top"])[1])
    scope = {"backend": backend, "tier": "tiny", "precision": precision, "models": models}
    with session_scope() as s:
        cov = queries.coverage(s, **scope).to_dict()
        gaps = queries.op_gaps(s, limit=10, **scope)
        fails = queries.failure_clusters(s, limit=10_000, **scope)
    how = "its declared precision" if requested == "declared" else f"--precision {requested}"
    out = [
        f"== {backend} at {precision} ({how}), top {run['top']} "
        f"models, {run.get('jobs', '?')} jobs; {run.get('machine', '')}"
    ]
    walls = run["walls_s"]
    passes = run.get("passes") or [{} for _ in walls]  # older walls files kept the times only
    if run.get("stored") is not None and run["stored"] < run["top"]:
        out.append(
            f"  in progress: {run['stored']} of the top {run['top']} have a result so far (resume with the same "
            "--state and --plan); every figure below covers those only"
        )
    for i, (wall, p) in enumerate(zip(walls, passes)):
        name = "first run (cold caches)" if i == 0 else "second run (warm caches)" if i == 1 else f"run {i + 1}"
        if p.get("sittings") == []:  # under --state, every model had its result before this slice ran
            out.append(f"  wall: {name}: none of its own, every model of the slice already had its result")
            continue
        line = f"  wall: {name} {wall:.0f}s"
        if i:
            line += f", {walls[0] / max(wall, 1e-9):.1f}x faster than the first"
        if "load" in p:
            line += f"; load {p['load']:.2f} at its start"
        if p.get("compile_cache"):
            line += "; compile cache: " + ", ".join(f"{k} {v}" for k, v in p["compile_cache"].items())
        out.append(line)
        sittings = p.get("sittings") or []
        if len(sittings) > 1 or (sittings and sittings[0].get("models") != run["top"]):
            for j, x in enumerate(sittings, 1):
                again = f" (their {'/'.join(x['redo'])} results validated again)" if x.get("redo") else ""
                out.append(
                    f"    sitting {j}: {x['models']} models{again} in {x['wall_s']:.0f}s, started "
                    f"{x.get('started', '?')} at {x.get('commit', '?')}, load {x['load']:.2f} at its start"
                )
    if run.get("declared_rows"):
        resumed = "; under --state a model with a declared result this week is not validated again"
        out.append(
            f"  --precision {requested} names {backend}'s declared precision on this machine, so it judges what the "
            "declared run judges: its results are the declared rows (one row per precision) and these figures are "
            "the declared section's" + (resumed if "sittings" in passes[0] else "")  # --state keeps sittings
        )
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
    # the backend's failures: Zoo's own gaps (unsupported, reference_error) are in the statuses line
    zoos = {Status.UNSUPPORTED.value, Status.REFERENCE_ERROR.value}
    clusters = [c for c in fails.get("items") or [] if set(c.get("statuses") or {}) - zoos]
    out.append(
        "  largest failure clusters of the backend (Zoo's unsupported and reference_error rows left out):"
        if clusters
        else "  no failure of the backend's (Zoo's unsupported and reference_error rows left out)"
    )
    if clusters:
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
    p.add_argument(
        "--state",
        help="directory keeping the stored results (rows.jsonl.gz) and wall times (walls.json) across "
        "sittings and machines: loaded at the start, written after every --chunk models; a first pass "
        "then skips models with a result this week (see above)",
    )
    p.add_argument("--chunk", type=int, default=50, help="with --state: models between saves (default %(default)s)")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="with --state: each plan item runs its whole slice from nothing in this sitting (a cold first pass, "
        "then the warm ones), as on a new database, whatever is stored this week; its rows replace the stored "
        "ones, the state is written when it ends",
    )
    p.add_argument(
        "--redo",
        type=lambda v: [x for x in v.split(",") if x],
        default=[],
        metavar="STATUS[,STATUS]",
        help="with --state: a first pass also validates again the slice's models whose result this week has one "
        "of these statuses (e.g. unsupported, Zoo's gaps, after a builder or library was added), as one more "
        "sitting; their new rows replace the old, and the warm passes run again",
    )
    p.add_argument("--report-only", action="store_true", help="run nothing: print the report of what --db holds")
    p.add_argument("--out", help="also write the report here")
    args = p.parse_args(argv)
    unknown = sorted(set(args.redo) - {x.value for x in Status})
    if unknown:
        p.error(f"--redo: not a status: {', '.join(unknown)} (one of {', '.join(x.value for x in Status)})")
    if args.redo and not args.state:
        p.error("--redo needs --state: it validates again the results the state keeps")

    at_start = machine()  # the header's load is the one this command started under
    work = Path(os.environ.get("ZOO_BENCH_WORK") or tempfile.mkdtemp(prefix="zoo-backends-"))
    work.mkdir(parents=True, exist_ok=True)
    state = Path(args.state) if args.state else None
    args.db = args.db or f"sqlite:///{work / 'zoo.db'}"
    walls_path = state / "walls.json" if state else _walls_file(args.db)
    walls: dict[str, dict] = _keyed_by_slice(json.loads(walls_path.read_text())) if walls_path.exists() else {}
    mine: dict[str, dict] = {}  # the runs this invocation made
    stop = _standin(args, work)
    try:
        from db import queries
        from db.session import session_scope
        from services import catalog
        from zoo import jobs as zjobs

        with session_scope() as s:
            have = queries.latest_snapshot(s) is not None
        if not have:
            catalog.sync(catalog.from_file(args.csv), f"file:{Path(args.csv).name}")
        if state:
            log.info("loaded %d stored results from %s", _load_rows(state / "rows.jsonl.gz"), state)

        def save(key: str, entry: dict) -> None:
            mine[key] = entry
            # another venv's run may have written its own since this one started: keep them
            on_disk = _keyed_by_slice(json.loads(walls_path.read_text())) if walls_path.exists() else {}
            walls.clear()
            walls.update({**on_disk, **mine})
            walls_path.parent.mkdir(parents=True, exist_ok=True)
            walls_path.write_text(json.dumps(walls, indent=1))
            if state:
                _save_rows(state / "rows.jsonl.gz")

        for backend, precision, top, passes in [] if args.report_only else _plan(args.plan):
            try:
                backend = zjobs.resolve_backend(backend)
            except Exception as exc:  # a backend this machine (or venv) lacks is said, not fatal
                log.warning("%s: not run here: %s", backend, exc)
                continue
            _, ids = zjobs.pick_models(top)
            key = walls_key(backend, precision, len(ids))
            if state and args.fresh:
                # nothing is saved while it runs (the state on disk keeps the rows set aside): a sitting cut
                # short is started again with --fresh
                scope, judged = _rows_scope(backend, precision), _judged_precision(backend, precision)
                with _set_aside(backend, scope, judged):
                    entry = resume_plan_item(ids, backend, precision, passes, None, args, lambda e: None)
                save(key, entry)
                continue
            if state:
                resume_plan_item(ids, backend, precision, passes, walls.get(key), args, lambda e, k=key: save(k, e))
                continue
            runs = [run_backend(ids, backend, precision or "auto", args.jobs, args.timeout) for _ in range(passes)]
            save(
                key,
                {
                    "top": len(ids),
                    "walls_s": [r["wall_s"] for r in runs],
                    "passes": runs,
                    "timeout_s": args.timeout,
                    "jobs": args.jobs,
                    "precision": _judged_precision(backend, precision),
                    "machine": machine(),
                    "declared_rows": bool(precision) and _rows_scope(backend, precision) == "auto",
                },
            )
        header = [
            f"Backends benchmark — tier tiny, {Path(args.csv).name}; each section names the top-N slice it covers",
            at_start,
            packages(),
            "",
        ]
        body: list[str] = []
        for key, w in walls.items():
            body += section(*_parse_walls_key(key), w) + [""]
    finally:
        stop()
    text = "\n".join(header + body)
    print(text)
    if args.out:
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


# Public names for the scripts that reuse this benchmark's state and stand-in (benchmarks.findings).
load_rows = _load_rows
standin = _standin
