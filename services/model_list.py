"""The catalog's models, filtered, sorted and paged, each with its latest status per backend and
tier: the one listing behind ``GET /api/v1/models`` and the dashboard's model tables."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from db import queries
from db.models import Model, Result

SORTS = {"downloads": Model.downloads, "model_id": Model.id, "task": Model.task, "library": Model.library}


@dataclass
class ModelRow:
    """One model of a page (the API's ``ModelSummary``)."""

    model_id: str
    downloads: int
    library: str | None = None
    model_type: str | None = None
    task: str | None = None
    custom_code: bool = False
    latest_status: dict[str, str] = field(default_factory=dict)  # backend/tier -> latest status


@dataclass
class ModelListing:
    """A page of models: ``items`` from ``offset``, of ``total`` matching; ``more`` when a next page exists."""

    items: list[ModelRow]
    total: int
    offset: int
    limit: int

    @property
    def more(self) -> bool:
        return self.offset + self.limit < self.total


def latest_status(session: Session, ids: list[str]) -> dict[str, dict[str, str]]:
    """Model id -> {``backend/tier``: status of its newest result at the backend's declared precision}."""
    out: dict[str, dict[str, str]] = {i: {} for i in ids}
    if not ids:
        return out
    q = (
        select(Result.model_id, Result.backend, Result.tier, Result.status)
        .where(Result.model_id.in_(ids), queries.precision_scope())
        .order_by(Result.started_at.asc(), Result.id.asc())
    )
    for mid, backend, tier, status in session.execute(q):
        out[mid][f"{backend}/{tier}"] = status
    return out


def list_models(
    session: Session,
    search: str | None = None,
    task: str | None = None,
    library: str | None = None,
    status: str | None = None,
    backend: str | None = None,
    sort: str = "-downloads",
    limit: int = 50,
    offset: int = 0,
) -> ModelListing:
    """Models whose id contains ``search``, of ``task`` and ``library``, with a result of ``status``
    (on ``backend`` if given), sorted by ``sort`` (a key of :data:`SORTS`, ``-`` first for descending,
    then by id), ``limit`` of them from ``offset``."""
    q = select(Model)
    if search:
        q = q.where(Model.id.ilike(f"%{search}%"))
    if task:
        q = q.where(Model.task == task)
    if library:
        q = q.where(Model.library == library)
    if status:
        sub = select(Result.model_id).where(Result.status == status, Result.env == "")
        if backend:
            sub = sub.where(Result.backend == backend)
        q = q.where(Model.id.in_(sub))
    total = session.scalar(select(func.count()).select_from(q.subquery())) or 0
    col = SORTS[sort.lstrip("-")]
    q = q.order_by(col.desc() if sort.startswith("-") else col.asc(), Model.id.asc())
    rows = list(session.scalars(q.offset(offset).limit(limit)))
    latest = latest_status(session, [m.id for m in rows])
    items = [
        ModelRow(
            model_id=m.id,
            downloads=m.downloads or 0,
            library=m.library,
            model_type=m.model_type,
            task=m.task,
            custom_code=m.custom_code,
            latest_status=latest[m.id],
        )
        for m in rows
    ]
    return ModelListing(items=items, total=total, offset=offset, limit=limit)
