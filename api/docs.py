"""The API's documentation: Swagger UI (/docs) and ReDoc (/redoc) from local files, and every
status code the API can answer with in the OpenAPI schema.

The Swagger UI and ReDoc bundles come from the ``fastapi-offline`` package (pinned in
pyproject.toml); only its static files are used, mounted at /static/docs."""

from __future__ import annotations

import base64
import hashlib
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_STATIC = "/static/docs"
FAVICON = "/static/favicon.svg"


def assets_dir() -> Path:
    import fastapi_offline

    return Path(fastapi_offline.__file__).parent / "static"


def _inline_script_hashes(html: str) -> str:
    """CSP sources for the page's own inline scripts (Swagger UI's start-up script)."""
    scripts = re.findall(r"<script>(.*?)</script>", html, flags=re.S)
    return " ".join("'sha256-" + base64.b64encode(hashlib.sha256(s.encode()).digest()).decode() + "'" for s in scripts)


def _with_csp(page: HTMLResponse) -> HTMLResponse:
    """The docs pages' policy: local files, their own inline start-up script by hash; inline
    styles (ReDoc injects its styles at run time) and blob: workers (ReDoc's search)."""
    html = bytes(page.body).decode()
    csp = (
        f"default-src 'self'; script-src 'self' {_inline_script_hashes(html)}; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; worker-src 'self' blob:; object-src 'none'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    )
    return HTMLResponse(html, headers={"Content-Security-Policy": csp})


def mount_docs(app: FastAPI) -> None:
    """/docs and /redoc on the local assets (create the app with docs_url=None, redoc_url=None).
    Mount before /static, which would otherwise answer /static/docs/..."""
    app.mount(DOCS_STATIC, StaticFiles(directory=assets_dir()), name="docs-static")

    @app.get("/docs", include_in_schema=False)
    def swagger_ui(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_swagger_ui_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{DOCS_STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{DOCS_STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{root}{FAVICON}",
            oauth2_redirect_url=None,  # no OAuth flows: API keys only
        )
        return _with_csp(page)

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        page = get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{DOCS_STATIC}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{FAVICON}",
            with_google_fonts=False,
        )
        return _with_csp(page)


MESSAGE = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Message"}}}}
MESSAGE_SCHEMA = {
    "title": "Message",
    "type": "object",
    "properties": {"detail": {"title": "Detail", "type": "string"}},
    "required": ["detail"],
}

# What middlewares and exception handlers answer on any operation (FastAPI documents only what
# the routes declare): rate limit, body-size limit, database down or busy, and ETag revalidation.
EVERY_OPERATION: dict[str, dict[str, Any]] = {
    "413": {"description": "request body over the size limit (ZOO_API_MAX_BODY, default 1 MiB)", **MESSAGE},
    "429": {
        "description": "rate limit exceeded (ZOO_RATE_LIMIT requests per minute per client, default 600)",
        "headers": {
            "Retry-After": {"description": "seconds until a request is allowed again", "schema": {"type": "integer"}}
        },
        **MESSAGE,
    },
    "503": {"description": "database unavailable or every connection busy (then with Retry-After)", **MESSAGE},
}
EVERY_GET = {"304": {"description": "not modified: If-None-Match matched the response's ETag"}}


def document_statuses(schema: dict[str, Any]) -> dict[str, Any]:
    """Add the status codes of EVERY_OPERATION (and EVERY_GET) to every operation of ``schema``;
    give the error codes documented by a description only (400, 401, 403, 404, 503) their body."""
    schema.setdefault("components", {}).setdefault("schemas", {})["Message"] = MESSAGE_SCHEMA
    for path in schema.get("paths", {}).values():
        for method, op in path.items():
            responses = op.setdefault("responses", {})
            for code, spec in {**EVERY_OPERATION, **(EVERY_GET if method == "get" else {})}.items():
                responses.setdefault(code, spec)
            for code in ("400", "401", "403", "404", "503"):
                if code in responses and "content" not in responses[code]:
                    responses[code].update(MESSAGE)
    return schema


def install_openapi(app: FastAPI) -> None:
    """Make ``app.openapi()`` return the schema with document_statuses applied (built once)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document_statuses(build())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
