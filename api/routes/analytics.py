"""/ops/gaps, /failures, /regressions, /compare: what to fix next, what broke, since which versions,
and what a release changed."""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter, HTTPException, Query
from fastapi.responses import FileResponse

from api.deps import WEEK_PATTERN, Format, ScopeDep, SessionDep, check_backend, check_week
from api.pagination import csv_response, decode_cursor, encode_cursor
from api.schemas import ComparePage, FailurePage, OpGapPage, TransitionPage
from db import queries
from services.triage import attach_triage, triage_file
from zoo_runner.statuses import ALL_STATUSES, PASSING

router = APIRouter()
CSV = {200: {"content": {"text/csv": {}}}}
FAILING = tuple(s for s in ALL_STATUSES if s not in PASSING)


@router.get(
    "/ops/gaps",
    response_model=OpGapPage,
    responses=CSV,
    tags=["ops"],
    summary="Ops ranked by the downloads they would unlock",
)
def op_gaps(session: SessionDep, scope: ScopeDep, limit: int = Query(50, ge=1, le=1000), format: Format = "json"):
    """Over the latest result per model in the scope. A model's **only blocker** is op X when
    either

    - its status is `pass_with_fallback` and its `fallback_ops` are exactly [X] (lowering X makes
      it `pass`: counted in `strict_*`), or
    - its status is `compile_error` or `runtime_error` and its error message names exactly one
      distinct ATen op, X (`aten::X` or `aten.X`; supporting X lets it run: counted in
      `functional_*`).

    Op names are compared without their overload (`aten::add.Tensor` is `aten::add`). Ops are
    ranked by `unlocked_downloads` (those models' downloads in catalog snapshot `snapshot`, by
    default the newest one holding models with results); `affected_*` counts every model whose
    fallback ops or error name the op at all."""
    data = queries.op_gaps(
        session,
        backend=scope.backend,
        tier=scope.tier,
        week=scope.week,
        limit=limit,
        precision=scope.precision,
        snapshot_id=scope.snapshot,
    )
    if format == "csv":
        return csv_response(
            [
                {
                    "backend": data["backend"],
                    "tier": data["tier"],
                    "week": data["week"],
                    **{k: v for k, v in i.items() if k != "example_models"},
                    "example_models": " ".join(e["model_id"] for e in i["example_models"]),
                }
                for i in data["items"]
            ],
            "op_gaps.csv",
        )
    return OpGapPage(**data)


@router.get(
    "/failures",
    response_model=FailurePage,
    responses=CSV,
    tags=["failures"],
    summary="Failing models grouped by error signature",
)
def failures(
    session: SessionDep,
    scope: ScopeDep,
    status: Literal[FAILING] | None = Query(None, description="only this failing status"),  # type: ignore[valid-type]
    limit: int = Query(50, ge=1, le=1000),
    format: Format = "json",
):
    """Latest results of the scope whose status is neither `pass` nor `pass_with_fallback`,
    grouped by `error.signature` (by status and reason where a result has no error), with counts,
    the downloads they hold (weighting catalog snapshot) and up to five example models by downloads."""
    data = attach_triage(
        queries.failure_clusters(
            session,
            backend=scope.backend,
            tier=scope.tier,
            week=scope.week,
            status=status,
            limit=limit,
            precision=scope.precision,
            snapshot_id=scope.snapshot,
        )
    )
    if format == "csv":
        return csv_response(
            [
                {
                    "backend": data["backend"],
                    "tier": data["tier"],
                    "week": data["week"],
                    **{k: v for k, v in i.items() if k != "example_models"},
                    "example_models": " ".join(e["model_id"] for e in i["example_models"]),
                }
                for i in data["items"]
            ],
            "failures.csv",
        )
    return FailurePage(**data)


@router.get(
    "/regressions",
    response_model=TransitionPage,
    responses=CSV,
    tags=["failures"],
    summary="Passed last week, fails now (or the reverse)",
)
def regressions(
    session: SessionDep,
    scope: ScopeDep,
    since: str | None = Query(
        None, pattern=WEEK_PATTERN, description="compare with this week (default: the week before `week`)"
    ),
    direction: Literal["regressed", "fixed"] = Query(
        "regressed", description="regressed: passing then, failing now; fixed: the reverse"
    ),
    limit: int = Query(200, ge=1, le=5000),
    format: Format = "json",
):
    """Models whose latest result in `since` was passing (pass / pass_with_fallback) and whose
    latest in `week` is not (or the reverse with `direction=fixed`), with the versions of the
    first failing result, those of the last passing one, and what changed between them."""
    data = queries.transitions(
        session,
        backend=scope.backend,
        tier=scope.tier,
        week=scope.week,
        since=check_week(since),
        direction=direction,
        limit=limit,
        precision=scope.precision,
        snapshot_id=scope.snapshot,
    )
    if format == "csv":
        return csv_response(
            [
                {"backend": data["backend"], "tier": data["tier"], "week": data["week"], "since": data["since"], **i}
                for i in data["items"]
            ],
            "regressions.csv",
        )
    return TransitionPage(**data)


