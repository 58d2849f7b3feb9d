"""HTML pages served by `zoo serve`. Data comes from the same queries as the API, so every number
on a page has an API call behind it, linked on the page next to it ("as JSON" / "CSV")."""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from services import dashboard as queries
from services import model_list, reports
from services.dashboard import WEEK_PATTERN, get_session
from services.inputs import check_backend, check_week
from services.reports import api_url as api
from services.triage import attach_triage
from zoo_runner.statuses import ALL_STATUSES, PASSING, Status

from .format import p100
from .templating import PALETTE, STATUS_COLORS, report_context, templates

router = APIRouter(include_in_schema=False)
SessionDep = Annotated[Session, Depends(get_session)]  # the same dependency as the API's: one session per request
WEEK = Query(None, pattern=WEEK_PATTERN)


def _render(name: str, **ctx) -> HTMLResponse:
    return HTMLResponse(templates.get_template(name).render(**ctx))


def error_page(status: int, message: str, headers: dict[str, str] | None = None) -> HTMLResponse:
    """A page's error in words, with its status: a bad filter is 422, an unknown model 404."""
    from http import HTTPStatus

    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Error"
    html = templates.get_template("error.html").render(status=status, title=title, message=message)
    return HTMLResponse(html, status_code=status, headers=headers)


def precision_of(r: Any) -> str:
    """A result row's precision as the pages show it: ``bf16 (declared by the plugin)``, ``fp32
    (asked for with --precision)``; ``n/a`` where the engine never got that far."""
    at = queries.judged_precision(r)
    if at is None:
        return "n/a"
    return f"{at} ({queries.SOURCE_WORDS.get(r.precision_source, r.precision_source)})"


def strict_fp32_of(r: Any) -> str:
    value = (r.details or {}).get("strict_fp32")
    return "" if value is None else ("yes" if value else "no")


def grid_key(r: Any) -> str:
    """The history grid's column: backend/tier, the precision of a ``--precision`` row, and the env
    (``zoo env``) of a row run in one."""
    key = f"{r.backend}/{r.tier}"
    key = f"{key}@{r.precision}" if r.precision_source == "flag" else key
    return f"{key} [{r.env}]" if getattr(r, "env", "") else key


templates.globals.update(precision_of=precision_of, strict_fp32_of=strict_fp32_of)


def declared_precisions(session, week: str | None) -> dict[tuple[str, str], str]:
    """(backend, tier) → the precision(s) its rows of the week were judged at as declared."""
    out: dict[tuple[str, str], list[str]] = {}
    for p in queries.precision_summary(session, week) if week else []:
        if p["declared"]:
            out.setdefault((p["backend"], p["tier"]), []).append(p["precision"])
    return {k: ", ".join(v) for k, v in out.items()}


def _scope_ctx(session, cov) -> dict[str, Any]:
    return {
        "scopes": queries.scopes(session, cov.week),
        "cur": {"backend": cov.backend, "tier": cov.tier, "week": cov.week},
    }


def trend_chart(history: list, field: str = "functional_weighted", title: str = "") -> dict[str, Any]:
    weeks = sorted({h.week for h in history})
    series: dict[str, dict[str, float | None]] = {}
    for h in history:
        series.setdefault(f"{h.backend} · {h.tier}", {})[h.week] = p100(h.rates[field])
    datasets = [
        {
            "label": k,
            "data": [v.get(w) for w in weeks],
            "borderColor": PALETTE[i % len(PALETTE)],
            "backgroundColor": PALETTE[i % len(PALETTE)],
            "spanGaps": True,
            "tension": 0.2,
        }
        for i, (k, v) in enumerate(sorted(series.items()))
    ]
    return {
        "type": "line",
        "data": {"labels": weeks, "datasets": datasets},
        "options": {
            "scales": {"y": {"min": 0, "max": 100, "title": {"display": True, "text": title or "% of downloads"}}},
            "plugins": {"legend": {"position": "bottom"}},
        },
    }


