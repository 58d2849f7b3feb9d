"""/reports: the weekly coverage report, as stored by Celery beat (or built on demand)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, HTTPException, Path
from fastapi.responses import PlainTextResponse
from sqlalchemy import select

from api.deps import WEEK_PATTERN, Format, SessionDep, SnapshotDep, backend_query, check_week
from api.pagination import csv_response
from dashboards.report import render_markdown
from db.models import Report
from services.reports import find_or_build

router = APIRouter(tags=["reports"])


@router.get("/reports", responses={200: {"content": {"text/csv": {}}}}, summary="Stored weekly reports")
def list_reports(session: SessionDep, format: Format = "json") -> Any:
    rows = session.execute(
        select(Report.week, Report.backend, Report.tier, Report.created_at).order_by(
            Report.week.desc(), Report.backend, Report.tier
        )
    ).all()
    items = [
        {"week": w, "backend": b or None, "tier": t, "created_at": c.isoformat() if c else None} for w, b, t, c in rows
    ]
    if format == "csv":
        return csv_response(items, "reports.csv")
    return {"items": items, "total": len(items)}


@router.get(
    "/reports/{week}",
    responses={200: {"content": {"text/markdown": {}}}, 404: {"description": "no report and no results for this week"}},
    summary="The weekly coverage report",
)
def get_report(
    session: SessionDep,
    snapshot: SnapshotDep,
    week: str = Path(pattern=WEEK_PATTERN),
    backend: str | None = backend_query(
        "the report of this backend (default: the stored report of the week, else the newest result's backend)"
    ),
    tier: Literal["census", "tiny", "full"] | None = None,
    format: Literal["json", "md"] = "json",
) -> Any:
    """The report as stored when it was generated (`stored: true`), else built now from the
    week's results. Its sections name the API queries behind their numbers (`queries`)."""
    check_week(week)
    rep = find_or_build(session, week, backend or None, tier, snapshot)
    if rep is None:
        raise HTTPException(404, detail=f"no report and no results for {week}")
    if format == "md":
        return PlainTextResponse(render_markdown(rep), media_type="text/markdown")
    return rep
