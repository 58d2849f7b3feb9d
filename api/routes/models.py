"""/models: the catalog with latest statuses, one model's detail and its history."""

from __future__ import annotations

from dataclasses import asdict
from typing import Literal

from fastapi import APIRouter, HTTPException, Path, Query

from api.deps import SessionDep, backend_query
from api.pagination import csv_response, decode_cursor, encode_cursor
from api.schemas import ModelDetail, ModelPage, ModelSummary, ResultOut, ResultPage
from db import queries
from db.models import Model, Result
from services import model_list

router = APIRouter(tags=["models"])


@router.get(
    "/models",
    response_model=ModelPage,
    responses={200: {"content": {"text/csv": {}}}, 400: {"description": "invalid cursor"}},
)
def list_models(
    session: SessionDep,
    search: str | None = Query(None, max_length=200, description="substring of the model id"),
    task: str | None = Query(None, max_length=128),
    library: str | None = Query(None, max_length=64),
    status: str | None = Query(None, max_length=32, description="latest status on any backend"),
    backend: str | None = backend_query("with status: on this backend"),
    sort: str = Query("-downloads", pattern=r"^-?(downloads|model_id|task|library)$"),
    limit: int = Query(50, ge=1, le=1000),
    cursor: str | None = Query(None, max_length=200),
    format: Literal["json", "csv"] = "json",
):
    offset = decode_cursor(cursor)
    page = model_list.list_models(
        session,
        search=search,
        task=task,
        library=library,
        status=status,
        backend=backend,
        sort=sort,
        limit=limit,
        offset=offset,
    )
    items = [ModelSummary(**asdict(row)) for row in page.items]
    nxt = encode_cursor(offset + limit) if page.more else None
    if format == "csv":
        return csv_response([i.model_dump() for i in items], "models.csv")
    return ModelPage(items=items, total=page.total, next_cursor=nxt)


@router.get(
    "/models/{model_id:path}/results",
    response_model=ResultPage,
    responses={200: {"content": {"text/csv": {}}}, 404: {"description": "unknown model"}},
)
def model_results(
    session: SessionDep, model_id: str, limit: int = Query(200, ge=1, le=2000), format: Literal["json", "csv"] = "json"
):
    if session.get(Model, model_id) is None and not queries.history(session, model_id, 1):
        raise HTTPException(404, detail=f"unknown model {model_id}")
    rows = [{"id": r.id, **queries.result_dict(r)} for r in queries.history(session, model_id, limit)]
    if format == "csv":
        return csv_response(rows, "results.csv")
    return ResultPage(items=[ResultOut(**r) for r in rows], total=len(rows))


@router.get("/results/{result_id}", response_model=ResultOut, responses={404: {"description": "no such result"}})
def result_by_id(session: SessionDep, result_id: int = Path(..., ge=1, le=2**31 - 1)) -> ResultOut:
    """One stored result, as the SPEC shapes it (the links of `GET /api/v1/compare` point here)."""

    r = session.get(Result, result_id)
    if r is None:
        raise HTTPException(404, detail=f"no result {result_id}")
    return ResultOut(id=r.id, **queries.result_dict(r))


@router.get("/models/{model_id:path}", response_model=ModelDetail, responses={404: {"description": "unknown model"}})
def model_detail(session: SessionDep, model_id: str) -> ModelDetail:
    m = session.get(Model, model_id)
    latest = queries.latest_results(session, model_id)
    if m is None and not latest:
        raise HTTPException(404, detail=f"unknown model {model_id}")
    out = [ResultOut(id=r.id, **queries.result_dict(r)) for r in latest]
    return ModelDetail(
        model_id=model_id,
        downloads=(m.downloads if m else 0) or 0,
        library=m.library if m else (latest[0].library if latest else None),
        model_type=m.model_type if m else None,
        task=m.task if m else (latest[0].task if latest else None),
        custom_code=bool(m.custom_code) if m else False,
        tags=(m.tags or []) if m else [],
        sha=m.sha if m else None,
        parameters=m.parameters if m else None,
        latest_status={f"{r.backend}/{r.tier}": r.status for r in latest if r.precision_source != "flag" and not r.env},
        latest=out,
        bisections=queries.bisections(session, [model_id]),
    )