@router.get("/", response_class=HTMLResponse)
def overview(
    session: SessionDep,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
    week: str | None = WEEK,
) -> HTMLResponse:
    cov = queries.cached_coverage(session, backend=check_backend(session, backend), tier=tier, week=check_week(week))
    heads = [
        queries.cached_coverage(session, backend=b, tier=t, week=cov.week) for b, t in queries.scopes(session, cov.week)
    ]
    history = queries.coverage_history(session, tier=cov.tier, weeks=12, until=cov.week) if cov.week else []
    groups = {
        g: queries.coverage_grouped(session, g, backend=cov.backend, tier=cov.tier, week=cov.week)
        for g in ("task", "library", "architecture")
    }
    snap_rows = _top_models(session, 50)
    keys = sorted({k for _, st in snap_rows for k in st})
    return _render(
        "overview.html",
        cov=cov,
        rates=cov.rates,
        heads=heads,
        groups=groups,
        SHOWN=12,  # rows of each breakdown on the page; the rest in its JSON and CSV
        rows=snap_rows,
        keys=keys,
        judged_at=declared_precisions(session, cov.week),
        trend=trend_chart(history, "functional_weighted", "functional coverage, % of downloads"),
        **_scope_ctx(session, cov),
    )


class _Rows(list):
    """(model summary, {backend/tier: status}) pairs, with the page's total and whether more follow."""

    def __init__(self, rows, total: int, more: bool):
        super().__init__(rows)
        self.total, self.more = total, more


def _top_models(
    session,
    limit: int,
    offset: int = 0,
    search: str | None = None,
    status: str | None = None,
    backend: str | None = None,
    task: str | None = None,
    library: str | None = None,
    sort: str = "-downloads",
) -> _Rows:
    """The same page as `GET /api/v1/models` (the same service, so the numbers are the API's)."""
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
    return _Rows([(i, i.latest_status) for i in page.items], page.total, page.more)


@router.get("/models", response_class=HTMLResponse)
def models_page(
    session: SessionDep,
    search: str | None = Query(None, max_length=200),
    status: Literal[tuple(ALL_STATUSES)] | None = None,  # type: ignore[valid-type]
    backend: str | None = Query(None, max_length=128),
    task: str | None = Query(None, max_length=128),
    library: str | None = Query(None, max_length=64),
    page: int = Query(1, ge=1, le=10_000),
) -> HTMLResponse:
    per = 50
    rows = _top_models(
        session,
        per,
        (page - 1) * per,
        search=search or None,
        status=status,
        backend=check_backend(session, backend),
        task=task or None,
        library=library or None,
    )
    keys = sorted({k for _, st in rows for k in st})
    params = {
        k: v for k, v in dict(search=search, status=status, backend=backend, task=task, library=library).items() if v
    }
    return _render(
        "models.html",
        rows=rows,
        keys=keys,
        params=params,
        page=page,
        per=per,
        statuses=ALL_STATUSES,
        api_url=api("/models", **params, limit=per),
        next_url=("/models?" + urlencode({**params, "page": page + 1})) if rows.more else None,
        prev_url=("/models?" + urlencode({**params, "page": page - 1})) if page > 1 else None,
    )


@router.get("/models/{model_id:path}", response_class=HTMLResponse)
def model_page(session: SessionDep, request: Request, model_id: str) -> HTMLResponse:
    m = queries.model_row(session, model_id)
    latest = queries.latest_results(session, model_id)
    if m is None and not latest:
        raise HTTPException(404, detail=f"unknown model {model_id}")
    hist = queries.history(session, model_id, 400)
    weeks = sorted({r.week for r in hist}, reverse=True)
    keys = sorted({grid_key(r) for r in hist})
    grid: dict[str, dict[str, Any]] = {w: {} for w in weeks}
    for r in reversed(hist):  # oldest first: the newest of a week wins
        grid[r.week][grid_key(r)] = r
    chrono = list(reversed(weeks))
    latency = {
        "type": "line",
        "data": {"labels": chrono, "datasets": []},
        "options": {
            "scales": {"y": {"title": {"display": True, "text": "target latency, ms"}, "beginAtZero": True}},
            "plugins": {"legend": {"position": "bottom"}},
        },
    }
    for i, k in enumerate(keys):
        pts = [
            ((grid[w].get(k).metrics or {}).get("target_ms") if grid[w].get(k) is not None else None) for w in chrono
        ]
        if any(p is not None for p in pts):
            latency["data"]["datasets"].append(
                {
                    "label": k,
                    "data": pts,
                    "borderColor": PALETTE[i % len(PALETTE)],
                    "backgroundColor": PALETTE[i % len(PALETTE)],
                    "spanGaps": True,
                }
            )
    base = str(request.base_url).rstrip("/")
    badge_md = f"[![Zoo: {model_id}]({base}/badge/{model_id}.svg)]({base}/models/{model_id})"
    return _render(
        "model.html",
        model=m,
        model_id=model_id,
        latest=latest,
        history=hist,
        weeks=weeks,
        keys=keys,
        grid=grid,
        latency=latency,
        badge_md=badge_md,
        bisections=queries.bisections(session, [model_id]),
    )


