"""Writes: catalog snapshots and validation results (idempotent upserts), sweeps, task attempts and
plan caches. Reads live in :mod:`db.queries`; neither imports the other (they share :mod:`db.weeks`
and :mod:`db.rows`)."""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, case, delete, func, or_, select, update
from sqlalchemy.orm import Session

from zoo_runner.request import HARNESS_VERSION
from zoo_runner.result import ValidationResult, own_details

from .models import Bisection, Model, ModelClaim, Result, Run, Snapshot, SnapshotEntry, utcnow
from .rows import precision_scope, result_dict
from .weeks import iso_week

CHUNK = 2000


@dataclass
class CatalogEntry:
    """One model as a catalog source reports it."""

    model_id: str
    downloads: int = 0
    library: str | None = None
    model_type: str | None = None
    task: str | None = None
    tags: list[str] = field(default_factory=list)
    custom_code: bool = False
    gated: bool = False
    sha: str | None = None
    parameters: int | None = None


def _chunks(items: Iterable[CatalogEntry], n: int) -> Iterator[list[CatalogEntry]]:
    chunk: list[CatalogEntry] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= n:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def store_snapshot(
    session: Session, entries: Iterable[CatalogEntry], source: str, taken_at: dt.datetime | None = None, progress=None
) -> Snapshot:
    """Store a dated snapshot, upserting models; streamed in chunks, duplicates ignored.

    On PostgreSQL and SQLite each chunk is one multi-row ``INSERT .. ON CONFLICT DO UPDATE`` of
    the models and one multi-row insert of the snapshot's entries (100k entries in seconds)."""
    snap = Snapshot(source=source, taken_at=taken_at or utcnow())
    session.add(snap)
    session.flush()
    bulk = session.get_bind().dialect.name in ("postgresql", "sqlite")
    seen: set[str] = set()
    rank = 0
    total = 0
    now = utcnow()
    for chunk in _chunks(entries, CHUNK if not bulk else BULK_CHUNK):
        chunk = [e for e in chunk if e.model_id not in seen and not seen.add(e.model_id)]
        if bulk:
            _upsert_models(session, chunk, now)
        else:
            _merge_models(session, chunk, now)
        rows = []
        for e in chunk:
            rank += 1
            total += e.downloads
            rows.append({"snapshot_id": snap.id, "model_id": e.model_id, "downloads": e.downloads, "rank": rank})
        if rows:
            session.execute(SnapshotEntry.__table__.insert(), rows)
        if progress:
            progress(len(chunk))
    snap.n_models, snap.total_downloads = rank, total
    session.flush()
    return snap


BULK_CHUNK = 5000


def _upsert_models(session: Session, chunk: list[CatalogEntry], now: dt.datetime) -> None:
    if not chunk:
        return
    table = Model.__table__
    stmt = _upsert_insert(session, table)
    ex = stmt.excluded
    stmt = stmt.on_conflict_do_update(
        index_elements=["id"],
        set_={
            "library": ex.library,
            "model_type": ex.model_type,
            "task": ex.task,
            "tags": ex.tags,
            "custom_code": ex.custom_code,
            "gated": ex.gated,
            "sha": func.coalesce(ex.sha, table.c.sha),
            "parameters": ex.parameters,
            "downloads": ex.downloads,
            "last_seen": ex.last_seen,
        },
    )
    session.execute(
        stmt,
        [
            {
                "id": e.model_id,
                "library": e.library,
                "model_type": e.model_type,
                "task": e.task,
                "tags": e.tags,
                "custom_code": e.custom_code,
                "gated": e.gated,
                "sha": e.sha,
                "parameters": e.parameters,
                "downloads": e.downloads,
                "first_seen": now,
                "last_seen": now,
            }
            for e in chunk
        ],
    )


def _merge_models(session: Session, chunk: list[CatalogEntry], now: dt.datetime) -> None:
    """The portable path (other databases): ORM objects."""
    ids = [e.model_id for e in chunk]
    existing = {m.id: m for m in session.scalars(select(Model).where(Model.id.in_(ids)))}
    for e in chunk:
        m = existing.get(e.model_id)
        if m is None:
            m = Model(id=e.model_id, first_seen=now)
            session.add(m)
        m.library, m.model_type, m.task = e.library, e.model_type, e.task
        m.tags, m.custom_code, m.gated, m.sha, m.parameters = (
            e.tags,
            e.custom_code,
            e.gated,
            e.sha or m.sha,
            e.parameters,
        )
        m.downloads, m.last_seen = e.downloads, now
    session.flush()


