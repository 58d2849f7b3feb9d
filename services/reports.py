"""The weekly coverage report's data: headline numbers with denominators and week-over-week
deltas, newly passing and newly failing models (with the first failing versions), top op gaps with
the downloads they would unlock, failure clusters and the slowest compiles.

Every number comes from a query the API exposes; ``rep["queries"]`` names them. Rendering (Markdown,
HTML) is ``dashboards.report``'s; storing takes the Markdown renderer as ``render``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlencode

from sqlalchemy import select
from sqlalchemy.orm import Session

from db import queries
from db.models import Report, Result
from db.session import session_scope
from db.weeks import iso_week, previous_week
from services.inputs import check_backend, check_week


@contextmanager
def _session(session: Session | None = None) -> Iterator[Session]:
    """``session`` if given, else a transaction of its own."""
    if session is not None:
        yield session
    else:
        with session_scope() as s:
            yield s


def api_url(path: str, **params: Any) -> str:
    """An API link with its query values URL-encoded (``cpu+inductor`` is ``cpu%2Binductor``: a bare
    ``+`` would read as a space)."""
    q = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    return f"/api/v1{path}" + (f"?{q}" if q else "")


def build_report(
    week: str | None = None,
    backend: str | None = None,
    tier: str | None = None,
    session: Session | None = None,
    top: int = 10,
    snapshot_id: int | None = None,
) -> dict[str, Any]:
    """The week's report for ``backend`` and ``tier`` (defaults: the newest results'), weighted by
    catalog snapshot ``snapshot_id`` (default: the newest one holding models with results)."""
    with _session(session) as s:
        check_week(week)  # a week off the calendar or a backend typo: one line, never an empty report
        check_backend(s, backend)
        backend, tier, week_found = queries.default_scope(s, backend, tier, week)
        week = week or week_found or iso_week()
        prev_week = previous_week(week)
        snap = dict(snapshot_id=snapshot_id)
        cov = queries.cached_coverage(s, backend=backend, tier=tier, week=week, **snap)
        prev = queries.cached_coverage(s, backend=backend, tier=tier, week=prev_week, **snap)
        history = (
            queries.coverage_history(s, backend=backend, tier=tier, weeks=12, until=week, **snap) if backend else []
        )
        regressed = queries.transitions(
            s, backend=backend, tier=tier, week=week, since=prev_week, direction="regressed", limit=50, **snap
        )
        fixed = queries.transitions(
            s, backend=backend, tier=tier, week=week, since=prev_week, direction="fixed", limit=50, **snap
        )
        gaps = queries.op_gaps(s, backend=backend, tier=tier, week=week, limit=top, **snap)
        clusters = queries.failure_clusters(s, backend=backend, tier=tier, week=week, limit=3 * top, **snap)
        slow = queries.slowest_compiles(s, backend=backend, tier=tier, week=week, limit=top)
        failing = (
            queries.failing_models(s, backend=backend, tier=tier, week=week, limit=100, **snap)
            if backend
            else {"items": [], "total": 0}
        )
        precisions = queries.precision_summary(s, week)
        # the API links name the snapshot only when one was asked for (the API's default is the same)
        link = dict(snapshot=snapshot_id)
        scope = dict(backend=backend, tier=tier, week=week, **link)
        return {
            "week": week,
            "backend": backend,
            "tier": tier,
            "previous_week": prev_week,
            "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "coverage": cov.to_dict(),
            "previous": prev.to_dict() if prev.attempted else None,
            "history": [h.to_dict() for h in history],
            "newly_failing": regressed,
            "newly_passing": fixed,
            "op_gaps": gaps,
            "failure_clusters": clusters,
            "slowest_compiles": slow,
            "failing": failing["items"],
            "failing_total": failing["total"],
            "failing_backend_total": failing.get("backend_total", failing["total"]),
            "failing_zoo_total": failing.get("zoo_total", 0),
            "precision": precisions,
            "precision_lines": [queries.precision_line(p) for p in precisions],
            "queries": {
                "headline": api_url("/coverage", **scope),
                "previous": api_url("/coverage", backend=backend, tier=tier, week=prev_week, **link),
                "history": api_url("/coverage/history", backend=backend, tier=tier, until=week, weeks=12, **link),
                "newly_failing": api_url("/regressions", **scope, since=prev_week),
                "newly_passing": api_url("/regressions", **scope, since=prev_week, direction="fixed"),
                "op_gaps": api_url("/ops/gaps", **scope),
                "failure_clusters": api_url("/failures", **scope),
                "slowest_compiles": api_url("/models", backend=backend),
                "failing": api_url("/models", status="<status>", backend=backend),
                "precision": api_url("/backends", week=week),
            },
        }


def find_or_build(
    session: Session, week: str, backend: str | None, tier: str | None, snapshot_id: int | None = None
) -> dict[str, Any] | None:
    """The stored report of the week (of that backend/tier if given), else one built now from the
    results (always, weighted by it, when a catalog snapshot is named); None when the week has neither.
    ``stored`` says which."""
    q = select(Report).where(Report.week == week)
    if backend:
        q = q.where(Report.backend == backend)
    if tier:
        q = q.where(Report.tier == tier)
    row = session.scalars(q.order_by(Report.created_at.desc())).first() if snapshot_id is None else None
    if row is not None:
        return {**row.data, "stored": True}
    has = select(Result.id).where(Result.week == week, Result.env == "")
    if backend:
        has = has.where(Result.backend == backend)
    if tier:
        has = has.where(Result.tier == tier)
    if session.execute(has.limit(1)).first() is None:
        return None
    return {
        **build_report(week=week, backend=backend, tier=tier, session=session, snapshot_id=snapshot_id),
        "stored": False,
    }


def store_weekly_report(
    week: str | None = None,
    backend: str | None = None,
    tier: str | None = None,
    *,
    render: Callable[[dict[str, Any]], str],
) -> str:
    """Build and store the week's report (default: the newest week with results) for ``backend``
    and ``tier``, or for every backend and tier with results that week, with its Markdown
    (``render(report)``); returns the week."""
    with session_scope() as s:
        week = week or queries.newest_week(s) or iso_week()
        pairs = [(backend, tier)] if backend else (queries.scopes(s, week) or [(None, tier)])
    for b, t in pairs:
        rep = build_report(week, b, t)
        with session_scope() as s:
            row = s.scalars(
                select(Report).filter_by(week=rep["week"], backend=rep["backend"] or "", tier=rep["tier"])
            ).first()
            if row is None:
                row = Report(week=rep["week"], backend=rep["backend"] or "", tier=rep["tier"])
                s.add(row)
            row.data, row.markdown = rep, render(rep)
    return week
