"""/coverage, /coverage/history, /backends: functional, strict and harness coverage by count and
by downloads, with their denominators (numerators and denominators are fields of every row)."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, Query

from api.deps import PRECISION_QUERY, WEEK_PATTERN, Format, ScopeDep, SessionDep, SnapshotDep, backend_query, check_week
from api.pagination import csv_response
from api.schemas import (
    BackendsOut,
    CommonTier,
    CoverageGroup,
    CoverageGrouped,
    CoverageHistory,
    CoverageOut,
    Precision,
    PrecisionRow,
)
from db import queries

router = APIRouter(tags=["coverage"])
CSV = {200: {"content": {"text/csv": {}}}}


@router.get(
    "/coverage", response_model=CoverageGrouped, responses=CSV, summary="Coverage of one backend, tier and week"
)
def coverage(
    session: SessionDep,
    scope: ScopeDep,
    group_by: Literal["task", "library", "architecture"] | None = Query(
        None, description="also split the scope by the results' task, library or architecture"
    ),
    format: Format = "json",
):
    """Over the latest result per model in the scope, weighted by the downloads of catalog snapshot
    `snapshot` (default: the newest one holding models with results): **functional** = (pass +
    pass_with_fallback) / valid reference, **strict** = pass / valid reference, **harness** = valid
    reference / attempted; each by count and by downloads,
    with numerators and denominators. By default each backend is judged at its declared compute
    precision (`precision: declared`); `precision=` counts only the results judged at that one
    (a `--precision` run, or a backend that declares it)."""
    cov = queries.cached_coverage(
        session,
        backend=scope.backend,
        tier=scope.tier,
        week=scope.week,
        precision=scope.precision,
        snapshot_id=scope.snapshot,
    )
    out = CoverageGrouped(**cov.to_dict(), group_by=group_by)
    if group_by:
        out.groups = [
            CoverageGroup(**c.to_dict(), group=g)
            for g, c in queries.coverage_grouped(
                session,
                group_by,
                backend=cov.backend,
                tier=cov.tier,
                week=cov.week,
                precision=scope.precision,
                snapshot_id=scope.snapshot,
            )
        ]
    if format == "csv":
        if group_by:
            return csv_response([{"group_by": group_by, **g.model_dump()} for g in out.groups or []], "coverage.csv")
        return csv_response([out.model_dump(exclude={"group_by", "groups"})], "coverage.csv")
    return out


@router.get(
    "/coverage/history",
    response_model=CoverageHistory,
    responses=CSV,
    summary="Coverage per ISO week and per backend/tier",
)
def coverage_history(
    session: SessionDep,
    snapshot: SnapshotDep,
    backend: str | None = backend_query("one backend (default: all)"),
    tier: Literal["census", "tiny", "full"] | None = Query(None, description="one tier (default: all)"),
    weeks: int = Query(12, ge=1, le=104, description="how many weeks back from `until`"),
    until: str | None = Query(None, pattern=WEEK_PATTERN, description="last week (default: the newest with results)"),
    precision: Precision | None = Query(None, description=PRECISION_QUERY),
    format: Format = "json",
):
    """One point per week and (backend, tier): the same numbers as `GET /coverage` for that scope
    (weights: the downloads of `snapshot`, by default the newest catalog snapshot holding models
    with results)."""
    items = [
        CoverageOut(**c.to_dict())
        for c in queries.coverage_history(
            session,
            backend=backend or None,
            tier=tier,
            weeks=weeks,
            until=check_week(until),
            precision=precision,
            snapshot_id=snapshot,
        )
    ]
    if format == "csv":
        return csv_response([i.model_dump() for i in items], "coverage_history.csv")
    return CoverageHistory(backend=backend, tier=tier, weeks=weeks, items=items)


@router.get(
    "/backends", response_model=BackendsOut, responses=CSV, summary="Every backend and tier of a week, side by side"
)
def backends(session: SessionDep, week: str | None = Query(None, pattern=WEEK_PATTERN), format: Format = "json"):
    """`GET /coverage` for each (backend, tier) with results in the week (default: the newest), at
    each backend's declared precision; `common`: the backends of each tier again over the models they
    all have a result for (the intersection, with its size), the only fair side-by-side;
    `precisions` says what each backend's rows were judged at
    (declared, or asked for with `--precision`) and how many would also meet the fp32 budget."""
    week = check_week(week) or queries.newest_week(session)
    pairs = queries.scopes(session, week)
    items = [CoverageOut(**queries.cached_coverage(session, backend=b, tier=t, week=week).to_dict()) for b, t in pairs]
    wk = items[0].week if items else week
    if format == "csv":
        return csv_response([i.model_dump() for i in items], "backends.csv")
    common = queries.common_coverage(session, wk, tuple(pairs)) if wk else {"tiers": []}
    return BackendsOut(
        week=wk,
        items=items,
        common=[CommonTier(**t) for t in common["tiers"]],
        precisions=[PrecisionRow(**p) for p in queries.precision_summary(session, wk)] if wk else [],
    )