def start_run(
    session: Session,
    backend: str,
    tier: str,
    mode: str,
    requested: int,
    snapshot_id: int | None,
    precision: str = "auto",
    env: str | None = None,
) -> Run:
    run = Run(
        backend=backend,
        tier=tier,
        mode=mode,
        requested=requested,
        snapshot_id=snapshot_id,
        precision=precision,
        env=env or "",
    )
    session.add(run)
    session.flush()
    return run


def finish_run(session: Session, run_id: int) -> None:
    run = session.get(Run, run_id)
    if run:
        run.finished_at = utcnow()
        run.state = "finished"
        run.missing = None
    session.execute(delete(ModelClaim).where(ModelClaim.run_id == run_id))  # none outlives its run


def interrupt_run(session: Session, run_id: int, missing: int) -> None:
    """Run ``run_id`` ended by an interrupt, ``missing`` of its models without a row."""
    run = session.get(Run, run_id)
    if run:
        run.finished_at = utcnow()
        run.state = "interrupted"
        run.missing = missing
    session.execute(delete(ModelClaim).where(ModelClaim.run_id == run_id))


def resumable_run(
    session: Session,
    backend: str,
    tier: str,
    requested: int,
    snapshot_id: int | None,
    precision: str = "auto",
    env: str | None = None,
) -> Run | None:
    """The newest in-process run of these parameters, where it was interrupted (a later run of them, finished
    or not, means the interrupted one is not resumed); None otherwise."""
    run = session.scalars(
        select(Run)
        .where(
            Run.mode == "inprocess",
            Run.backend == backend,
            Run.tier == tier,
            Run.requested == requested,
            Run.snapshot_id.is_(None) if snapshot_id is None else Run.snapshot_id == snapshot_id,
            Run.precision == precision,
            Run.env == (env or ""),
        )
        .order_by(Run.id.desc())
        .limit(1)
    ).first()
    return run if run is not None and run.state == "interrupted" else None


def resume_run(session: Session, run_id: int) -> bool:
    """Run ``run_id`` running again, where it is still interrupted (one update: of two commands resuming it at
    once, one gets it, the other starts a run of its own)."""
    stmt = (
        update(Run)
        .where(Run.id == run_id, Run.state == "interrupted")
        .values(state="running", finished_at=None, missing=None)
        .returning(Run.id)
    )
    return session.execute(stmt).scalar() is not None


MINE, HELD, STORED = "mine", "held", "stored"


def claim_model(
    session: Session,
    model_id: str,
    backend: str,
    tier: str,
    precision: str,
    env: str | None,
    run_id: int,
    lease_s: float,
) -> str:
    """Whether run ``run_id`` may validate ``model_id`` now (two `zoo run` at once on one database split the
    work): ``mine`` (it holds the model's claim now, for ``lease_s``: a run that died frees it then;
    :func:`release_model` ends it), ``held`` (another run's claim: ask again later) or ``stored`` (another run
    going on beside this one, or ended since it started, stored the model's row). The claim is taken first and
    the rows read after it, so a row stored before a claim was released is always seen."""
    now = utcnow()
    key = dict(model_id=model_id, backend=backend, tier=tier, precision=precision, env=env or "")
    session.execute(delete(ModelClaim).filter_by(**key).where(ModelClaim.expires_at < now))
    stmt = (
        _upsert_insert(session, ModelClaim)
        .values(**key, run_id=run_id, expires_at=now + dt.timedelta(seconds=lease_s))
        .on_conflict_do_nothing(index_elements=list(key))
        .returning(ModelClaim.id)  # a row back: this run's claim (rowcount is -1 here on PostgreSQL)
    )
    if session.execute(stmt).scalar() is None and session.scalar(select(ModelClaim.run_id).filter_by(**key)) != run_id:
        return HELD
    run = session.get(Run, run_id)
    if run is None or run.started_at is None:
        return MINE
    live = select(ModelClaim.run_id).where(ModelClaim.expires_at >= now)  # runs holding a claim: alive
    beside = select(Run.id).where(
        or_(
            Run.finished_at >= run.started_at,  # ended since this run started
            and_(Run.state == "running", or_(Run.id.in_(live), Run.started_at >= now - dt.timedelta(seconds=lease_s))),
        )
    )
    done = session.scalar(
        select(func.count())
        .select_from(Result)
        .where(
            Result.model_id == model_id,
            Result.backend == backend,
            Result.tier == tier,
            Result.env == (env or ""),
            same_precision(precision),
            Result.run_id != run_id,
            or_(Result.started_at >= run.started_at, Result.run_id.in_(beside)),
        )
    )
    if done:
        release_model(session, model_id, backend, tier, precision, env, run_id)
        return STORED
    return MINE


