"""Typed dependencies shared by the routes."""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Annotated, Iterator, Literal

from fastapi import Depends, HTTPException, Query
from sqlalchemy.orm import Session

from db.session import session_scope

WEEK_PATTERN = r"^\d{4}-W\d{2}$"


def get_session() -> Iterator[Session]:
    with session_scope() as s:
        yield s


SessionDep = Annotated[Session, Depends(get_session)]


def check_week(week: str | None) -> str | None:
    """An ISO week ``YYYY-Www`` that exists (W53 only in long years), else 422."""
    if week is None:
        return None
    try:
        year, w = week.split("-W")
        dt.date.fromisocalendar(int(year), int(w), 1)
    except ValueError:
        raise HTTPException(422, detail=f"not an ISO week: {week!r} (expected YYYY-Www)")
    return week


@dataclass
class Scope:
    backend: str | None
    tier: str | None
    week: str | None


def scope(
    backend: str | None = Query(None, max_length=128, description="backend spec (default: that of the newest result)"),
    tier: Literal["census", "tiny", "full"] | None = Query(None, description="tier (default: that of the newest result)"),
    week: str | None = Query(None, pattern=WEEK_PATTERN, description="ISO week YYYY-Www (default: the newest with results)"),
) -> Scope:
    return Scope(backend or None, tier, check_week(week))


ScopeDep = Annotated[Scope, Depends(scope)]
Format = Literal["json", "csv"]
