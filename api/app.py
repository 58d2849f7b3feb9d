"""The FastAPI application: REST API under /api/v1 and the dashboard pages."""
from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles
from sqlalchemy.exc import TimeoutError as PoolTimeout

from zoo_runner import __version__
from zoo_runner.exceptions import DatabaseUnavailable

from .middleware import ETag, NoNul, RateLimit
from .routes import analytics, coverage, health, models, reports, validations
from .security import hashed_keys

API_PREFIX = "/api/v1"


def create_app() -> FastAPI:
    app = FastAPI(title="Zoo", version=__version__, description="Which of the Hub's most-downloaded models run on an accelerator backend, and correctly.")
    app.state.api_key_digests = hashed_keys()  # only digests are kept
    for r in (health.router, models.router, coverage.router, analytics.router, reports.router, validations.router):
        app.include_router(r, prefix=API_PREFIX)

    @app.exception_handler(DatabaseUnavailable)
    async def _db_down(request: Request, exc: DatabaseUnavailable) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @app.exception_handler(PoolTimeout)
    async def _busy(request: Request, exc: PoolTimeout) -> JSONResponse:  # every DB connection in use: overloaded, not broken
        return JSONResponse({"detail": "server busy: no database connection free, retry shortly"}, status_code=503, headers={"Retry-After": "1"})

    from dashboards.pages import HERE as DASHBOARDS
    from dashboards.pages import router as pages_router

    # (not dashboards.__file__: a stale editable install can make the package a namespace one)
    app.mount("/static", StaticFiles(directory=DASHBOARDS / "static"), name="static")
    app.include_router(pages_router)
    app.add_middleware(ETag)
    app.add_middleware(NoNul)
    app.add_middleware(RateLimit)  # outermost: a throttled request costs nothing else
    return app