@router.get("/ops", response_class=HTMLResponse)
def ops_page(
    session: SessionDep,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
    week: str | None = WEEK,
) -> HTMLResponse:
    data = queries.op_gaps(session, backend=check_backend(session, backend), tier=tier, week=check_week(week), limit=50)
    cov = queries.cached_coverage(session, backend=data["backend"], tier=data["tier"], week=data["week"])
    top = data["items"][:15]
    chart = {
        "type": "bar",
        "data": {
            "labels": [e["op"] for e in top],
            "datasets": [
                {
                    "label": "strict: only fallback op",
                    "data": [e["strict_downloads"] for e in top],
                    "backgroundColor": STATUS_COLORS[Status.PASS_WITH_FALLBACK],
                },
                {
                    "label": "functional: only op in the error",
                    "data": [e["functional_downloads"] for e in top],
                    "backgroundColor": STATUS_COLORS[Status.COMPILE_ERROR],
                },
            ],
        },
        "options": {
            "indexAxis": "y",
            "scales": {
                "x": {"stacked": True, "title": {"display": True, "text": "downloads unlocked"}},
                "y": {"stacked": True},
            },
            "plugins": {"legend": {"position": "bottom"}},
        },
    }
    scope = dict(backend=data["backend"], tier=data["tier"], week=data["week"])
    return _render(
        "ops.html", data=data, chart_cfg=chart, api_url=api("/ops/gaps", **scope), **_scope_ctx(session, cov)
    )


@router.get("/failures", response_class=HTMLResponse)
def failures_page(
    session: SessionDep,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
    week: str | None = WEEK,
) -> HTMLResponse:
    data = attach_triage(
        queries.failure_clusters(
            session, backend=check_backend(session, backend), tier=tier, week=check_week(week), limit=50
        )
    )
    cov = queries.cached_coverage(session, backend=data["backend"], tier=data["tier"], week=data["week"])
    statuses = [s for s in ALL_STATUSES if s not in PASSING and cov.status_counts.get(s)]
    chart = {
        "type": "doughnut",
        "data": {
            "labels": statuses,
            "datasets": [
                {
                    "label": "models",
                    "data": [cov.status_counts[s] for s in statuses],
                    "backgroundColor": [STATUS_COLORS[s] for s in statuses],
                }
            ],
        },
        "options": {"plugins": {"legend": {"position": "right"}}},
    }
    scope = dict(backend=data["backend"], tier=data["tier"], week=data["week"])
    return _render(
        "failures.html",
        data=data,
        chart_cfg=chart,
        cov=cov,
        api_url=api("/failures", **scope),
        cov_url=api("/coverage", **scope),
        **_scope_ctx(session, cov),
    )


@router.get("/regressions", response_class=HTMLResponse)
def regressions_page(
    session: SessionDep,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
    week: str | None = WEEK,
) -> HTMLResponse:
    reg = queries.transitions(
        session,
        backend=check_backend(session, backend),
        tier=tier,
        week=check_week(week),
        direction="regressed",
        limit=200,
    )
    fix = queries.transitions(
        session, backend=reg["backend"], tier=reg["tier"], week=reg["week"], direction="fixed", limit=200
    )
    cov = queries.cached_coverage(session, backend=reg["backend"], tier=reg["tier"], week=reg["week"])
    scope = dict(backend=reg["backend"], tier=reg["tier"], week=reg["week"])
    return _render(
        "regressions.html",
        reg=reg,
        fix=fix,
        reg_url=api("/regressions", **scope),
        fix_url=api("/regressions", **scope, direction="fixed"),
        **_scope_ctx(session, cov),
    )


@router.get("/backends", response_class=HTMLResponse)
def backends_page(session: SessionDep, week: str | None = WEEK) -> HTMLResponse:
    week = check_week(week) or queries.newest_week(session)
    covs = [queries.cached_coverage(session, backend=b, tier=t, week=week) for b, t in queries.scopes(session, week)]
    metrics = [
        ("functional_weighted", "functional, by downloads"),
        ("strict_weighted", "strict, by downloads"),
        ("harness_weighted", "harness, by downloads"),
        ("functional", "functional, by count"),
    ]
    chart = {
        "type": "bar",
        "data": {
            "labels": [label for _, label in metrics],
            "datasets": [
                {
                    "label": f"{c.backend} · {c.tier}",
                    "data": [p100(c.rates[k]) for k, _ in metrics],
                    "backgroundColor": PALETTE[i % len(PALETTE)],
                }
                for i, c in enumerate(covs)
            ],
        },
        "options": {
            "scales": {"y": {"min": 0, "max": 100, "title": {"display": True, "text": "%"}}},
            "plugins": {"legend": {"position": "bottom"}},
        },
    }
    rows = _top_models(session, 50)
    keys = [f"{c.backend}/{c.tier}" for c in covs]
    precisions = queries.precision_summary(session, week) if week else []
    by_scope: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for p in precisions:
        by_scope.setdefault((p["backend"], p["tier"]), []).append(p)
    common = queries.common_coverage(session, week, tuple(queries.scopes(session, week))) if week else {"tiers": []}
    return _render(
        "backends.html",
        common=common["tiers"],
        covs=covs,
        chart_cfg=chart,
        week=week,
        rows=rows,
        keys=keys,
        precisions=precisions,
        by_scope=by_scope,
        api_url=api("/backends", week=week),
    )