def release_model(
    session: Session, model_id: str, backend: str, tier: str, precision: str, env: str | None, run_id: int
) -> None:
    session.execute(
        delete(ModelClaim).filter_by(
            model_id=model_id, backend=backend, tier=tier, precision=precision, env=env or "", run_id=run_id
        )
    )


def stored_models(session: Session, run_id: int) -> set[str]:
    """The models run ``run_id`` stored a row for."""
    return set(session.scalars(select(Result.model_id).where(Result.run_id == run_id).distinct()))


def _parse_time(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return value
    if isinstance(value, str):
        try:
            return dt.datetime.fromisoformat(value)
        except ValueError:
            pass
    return utcnow()


KEY_PRECISION = "fp32"  # the key's precision of a result without one (the engine never got that far)
DECLARED_SOURCE = "default"  # where a result with a precision names no source


def result_precision(result: dict[str, Any]) -> tuple[str, str | None]:
    """(precision, source) to store for a SPEC result: what it was judged at and who decided it.
    A result without a precision (refused, or the model process died before one applied, with the
    request leaving it to the backend) is keyed at fp32 with no source: it counts as declared."""
    precision = result.get("precision")
    source = (result.get("details") or {}).get("precision_source")
    if precision:
        return str(precision), str(source or DECLARED_SOURCE)
    return KEY_PRECISION, None


def _stored_source(existing: str | None, new: str | None) -> str | None:
    """The source column of an upserted row. A ``--precision`` flag that names the precision the
    row was already judged at as declared (``--precision fp32`` on a CPU backend) judges the same
    thing: the row stays the backend's declared one, so default coverage keeps counting it
    (``details.precision_source`` still says ``flag`` for this run)."""
    if new == "flag" and existing not in (None, "flag"):
        return existing
    return new


RESULT_KEY = ("model_id", "revision", "backend", "tier", "harness_version", "week", "precision", "env")  # uq_result_key


def store_result(
    session: Session,
    result: dict[str, Any] | ValidationResult,
    run_id: int | None = None,
    task_id: str | None = None,
    model_id: str | None = None,
) -> Result:
    """Upsert one SPEC result (a :class:`ValidationResult` or its dict) on (model, revision,
    backend, tier, harness version, week, precision).

    On PostgreSQL and SQLite one ``INSERT .. ON CONFLICT (uq_result_key) DO UPDATE``: a concurrent
    writer of the same key waits for the other's commit, then updates its row, so no result is lost
    and ``attempts`` counts both. Returns the stored row."""
    if isinstance(result, ValidationResult):
        result = result.to_dict()
    started = _parse_time(result.get("started_at"))
    precision, source = result_precision(result)
    error = result.get("error")
    values: dict[str, Any] = dict(
        model_id=model_id or result["model_id"],
        revision=result.get("revision") or "",
        backend=result["backend"],
        tier=result["tier"],
        harness_version=str((result.get("details") or {}).get("harness_version", HARNESS_VERSION)),
        week=iso_week(started),
        precision=precision,
        env=str(((result.get("details") or {}).get("env") or {}).get("name") or ""),
        device=result.get("device"),
        dtype=result.get("dtype"),
        status=result["status"],
        reason=result.get("reason"),
        fingerprint=result.get("fingerprint"),
        library=result.get("library"),
        architecture=result.get("architecture"),
        task=result.get("task"),
        metrics={
            k: (v if not isinstance(v, float) or math.isfinite(v) else None)
            for k, v in (result.get("metrics") or {}).items()
        },
        fallback_ops=result.get("fallback_ops") or [],
        op_census=result.get("op_census") or {},
        error=error,
        error_signature=(error or {}).get("signature", None) and error["signature"][:300],
        versions=result.get("versions") or {},
        details=result.get("details") or {},
        precision_source=source,
        repro=result.get("repro"),
        started_at=started,
        duration_s=result.get("duration_s"),
        attempts=1,
        run_id=run_id or None,
        task_id=task_id or None,
    )
    if session.get_bind().dialect.name in ("postgresql", "sqlite"):
        return _upsert_result(session, values)
    return _merge_result(session, values)


def _upsert_result(session: Session, values: dict[str, Any]) -> Result:
    col = Result.__table__.c
    stmt = _upsert_insert(session, Result).values(**values)
    ex = stmt.excluded
    keep_source = and_(
        ex.precision_source == "flag", col.precision_source.is_not(None), col.precision_source != "flag"
    )  # _stored_source
    update = {
        k: getattr(ex, k)
        for k in values
        if k not in RESULT_KEY and k not in ("attempts", "run_id", "task_id", "precision_source")
    }
    update.update(
        attempts=func.coalesce(col.attempts, 0) + 1,
        run_id=func.coalesce(ex.run_id, col.run_id),
        task_id=func.coalesce(ex.task_id, col.task_id),
        precision_source=case((keep_source, col.precision_source), else_=ex.precision_source),
    )
    stmt = stmt.on_conflict_do_update(index_elements=list(RESULT_KEY), set_=update).returning(Result)
    return session.scalars(stmt, execution_options={"populate_existing": True}).one()


def _merge_result(session: Session, values: dict[str, Any]) -> Result:
    """The portable path (other databases): select, then insert or update."""
    key = {k: values[k] for k in RESULT_KEY}
    row = session.scalars(select(Result).filter_by(**key).with_for_update()).first()
    if row is None:
        row = Result(**values)
        session.add(row)
    else:
        for k, v in values.items():
            if k not in RESULT_KEY and k not in ("attempts", "run_id", "task_id", "precision_source"):
                setattr(row, k, v)
        row.precision_source = _stored_source(row.precision_source, values["precision_source"])
        row.attempts = (row.attempts or 0) + 1
        row.run_id = values["run_id"] or row.run_id
        row.task_id = values["task_id"] or row.task_id
    session.flush()
    return row


def count_results(session: Session, run_id: int) -> int:
    return session.scalar(select(func.count()).select_from(Result).where(Result.run_id == run_id)) or 0


def same_precision(requested: str | None):
    """Rows judged as a request of ``requested`` precision would be: ``auto`` (or none), the
    backend's declared precision (any source but ``flag``); otherwise exactly that flag."""
    if not requested or requested == "auto":
        return or_(Result.precision_source.is_(None), Result.precision_source != "flag")
    return and_(Result.precision == requested, Result.precision_source == "flag")


def shared_result(session: Session, fingerprint: str, req: Any, judged: str | None = None) -> dict[str, Any] | None:
    """This week's result of another model with the same fingerprint, backend, tier and requested
    precision, re-addressed to ``req``'s model (fingerprint dedup). Only results the engine produced
    count (not copies). ``judged``, the precision ``req`` is judged at here, also leaves out rows
    judged at another one: a declared row of a machine whose backend declares another precision
    (OpenVINO: fp32 without bf16 units, bf16 with them) is not this machine's verdict.

    The parent picks the source, never the order of validation: a row of a model with at least
    ``req``'s downloads (the most-downloaded first), so a stranger's copy of a popular config never
    speaks for the original; and never a ``reference_error`` or ``unsupported`` row, which says
    something of that repo's own files (its config, its code), not of the graph they share."""
    own = session.scalar(select(Model.downloads).where(Model.id == req.model_id)) or 0
    q = (
        select(Result)
        .join(Model, Model.id == Result.model_id, isouter=True)
        .where(
            func.coalesce(Model.downloads, 0) >= own,
            Result.status.notin_(("reference_error", "unsupported")),
            Result.fingerprint == fingerprint,
            Result.backend == req.backend,
            Result.tier == req.tier,
            Result.week == iso_week(),
            Result.harness_version == HARNESS_VERSION,
            Result.model_id != req.model_id,
            Result.env == (getattr(req, "env", None) or ""),
        )
        .where(same_precision(getattr(req, "precision", "auto")))
    )
    if judged is not None:
        q = q.where(precision_scope(judged, getattr(req, "env", None) or ""))
    rows = q.order_by(func.coalesce(Model.downloads, 0).desc(), Result.started_at.desc()).limit(20)
    row = session.scalars(rows).all()
    row = next((r for r in row if not (r.details or {}).get("deduplicated_from")), None)
    if row is None:
        return None
    out = result_dict(row)
    out.pop("week", None)
    out.update(
        model_id=req.model_id,
        revision=req.revision,
        repro=req.repro(),
        started_at=utcnow().isoformat(timespec="seconds"),
        duration_s=0.0,
    )
    # what the parent found of this request's own repo is its own, never the other model's
    out["details"] = {**own_details(row.details, req), "deduplicated_from": row.model_id}
    return out


# ---------------------------------------------------------------- the fleet: sweeps, attempts, plans


def _upsert_insert(session: Session, table):
    """The dialect's INSERT, which has ``on_conflict_do_*`` on PostgreSQL and SQLite."""
    if session.get_bind().dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert(table)


def claim_sweep(
    session: Session,
    kind: str,
    period: str,
    backend: str,
    tier: str,
    host: str | None = None,
    stale_after_s: float | None = 3600.0,
) -> int | None:
    """Claim the sweep of ``kind`` for ``period`` (an ISO week, a day): the new sweep's id, or
    None when it was already claimed (by another beat, or an earlier delivery of the same task).
    Committed at once, so that the claim is visible to every other process."""
    from .models import Sweep

    stmt = (
        _upsert_insert(session, Sweep.__table__)
        .values(
            kind=kind,
            period=period,
            backend=backend,
            tier=tier,
            started_at=utcnow(),
            candidates=0,
            enqueued=0,
            deduplicated=0,
            host=host,
        )
        .on_conflict_do_nothing(index_elements=["kind", "period", "backend", "tier"])
        .returning(Sweep.__table__.c.id)
    )
    sweep_id = session.execute(stmt).scalar()
    if sweep_id is None and stale_after_s:
        # claimed, never finished, and long ago: its sweeper died; take it over (one taker wins)

        old = session.execute(
            select(Sweep.id, Sweep.started_at).where(
                Sweep.kind == kind,
                Sweep.period == period,
                Sweep.backend == backend,
                Sweep.tier == tier,
                Sweep.finished_at.is_(None),
            )
        ).first()
        started = old and (old.started_at if old.started_at.tzinfo else old.started_at.replace(tzinfo=dt.timezone.utc))
        if old is not None and (utcnow() - started).total_seconds() > stale_after_s:
            res = session.execute(
                update(Sweep)
                .where(Sweep.id == old.id, Sweep.started_at == old.started_at, Sweep.finished_at.is_(None))
                .values(started_at=utcnow(), host=host)
            )
            if res.rowcount == 1:
                sweep_id = old.id
    session.commit()
    return sweep_id


def release_sweep(session: Session, sweep_id: int) -> None:
    """Drop an unfinished claim (its sweep failed), so that the next attempt may claim it."""
    from sqlalchemy import delete

    from .models import Sweep

    session.execute(delete(Sweep).where(Sweep.id == sweep_id, Sweep.finished_at.is_(None)))


def finish_sweep(
    session: Session, sweep_id: int, candidates: int, enqueued: int, deduplicated: int, run_id: int | None
) -> None:
    from .models import Sweep

    sweep = session.get(Sweep, sweep_id)
    if sweep is not None:
        sweep.candidates, sweep.enqueued, sweep.deduplicated, sweep.run_id = candidates, enqueued, deduplicated, run_id
        sweep.finished_at = utcnow()


def record_attempt(session: Session, task_id: str, model_id: str, backend: str, tier: str) -> int:
    """Count one more delivery of ``task_id`` (committed at once); returns the deliveries so far."""
    from .models import TaskAttempt

    table = TaskAttempt.__table__
    now = utcnow()
    stmt = _upsert_insert(session, table).values(
        task_id=task_id,
        model_id=model_id,
        backend=backend,
        tier=tier,
        attempts=1,
        first_at=now,
        last_at=now,
        gave_up=False,
    )
    stmt = stmt.on_conflict_do_update(
        index_elements=["task_id"], set_={"attempts": table.c.attempts + 1, "last_at": now}
    ).returning(table.c.attempts)
    attempts = int(session.execute(stmt).scalar() or 1)
    session.commit()
    return attempts


def note_attempt_error(session: Session, task_id: str, error: str, gave_up: bool = False) -> None:
    from .models import TaskAttempt

    row = session.get(TaskAttempt, task_id)
    if row is not None:
        row.last_error = error[-4000:]
        row.gave_up = row.gave_up or gave_up


def models_stored_by_task(session: Session, task_id: str) -> dict[str, str]:
    """Model id -> status of the rows this task already stored (a redelivered task skips them)."""
    return {m: st for m, st in session.execute(select(Result.model_id, Result.status).where(Result.task_id == task_id))}


def cached_plans(session: Session, model_ids: list[str], tier: str) -> dict[str, tuple[str, str | None]]:
    """Model id -> (sha, fingerprint) of the plans cached for ``tier``."""
    from .models import ModelPlan

    out: dict[str, tuple[str, str | None]] = {}
    for i in range(0, len(model_ids), CHUNK):
        part = model_ids[i : i + CHUNK]
        for p in session.scalars(select(ModelPlan).where(ModelPlan.tier == tier, ModelPlan.model_id.in_(part))):
            out[p.model_id] = (p.sha, p.fingerprint)
    return out


def store_plan(session: Session, model_id: str, tier: str, sha: str | None, fingerprint: str | None) -> None:
    from .models import ModelPlan

    table = ModelPlan.__table__
    values = dict(model_id=model_id, tier=tier, sha=sha or "", fingerprint=fingerprint, computed_at=utcnow())
    stmt = _upsert_insert(session, table).values(**values)
    stmt = stmt.on_conflict_do_update(
        index_elements=["model_id", "tier"], set_={k: values[k] for k in ("sha", "fingerprint", "computed_at")}
    )
    session.execute(stmt)


@dataclass
class PendingTask:
    """A task a run published that has no row yet: what it takes to publish it again."""

    task_id: str
    model_id: str
    queue: str
    args: list[Any]
    kwargs: dict[str, Any]
    attempted_at: dt.datetime | None  # the last delivery a worker started, if any


def record_run_tasks(session: Session, run_id: int, tasks: Iterable[tuple[str, str, str, list, dict]]) -> int:
    """Keep every (task id, model id, queue, args, kwargs) run ``run_id`` published; returns how many."""
    from .models import RunTask

    rows = [
        dict(task_id=t, run_id=run_id, model_id=m, queue=q, args=a, kwargs=k or {}, enqueued_at=utcnow(), published=1)
        for t, m, q, a, k in tasks
    ]
    for i in range(0, len(rows), 500):  # 8 columns a row: within SQLite's bound on variables
        stmt = _upsert_insert(session, RunTask.__table__).values(rows[i : i + 500])
        session.execute(stmt.on_conflict_do_nothing(index_elements=["task_id"]))
    session.commit()
    return len(rows)


def pending_run_tasks(session: Session, run_id: int) -> list[PendingTask]:
    """The tasks of run ``run_id`` with no stored row for their (first) model."""
    from .models import RunTask, TaskAttempt

    stored = select(Result.task_id).where(Result.run_id == run_id, Result.task_id.is_not(None))
    q = (
        select(RunTask, TaskAttempt.last_at)
        .outerjoin(TaskAttempt, TaskAttempt.task_id == RunTask.task_id)
        .where(RunTask.run_id == run_id, RunTask.task_id.not_in(stored))
        .order_by(RunTask.enqueued_at, RunTask.task_id)
    )
    return [
        PendingTask(t.task_id, t.model_id, t.queue, list(t.args or []), dict(t.kwargs or {}), last)
        for t, last in session.execute(q)
    ]


def note_republished(session: Session, task_ids: list[str]) -> None:
    from .models import RunTask

    for i in range(0, len(task_ids), CHUNK):
        session.query(RunTask).filter(RunTask.task_id.in_(task_ids[i : i + CHUNK])).update(
            {RunTask.published: RunTask.published + 1}, synchronize_session=False
        )
    session.commit()


def runs_with_pending_tasks(session: Session, since: dt.datetime) -> list[int]:
    """Runs that published a task since ``since`` that has no row yet."""
    from .models import RunTask

    stored = select(Result.task_id).where(Result.task_id.is_not(None), Result.started_at >= since)
    q = (
        select(RunTask.run_id)
        .where(RunTask.enqueued_at >= since, RunTask.task_id.not_in(stored))
        .distinct()
        .order_by(RunTask.run_id)
    )
    return list(session.scalars(q))


def store_bisection(session: Session, data: dict[str, Any]) -> Bisection:
    """Store one ``zoo bisect`` outcome (:class:`Bisection`'s columns, from its JSON)."""
    sig = data.get("bad_signature")
    b = Bisection(
        model_id=data["model_id"],
        backend=data["backend"],
        tier=data["tier"],
        package=data["package"],
        good=data["good"],
        bad=data["bad"],
        first_bad=data.get("first_bad"),
        last_good=data.get("last_good"),
        match=data.get("match", "status"),
        bad_status=data.get("bad_status"),
        bad_signature=sig[:300] if sig else None,
        env_base=data.get("env_base") or "",
        steps=data.get("steps") or [],
    )
    session.add(b)
    session.flush()
    return b
