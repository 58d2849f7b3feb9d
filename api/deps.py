"""Typed dependencies shared by the routes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Iterator, Literal

from fastapi import Depends, Query
from sqlalchemy.orm import Session

from api.schemas import Precision
from db.session import session_scope

WEEK_PATTERN = r"^[1-9][0-9]{3}-W(0[1-9]|[1-4][0-9]|5[0-3])$"  # YYYY-Www, W01..W53


def get_session() -> Iterator[Session]:
    with session_scope() as s:
        yield s


SessionDep = Annotated[Session, Depends(get_session)]


def check_week(week: str | None) -> str | None:
    """A week that matched WEEK_PATTERN (so FastAPI answered 422 otherwise). W53 of a 52-week
    year is accepted: it holds no results, like any week without runs."""
    return week or None


@dataclass
class Scope:
    backend: str | None
    tier: str | None
    week: str | None
    precision: str | None = None  # None: each backend's declared precision


PRECISION_QUERY = "only results judged at this precision (default: each backend's declared compute precision)"


async def scope(
    backend: str | None = Query(None, max_length=128, description="backend spec (default: that of the newest result)"),
    tier: Literal["census", "tiny", "full"] | None = Query(None, description="tier (default: that of the newest result)"),
    week: str | None = Query(None, pattern=WEEK_PATTERN, description="ISO week YYYY-Www (default: the newest with results)"),
    precision: Precision | None = Query(None, description=PRECISION_QUERY),
) -> Scope:
    return Scope(backend or None, tier, check_week(week), precision)


ScopeDep = Annotated[Scope, Depends(scope)]
Format = Literal["json", "csv"]
