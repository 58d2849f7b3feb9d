"""The FastAPI application: REST API under /api/v1 and the dashboard pages."""

from __future__ import annotations

import json
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from db.weeks import BadWeek, iso_week
from zoo_runner.exceptions import DatabaseUnavailable, UnknownBackend
from zoo_runner.version import __version__

from .docs import install_openapi, mount_docs
from .middleware import BodyLimit, ETag, NoNul, RateLimit, SecurityHeaders
from .routes import analytics, coverage, health, models, reports, validations
from .security import hashed_keys

API_PREFIX = "/api/v1"
ECHO_MAX = 200  # characters of an invalid input a 422 repeats


def _finite_only(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite_only(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(_finite_only(v) for v in value)
    return True


def _short(value: Any) -> Any:
    """``value`` if its JSON is at most ECHO_MAX characters, else a note of its size; a non-finite
    number (NaN, Infinity, 1e999) is never echoed: JSON has no way to say it."""
    if not _finite_only(value):
        return "<a non-finite number, not echoed>"
    text = json.dumps(value, default=str)
    return value if len(text) <= ECHO_MAX else f"<{len(text)} characters, not echoed>"


def validation_errors(errors: Any) -> list[dict[str, Any]]:
    """FastAPI's 422 detail, with each error's ``input`` and ``ctx`` values cut short: a
    validation error never echoes a big request back."""
    out = []
    for e in jsonable_encoder(errors):
        e = {k: v for k, v in e.items() if k != "url"}
        if "input" in e:
            e["input"] = _short(e["input"])
        if isinstance(e.get("ctx"), dict):
            e["ctx"] = {k: _short(v) for k, v in e["ctx"].items()}
        if e.get("type") == "string_pattern_mismatch":  # in words, not the pattern (kept in ctx)
            e["msg"] = _in_words(e).split(": ", 1)[1]
        out.append(e)
    return out


def _in_words(error: dict[str, Any]) -> str:
    """One validation error as a page says it: the field, then what is wrong (a week by example)."""
    field = ".".join(map(str, error.get("loc", ())[1:])) or "input"
    if field in ("week", "since", "until", "base") and error.get("type") == "string_pattern_mismatch":
        return f"{field}: {str(error.get('input'))[:40]!r} is not an ISO week YYYY-Www (e.g. {iso_week()})"
    if field.startswith("env") and error.get("type") == "string_pattern_mismatch":
        return f"{field}: {str(error.get('input'))[:40]!r} is not an env name (lowercase letters, digits, . _ -)"
    if error.get("type") == "string_pattern_mismatch":
        return f"{field}: {str(error.get('input'))[:40]!r} is not one of the values this field takes"
    return f"{field}: {error.get('msg')}"


def create_app() -> FastAPI:
    app = FastAPI(
        title="Zoo",
        version=__version__,
        description="Which of the Hub's most-downloaded models run on an accelerator backend, and correctly.",
        docs_url=None,
        redoc_url=None,
    )
    app.state.api_key_digests = hashed_keys()  # only digests are kept
    for r in (health.router, models.router, coverage.router, analytics.router, reports.router, validations.router):
        app.include_router(r, prefix=API_PREFIX)

    from dashboards.pages import error_page

    def _page(request: Request) -> bool:  # an HTML route: its errors are pages too
        return not request.url.path.startswith((API_PREFIX, "/docs", "/redoc", "/openapi", "/static"))

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        errors = validation_errors(exc.errors())
        if _page(request):
            return error_page(422, "; ".join(_in_words(e) for e in errors))
        return JSONResponse({"detail": errors}, status_code=422)

    async def _bad_input(request: Request, exc: Exception) -> Response:  # a week off the calendar, a backend typo
        if _page(request):
            return error_page(422, str(exc))
        return JSONResponse({"detail": [{"type": "value_error", "loc": ["query"], "msg": str(exc)}]}, status_code=422)

    for bad in (BadWeek, UnknownBackend):  # the request's fault; a bad ZOO_* setting (ConfigError) is not
        app.add_exception_handler(bad, _bad_input)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        if _page(request) and exc.status_code >= 400:
            return error_page(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))
        return await http_exception_handler(request, exc)

    @app.exception_handler(DatabaseUnavailable)
    async def _db_down(request: Request, exc: DatabaseUnavailable) -> Response:
        if _page(request):  # a person at a browser gets a page saying so, not JSON
            return error_page(503, str(exc))
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(PoolTimeout)
    async def _busy(request: Request, exc: PoolTimeout) -> Response:  # every DB connection in use: overloaded
        busy = "server busy: no database connection free, retry shortly"
        if _page(request):
            return error_page(503, busy, headers={"Retry-After": "1"})
        return JSONResponse({"detail": busy}, status_code=503, headers={"Retry-After": "1"})

    from dashboards.pages import router as pages_router
    from dashboards.templating import HERE as DASHBOARDS

    mount_docs(app)  # /docs, /redoc and /static/docs (before /static)
    install_openapi(app)
    # (not dashboards.__file__: a stale editable install can make the package a namespace one)
    app.mount("/static", StaticFiles(directory=DASHBOARDS / "static"), name="static")
    app.include_router(pages_router)
    app.add_middleware(ETag)
    app.add_middleware(NoNul)
    app.add_middleware(BodyLimit)  # before anything reads the body
    app.add_middleware(RateLimit)  # a throttled request costs nothing else
    app.add_middleware(SecurityHeaders)  # outermost: on every response, 429 and 413 included
    return app
