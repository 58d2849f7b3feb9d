"""HTML pages served by `zoo serve`: overview, model, report. Data comes from the same queries as
the API, so every number on a page has an API call behind it (linked on the page)."""
from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, select_autoescape
from sqlalchemy import select

from api.deps import SessionDep
from db import queries
from db.models import Model, Report

HERE = Path(__file__).parent
templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


templates.globals.update(pct=pct)
router = APIRouter(include_in_schema=False)


def _render(name: str, **ctx) -> HTMLResponse:
    return HTMLResponse(templates.get_template(name).render(**ctx))


@router.get("/", response_class=HTMLResponse)
def overview(session: SessionDep, backend: str | None = None, tier: str | None = None) -> HTMLResponse:
    cov = queries.coverage(session, backend=backend, tier=tier)
    rows = queries.model_with_latest(session, limit=500)
    keys = sorted({k for _, latest in rows for k in latest})
    return _render("overview.html", cov=cov, rates=cov.rates, rows=rows, keys=keys)


@router.get("/models/{model_id:path}", response_class=HTMLResponse)
def model_page(session: SessionDep, model_id: str) -> HTMLResponse:
    m = session.get(Model, model_id)
    latest = queries.latest_results(session, model_id)
    if m is None and not latest:
        raise HTTPException(404, detail=f"unknown model {model_id}")
    hist = queries.history(session, model_id, 200)
    return _render("model.html", model=m, model_id=model_id, latest=latest, history=hist)


@router.get("/reports/{week}", response_class=HTMLResponse)
def report_page(session: SessionDep, week: str) -> HTMLResponse:
    from .report import _delta, _pct, build_report

    row = session.scalars(select(Report).where(Report.week == week).order_by(Report.created_at.desc())).first()
    rep = row.data if row else build_report(week=week)
    return _render("report.html", rep=rep, pct=_pct, delta=_delta)
