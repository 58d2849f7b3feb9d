"""Typed dependencies shared by the routes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from fastapi import Depends, Query
from fastapi.exceptions import RequestValidationError
from sqlalchemy.orm import Session

from api.schemas import Precision
from db.models import Snapshot
from db.session import get_session
from db.weeks import WEEK_PATTERN as WEEK_PATTERN  # re-exported for the routes
from db.weeks import check_week as check_week  # re-exported for the routes
from services import inputs

SessionDep = Annotated[Session, Depends(get_session)]


BACKEND_FORMAT = "backend spec DEVICE[+COMPILER][@DTYPE], URL-encoded (`cpu%2Binductor`)"


def check_backend(session: Session, backend: str | None) -> str | None:
    """``backend`` if it parses and names a device and compile backend torch or Zoo's plugins know,
    or results are stored under it (a backend this host cannot run is still a backend); else 422
    saying why (a bare ``+`` in a query string arrives as a space: the message says so)."""
    try:
        return inputs.check_backend(session, backend)
    except inputs.UnknownBackend as exc:
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("query", "backend"), "msg": str(exc), "input": backend}]
        ) from None


MAX_ID = 2**31 - 1  # ids are 32-bit integers in the database
SNAPSHOT_QUERY = (
    "the catalog snapshot whose downloads weight the numbers (default: the newest one holding models with results)"
)


def check_snapshot(session: Session, snapshot: int | None) -> int | None:
    """``snapshot`` if a catalog snapshot has that id, else 422."""
    if snapshot is not None and session.get(Snapshot, snapshot) is None:
        raise RequestValidationError(
            [
                {
                    "type": "value_error",
                    "loc": ("query", "snapshot"),
                    "msg": f"no catalog snapshot {snapshot}",
                    "input": snapshot,
                }
            ]
        )
    return snapshot


def snapshot_query(
    session: SessionDep, snapshot: int | None = Query(None, ge=1, le=MAX_ID, description=SNAPSHOT_QUERY)
) -> int | None:
    return check_snapshot(session, snapshot)


SnapshotDep = Annotated[int | None, Depends(snapshot_query)]


def backend_query(description: str) -> Any:
    """A ``backend`` query parameter checked by :func:`check_backend` (use as its default)."""

    def dep(
        session: SessionDep,
        backend: str | None = Query(None, max_length=128, description=f"{description}; {BACKEND_FORMAT}"),
    ) -> str | None:
        return check_backend(session, backend)

    return Depends(dep)


@dataclass
class Scope:
    backend: str | None
    tier: str | None
    week: str | None
    precision: str | None = None  # None: each backend's declared precision
    snapshot: int | None = None  # None: the newest catalog snapshot holding models with results


PRECISION_QUERY = "only results judged at this precision (default: each backend's declared compute precision)"


def scope(
    session: SessionDep,
    backend: str | None = Query(
        None, max_length=128, description=f"{BACKEND_FORMAT} (default: that of the newest result)"
    ),
    tier: Literal["census", "tiny", "full"] | None = Query(
        None, description="tier (default: that of the newest result)"
    ),
    week: str | None = Query(
        None, pattern=WEEK_PATTERN, description="ISO week YYYY-Www (default: the newest with results)"
    ),
    precision: Precision | None = Query(None, description=PRECISION_QUERY),
    snapshot: int | None = Query(None, ge=1, le=MAX_ID, description=SNAPSHOT_QUERY),
) -> Scope:
    return Scope(check_backend(session, backend), tier, check_week(week), precision, check_snapshot(session, snapshot))


ScopeDep = Annotated[Scope, Depends(scope)]
Format = Literal["json", "csv"]
