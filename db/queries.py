"""Reads: results in the SPEC's shape, coverage as the SPEC defines it."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from zoo_runner.statuses import ALL_STATUSES, NO_VALID_REFERENCE, PASSING

from .models import Model, Result, Snapshot, SnapshotEntry
from .repository import latest_snapshot


def result_dict(r: Result) -> dict[str, Any]:
    return {
        "model_id": r.model_id,
        "revision": r.revision or None,
        "tier": r.tier,
        "backend": r.backend,
        "device": r.device,
        "dtype": r.dtype,
        "status": r.status,
        "reason": r.reason,
        "fingerprint": r.fingerprint,
        "library": r.library,
        "architecture": r.architecture,
        "task": r.task,
        "metrics": r.metrics or {},
        "fallback_ops": r.fallback_ops or [],
        "op_census": r.op_census or {},
        "error": r.error,
        "versions": r.versions or {},
        "repro": r.repro,
        "started_at": r.started_at.isoformat() if r.started_at else None,
        "duration_s": r.duration_s,
        "week": r.week,
    }


def latest_results(session: Session, model_id: str) -> list[Result]:
    """The latest result per (backend, tier) for one model."""
    rows = session.scalars(select(Result).where(Result.model_id == model_id).order_by(Result.started_at.desc(), Result.id.desc())).all()
    seen: set[tuple[str, str]] = set()
    out = []
    for r in rows:
        if (r.backend, r.tier) not in seen:
            seen.add((r.backend, r.tier))
            out.append(r)
    return out


def history(session: Session, model_id: str, limit: int = 500) -> list[Result]:
    return list(session.scalars(select(Result).where(Result.model_id == model_id).order_by(Result.started_at.desc(), Result.id.desc()).limit(limit)))


@dataclass
class Coverage:
    backend: str | None
    tier: str
    week: str | None
    snapshot_id: int | None
    catalog_models: int = 0
    catalog_downloads: int = 0
    attempted: int = 0
    attempted_downloads: int = 0
    valid_reference: int = 0
    valid_reference_downloads: int = 0
    passing: int = 0
    passing_downloads: int = 0
    strict: int = 0
    strict_downloads: int = 0
    status_counts: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def _ratio(a: int, b: int) -> float | None:
        return round(a / b, 6) if b else None

    @property
    def rates(self) -> dict[str, float | None]:
        r = self._ratio
        return {
            "functional": r(self.passing, self.valid_reference),
            "functional_weighted": r(self.passing_downloads, self.valid_reference_downloads),
            "strict_rate": r(self.strict, self.valid_reference),
            "strict_weighted": r(self.strict_downloads, self.valid_reference_downloads),
            "harness": r(self.valid_reference, self.attempted),
            "harness_weighted": r(self.valid_reference_downloads, self.attempted_downloads),
        }

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(self.rates)
        return d


def default_scope(session: Session, backend: str | None, tier: str | None, week: str | None) -> tuple[str | None, str, str | None]:
    """Fill an unspecified backend/tier/week from the newest result."""
    q = select(Result.backend, Result.tier, Result.week).order_by(Result.started_at.desc()).limit(1)
    if backend:
        q = q.where(Result.backend == backend)
    if tier:
        q = q.where(Result.tier == tier)
    if week:
        q = q.where(Result.week == week)
    row = session.execute(q).first()
    if row is None:
        return backend, tier or "tiny", week
    return backend or row[0], tier or row[1], week or row[2]


def coverage(session: Session, backend: str | None = None, tier: str | None = None, week: str | None = None, snapshot: Snapshot | None = None) -> Coverage:
    backend, tier, week = default_scope(session, backend, tier, week)
    snapshot = snapshot or latest_snapshot(session)
    cov = Coverage(backend=backend, tier=tier, week=week, snapshot_id=snapshot.id if snapshot else None)
    if snapshot is None:
        return cov
    cov.catalog_models, cov.catalog_downloads = snapshot.n_models, snapshot.total_downloads
    if backend is None or week is None:
        return cov
    # latest result per model in scope (one row per revision/harness version can exist)
    ranked = (
        select(
            Result.model_id,
            Result.status,
            func.row_number().over(partition_by=Result.model_id, order_by=(Result.started_at.desc(), Result.id.desc())).label("rn"),
        )
        .where(Result.backend == backend, Result.tier == tier, Result.week == week)
        .subquery()
    )
    q = (
        select(ranked.c.status, func.count(), func.coalesce(func.sum(SnapshotEntry.downloads), 0))
        .join(SnapshotEntry, (SnapshotEntry.model_id == ranked.c.model_id) & (SnapshotEntry.snapshot_id == snapshot.id))
        .where(ranked.c.rn == 1)
        .group_by(ranked.c.status)
    )
    counts = {s: 0 for s in ALL_STATUSES}
    for status, n, dl in session.execute(q):
        n, dl = int(n), int(dl)
        counts[status] = n
        cov.attempted += n
        cov.attempted_downloads += dl
        if status not in NO_VALID_REFERENCE:
            cov.valid_reference += n
            cov.valid_reference_downloads += dl
        if status in PASSING:
            cov.passing += n
            cov.passing_downloads += dl
        if status == "pass":
            cov.strict += n
            cov.strict_downloads += dl
    cov.status_counts = counts
    return cov


def model_with_latest(session: Session, limit: int = 200) -> list[tuple[Model, dict[str, Result]]]:
    """Catalog models (latest snapshot order) with their latest result per backend/tier."""
    snap = latest_snapshot(session)
    if snap is None:
        return []
    models = session.execute(
        select(Model, SnapshotEntry.downloads).join(SnapshotEntry, SnapshotEntry.model_id == Model.id).where(SnapshotEntry.snapshot_id == snap.id).order_by(SnapshotEntry.rank).limit(limit)
    ).all()
    ids = [m.id for m, _ in models]
    latest: dict[str, dict[str, Result]] = {i: {} for i in ids}
    if ids:
        for r in session.scalars(select(Result).where(Result.model_id.in_(ids)).order_by(Result.started_at.asc(), Result.id.asc())):
            latest[r.model_id][f"{r.backend}/{r.tier}"] = r
    return [(m, latest[m.id]) for m, _ in models]