TRIAGE_TYPES = {
    "repro.py": "text/x-python",
    "issue.md": "text/markdown",
    "repro.safetensors": "application/octet-stream",
}


@router.get(
    "/triage/{backend}/{cluster}/{name}",
    tags=["failures"],
    summary="A triaged cluster's repro.py or issue.md",
    response_class=FileResponse,
    responses={
        200: {"content": {t: {} for t in TRIAGE_TYPES.values()}},
        404: {"description": "no such file triaged for that cluster"},
    },
)
def triage_files(backend: str, cluster: str, name: str):
    """What `zoo triage --clusters` wrote for a cluster of the backend's failures: `repro.py` (a
    standalone minimal repro: torch and the backend only), its `repro.safetensors`, and `issue.md`
    (the draft issue). `GET /failures` links them from each triaged cluster's `triage`."""
    path = triage_file(backend, cluster, name)
    if path is None:
        raise HTTPException(404, f"no {name} triaged for cluster {cluster[:12]} of {backend[:64]}")
    return FileResponse(path, media_type=TRIAGE_TYPES[name], filename=name)


ENV_NAME = r"^[a-z0-9][a-z0-9._-]{0,62}$"


@router.get(
    "/compare",
    response_model=ComparePage,
    responses={
        **CSV,
        400: {"description": "invalid cursor"},
        404: {"description": "an env with no stored rows"},
        422: {"description": "an unknown backend"},
    },
    tags=["failures"],
    summary="Two envs (releases) on the same models: fixed, broken, still failing, numerics moved",
)
def compare(
    session: SessionDep,
    env_a: str = Query(..., pattern=ENV_NAME, description="an env (`zoo env`), or `default`: Zoo's own interpreter"),
    env_b: str = Query(..., pattern=ENV_NAME, description="the env compared with env_a"),
    backend: str | None = Query(None, max_length=128, description="one backend (default: every backend both ran)"),
    tier: Literal["census", "tiny", "full"] = "tiny",
    top: int | None = Query(None, ge=1, le=100000, description="only the snapshot's N most-downloaded models"),
    limit: int = Query(200, ge=1, le=5000, description="items (and clusters) per page"),
    cursor: str | None = Query(None, max_length=200, description="`next_cursor` of the page before"),
    format: Format = "json",
):
    """Each model (and backend) with a row in both envs at the tier, each side's newest row: fixed,
    broken, still failing with the same signature or another, numerics moved (rmse_ratio by more
    than 2x), Zoo's own gap on one side, or unchanged; counts by models and downloads, per kind and
    per cluster (over every item, whatever the page). Items come a page at a time (`limit`, then
    `cursor`), changed ones first; each names both stored results (`GET /api/v1/results/{id}`).
    Computed once per data version and kept for `ZOO_QUERY_CACHE_S`."""
    offset = decode_cursor(cursor)
    backend = check_backend(session, backend)
    known = queries.env_names(session)
    for env in (env_a, env_b):
        if env not in known:
            raise HTTPException(404, detail=f"no stored rows of env {env!r} (with rows: {', '.join(known) or 'none'})")
    full = queries.compare_envs(session, env_a, env_b, backend=backend, tier=tier, top=top)
    data = {
        **full,
        "items": full["items"][offset : offset + limit],
        "clusters": full["clusters"][:limit],
        "total_items": len(full["items"]),
        "next_cursor": encode_cursor(offset + limit) if offset + limit < len(full["items"]) else None,
    }
    if format == "csv":
        return csv_response(
            [
                {"model_id": i["model_id"], "backend": i["backend"], "kind": i["kind"], "downloads": i["downloads"],
                 "status_a": i["a"]["status"], "status_b": i["b"]["status"], "signature_a": i["a"]["signature"],
                 "signature_b": i["b"]["signature"], "result_a": i["a"]["id"], "result_b": i["b"]["id"]}
                for i in data["items"]
            ],
            "compare.csv",
        )  # fmt: skip
    return ComparePage(**data)