ENV_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,62}$"


@router.get("/releases", response_class=HTMLResponse)
def releases_page(
    session: SessionDep,
    env_a: str | None = Query(None, pattern=ENV_PATTERN),
    env_b: str | None = Query(None, pattern=ENV_PATTERN),
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] = "tiny",
) -> HTMLResponse:
    """Two envs (releases) on the same models; by default the first two envs with rows."""
    known = queries.env_names(session)
    for env in (env_a, env_b):
        if env is not None and env not in known:
            raise HTTPException(404, detail=f"no stored rows of env {env!r}")
    a = env_a or (known[0] if known else None)
    b = env_b or next((e for e in known if e != a), None)
    data = queries.compare_envs(session, a, b, backend=check_backend(session, backend), tier=tier) if a and b else None
    return _render(
        "releases.html",
        known=known,
        env_a=a,
        env_b=b,
        backend=backend or "",
        tier=tier,
        data=data,
        labels=queries.COMPARE_LABELS,
        api_url=api("/compare", env_a=a, env_b=b, backend=backend or None, tier=tier) if data else None,
    )


@router.get("/reports", response_class=HTMLResponse)
def reports_index(session: SessionDep):
    week = queries.newest_week(session)
    if week is None:
        raise HTTPException(404, detail="no results yet")
    return RedirectResponse(f"/reports/{week}", status_code=307)


@router.get("/reports/{week}", response_class=HTMLResponse)
def report_page(
    session: SessionDep,
    week: str,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
) -> HTMLResponse:
    check_week(week)
    rep = reports.find_or_build(session, week, check_backend(session, backend), tier)
    if rep is None:
        raise HTTPException(404, detail=f"no report and no results for {week}")
    return _render("report.html", **report_context(rep), standalone=None)


def badge_svg(label: str, message: str, color: str) -> str:
    def w(s: str) -> int:
        return 6 * len(s) + 12

    lw, mw = w(label), w(message)
    from html import escape

    label, message = escape(label), escape(message)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{lw + mw}" '
        f'height="20" role="img" aria-label="{label}: {message}">'
        f"<title>{label}: {message}</title>"
        f'<rect width="{lw}" height="20" fill="#555"/><rect x="{lw}" width="{mw}" height="20" fill="{color}"/>'
        f'<g fill="#fff" text-anchor="middle" font-family="Verdana,DejaVu Sans,sans-serif" font-size="11">'
        f'<text x="{lw / 2}" y="14">{label}</text><text x="{lw + mw / 2}" y="14">{message}</text></g></svg>'
    )


@router.get("/badge/{model_id:path}.svg")
def badge(
    session: SessionDep,
    model_id: str,
    backend: str | None = Query(None, max_length=128),
    tier: Literal["census", "tiny", "full"] | None = None,
) -> Response:
    """The model's latest status on a backend (default: neuron first, else the newest result)."""
    latest = [
        r for r in queries.latest_results(session, model_id) if r.precision_source != "flag" and not r.env
    ]  # the declared precision's verdict
    if backend:
        latest = [r for r in latest if r.backend == backend]
    if tier:
        latest = [r for r in latest if r.tier == tier]
    latest.sort(key=lambda r: (not r.backend.startswith("neuron"), -(r.started_at.timestamp() if r.started_at else 0)))
    if not latest:
        svg = badge_svg(f"zoo {backend or ''}".strip(), "unknown", "#9f9f9f")
    else:
        r = latest[0]
        svg = badge_svg(f"zoo {r.backend}", r.status.replace("_", " "), STATUS_COLORS.get(r.status, "#9f9f9f"))
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "max-age=300"})


@router.get("/favicon.ico")
def favicon() -> RedirectResponse:
    return RedirectResponse("/static/favicon.svg", status_code=308)
