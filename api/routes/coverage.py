"""/coverage: functional, strict and harness coverage by count and by downloads."""
from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from api.deps import SessionDep
from api.pagination import csv_response
from api.schemas import CoverageOut
from db import queries

router = APIRouter(tags=["coverage"])


@router.get("/coverage", response_model=CoverageOut, responses={200: {"content": {"text/csv": {}}}})
def coverage(
    session: SessionDep,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
    week: str | None = Query(None, pattern=r"^\d{4}-W\d{2}$"),
    format: Literal["json", "csv"] = "json",
):
    out = CoverageOut(**queries.coverage(session, backend=backend, tier=tier, week=week).to_dict())
    if format == "csv":
        return csv_response([out.model_dump()], "coverage.csv")
    return out
