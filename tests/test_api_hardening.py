"""Hostile requests to the API: oversized bodies (413), validation errors that do not echo big
inputs, CSV formula injection, security headers, local API docs, cursor bounds, and every status
code documented (issue 12)."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
import re
import socket
import subprocess
import sys
from urllib.parse import urlparse

import pytest
from fastapi.testclient import TestClient

from api.middleware import DEFAULT_MAX_BODY, BodyLimit
from api.pagination import MAX_OFFSET, csv_cell, encode_cursor
from db import repository
from db.repository import CatalogEntry
from db.session import session_scope
from tests.conftest import child_env, serving
from tests.test_storage import _result

KEY = "hardening-key"
AUTH = {"X-API-Key": KEY}
HOSTILE = ['=HYPERLINK("http://evil/","x")', "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\tTAB", "\rCR", "\uff1d1+1"]


def _app(monkeypatch, **env: str):
    monkeypatch.setenv("ZOO_API_KEYS", KEY)
    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from api.app import create_app

    return create_app()


@pytest.fixture
def client(sqlite_url, monkeypatch):
    with session_scope() as s:
        repository.store_snapshot(
            s,
            iter(
                [
                    CatalogEntry("org/plain", 100, library="transformers", task="fill-mask"),
                    CatalogEntry("org/evil", 50, library=HOSTILE[0], task=HOSTILE[1], model_type=HOSTILE[3]),
                ]
            ),
            "file:x",
        )
        repository.store_result(
            s,
            _result(
                "org/evil",
                "compile_error",
                architecture=HOSTILE[2],
                task=HOSTILE[4],
                error={"type": "E", "message": HOSTILE[5], "signature": HOSTILE[6], "traceback": ""},
            ),
        )
    return TestClient(_app(monkeypatch))


# ---------------------------------------------------------------- 413: the body-size limit


def test_content_length_over_the_limit_is_413_before_auth_or_parsing(client):
    r = client.post(
        "/api/v1/validations",
        content=b"{" * (DEFAULT_MAX_BODY + 1),
        headers={**AUTH, "content-type": "application/json"},
    )
    assert r.status_code == 413 and "at most" in r.json()["detail"]
    assert (
        client.post("/api/v1/validations", content=b"x" * (DEFAULT_MAX_BODY + 1)).status_code == 413
    )  # no key: still 413, nothing read
    ok = client.post(
        "/api/v1/validations", json={"model_ids": ["org/plain"] * 1000}, headers=AUTH
    )  # a large legitimate body passes
    assert ok.status_code == 202, ok.text


def test_chunked_body_over_the_limit_is_413(client):
    def chunks():
        for _ in range(40):  # 2.5 MiB, no Content-Length
            yield b"x" * 65536

    assert client.post("/api/v1/validations", content=chunks(), headers=AUTH).status_code == 413
    small = client.post(
        "/api/v1/validations",
        content=iter([b'{"model_ids": ', b'["org/plain"]}']),
        headers={**AUTH, "content-type": "application/json"},
    )
    assert small.status_code == 202, small.text


def test_body_limit_stops_reading_at_the_limit():
    """The middleware pulls no more of a streamed body than the limit (plus one chunk), and the
    application never runs."""
    pulled, sent, called = [0], [], []

    async def app(scope, receive, send):
        called.append(True)

    async def receive():
        pulled[0] += 1
        return {"type": "http.request", "body": b"x" * 1000, "more_body": True}  # endless

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/v1/validations",
        "headers": [(b"transfer-encoding", b"chunked")],
    }
    asyncio.run(BodyLimit(app, max_bytes=10_000)(scope, receive, send))
    assert pulled[0] == 11 and not called
    assert sent[0]["status"] == 413


def test_limit_is_configurable(sqlite_url, monkeypatch):
    c = TestClient(_app(monkeypatch, ZOO_API_MAX_BODY="100"))
    assert c.post("/api/v1/validations", content=b"x" * 101, headers=AUTH).status_code == 413
    assert c.post("/api/v1/validations", json={"model_ids": ["a"]}, headers=AUTH).status_code == 202


# ---------------------------------------------------------------- 422 does not echo big inputs


def test_validation_error_does_not_echo_a_100_kb_field(client):
    big = "x" * 100_000
    r = client.post("/api/v1/validations", json={"model_ids": [big], "backend": big}, headers=AUTH)
    assert r.status_code == 422
    assert len(r.content) < 2000 and big[:1000] not in r.text
    locs = {tuple(e["loc"]) for e in r.json()["detail"]}
    assert ("body", "backend") in locs and ("body", "model_ids", 0) in locs  # still says what is wrong
    whole = client.post(
        "/api/v1/validations", content=json.dumps(big), headers={**AUTH, "content-type": "application/json"}
    )
    assert whole.status_code == 422 and len(whole.content) < 2000
    short = client.post("/api/v1/validations", json={"model_ids": ["ok"], "tier": "huge"}, headers=AUTH).json()[
        "detail"
    ][0]
    assert short["input"] == "huge"  # a small input is still shown


# ---------------------------------------------------------------- CSV formula injection


def test_csv_cells_are_neutralised_as_owasp_advises(client):
    for url in ("/api/v1/models", "/api/v1/models/org/evil/results", "/api/v1/failures"):
        text = client.get(url, params={"format": "csv"}).text
        rows = list(csv.reader(io.StringIO(text)))
        cells = [c for row in rows for c in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r", "\uff1d")], (url, cells)
    models = {
        r["model_id"]: r
        for r in csv.DictReader(io.StringIO(client.get("/api/v1/models", params={"format": "csv"}).text))
    }
    evil = models["org/evil"]
    assert (
        evil["library"] == "'" + HOSTILE[0]
        and evil["task"] == "'" + HOSTILE[1]
        and evil["model_type"] == "'" + HOSTILE[3]
    )
    assert evil["downloads"] == "50" and models["org/plain"]["library"] == "transformers"  # everything else as it was


def test_numbers_are_not_strings_and_stay_numbers():
    """Only string cells are neutralised: a negative number in a numeric column is a number to a
    spreadsheet, never a formula, so it is written as it is."""
    assert csv_cell(-1.5) == -1.5 and csv_cell(-3) == -3 and csv_cell(None) is None and csv_cell(True) is True
    assert csv_cell("-1.5") == "'-1.5"  # a string is a string, whatever it looks like
    assert csv_cell({"a": "=1"}) == '{"a": "=1"}' and csv_cell("a=b") == "a=b"
    for s in HOSTILE:
        assert csv_cell(s) == "'" + s


# ---------------------------------------------------------------- security headers


def _assert_security_headers(r) -> None:
    h = r.headers
    assert h["x-content-type-options"] == "nosniff" and h["x-frame-options"] == "DENY"
    assert h["referrer-policy"] == "no-referrer"
    assert "frame-ancestors 'none'" in h["content-security-policy"]


def test_security_headers_on_api_pages_static_and_errors(client, monkeypatch):
    for url in (
        "/api/v1/healthz",
        "/api/v1/models?format=csv",
        "/",
        "/ops",
        "/static/zoo.css",
        "/openapi.json",
        "/docs",
        "/redoc",
        "/api/v1/models/nobody/nothing",
        "/nowhere",
    ):
        r = client.get(url)
        assert r.status_code in (200, 404), url
        _assert_security_headers(r)
    _assert_security_headers(client.post("/api/v1/validations", json={"model_ids": ["a"]}))  # 401
    _assert_security_headers(client.post("/api/v1/validations", content=b"x" * (DEFAULT_MAX_BODY + 1)))  # 413
    page = client.get("/").headers["content-security-policy"]
    assert "script-src 'self';" in page and "unsafe-inline" not in page.replace("style-src-attr 'unsafe-inline'", "")
    assert client.get("/api/v1/healthz").headers["content-security-policy"].startswith("default-src 'none'")
    etag = client.get("/api/v1/healthz").headers["etag"]
    _assert_security_headers(client.get("/api/v1/healthz", headers={"If-None-Match": etag}))  # 304


def test_429_has_headers_and_is_documented(sqlite_url, monkeypatch):
    c = TestClient(_app(monkeypatch, ZOO_RATE_LIMIT="2"))
    codes = [c.get("/api/v1/healthz").status_code for _ in range(3)]
    assert codes[-1] == 429
    r = c.get("/api/v1/healthz")
    _assert_security_headers(r)
    assert int(r.headers["retry-after"]) >= 1 and "rate limit" in r.json()["detail"]


# ---------------------------------------------------------------- every status code documented


def test_every_operation_documents_what_the_middlewares_answer(client):
    schema = client.get("/openapi.json").json()
    ops = [(p, m, op) for p, item in schema["paths"].items() for m, op in item.items()]
    assert len(ops) >= 12
    for path, method, op in ops:
        codes = set(op["responses"])
        assert {"413", "429", "503"} <= codes, (path, method, codes)
        assert "Retry-After" in op["responses"]["429"]["headers"]
        if method == "get":
            assert "304" in codes
    post = schema["paths"]["/api/v1/validations"]["post"]["responses"]
    assert {"202", "400", "401", "403", "413", "422", "429", "503"} <= set(post)
    assert "400" in schema["paths"]["/api/v1/models"]["get"]["responses"]  # the cursor


# ---------------------------------------------------------------- API docs from local files


def test_docs_pages_use_local_assets_only(client):
    for url in ("/docs", "/redoc"):
        r = client.get(url)
        assert r.status_code == 200
        assert (
            "cdn" not in r.text.lower()
            and "googleapis" not in r.text
            and "https://" not in r.text
            and "http://" not in r.text
        )
        for src in re.findall(r'(?:src|href)="([^"]+)"', r.text):
            assert src.startswith("/"), src
            assert client.get(src).status_code == 200, src
    csp = client.get("/docs").headers["content-security-policy"]
    assert "'sha256-" in csp and "script-src 'self' 'sha256-" in csp  # its inline start-up script by hash only


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve-hardening")
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp / 'zoo.db'}", ZOO_API_KEYS=KEY)
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "seed", "--models", "20", "--weeks", "1"],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    with serving(env, tmp) as base:
        yield base


def test_real_server_refuses_a_100_mb_content_length_without_reading_it(served):
    """`zoo serve` answers 413 to the headers alone: not a byte of the 100 MB is waited for."""
    url = urlparse(served)
    with socket.create_connection((url.hostname, url.port), timeout=10) as s:
        s.sendall(
            b"POST /api/v1/validations HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nContent-Length: 100000000\r\n\r\n"
        )
        head = s.recv(4096).decode("latin-1")
    assert head.startswith("HTTP/1.1 413"), head


@pytest.mark.browser
@pytest.mark.parametrize("path, ready", [("/docs", ".swagger-ui .info .title"), ("/redoc", "h1")])
def test_docs_render_in_chromium_under_their_csp(served, browser, path, ready):
    """Swagger UI and ReDoc render from the local files under their CSP. ReDoc's bundle always
    asks for a logo from its CDN: the CSP refuses it (the logo hides itself), nothing else."""
    page = browser.new_page()
    errors: list[str] = []
    loaded: set[str] = set()
    refused: set[str] = set()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfinished", lambda r: loaded.add(urlparse(r.url).netloc))
    page.on("requestfailed", lambda r: refused.add(r.url))
    assert page.goto(served + path).status == 200
    page.wait_for_selector(ready, timeout=30_000)
    assert "Zoo" in page.inner_text(ready)
    page.wait_for_load_state("networkidle")
    assert loaded <= {urlparse(served).netloc, ""}, loaded  # nothing from a CDN
    logo = "https://cdn.redoc.ly/redoc/logo-mini.svg"
    assert refused <= {logo}, refused
    assert not [e for e in errors if not (logo in e and "Content Security Policy" in e)], (
        errors
    )  # no other CSP violation
    page.close()


@pytest.mark.browser
def test_dashboard_scope_form_works_without_inline_handlers(served, browser):
    """The page CSP runs no inline event handler: the backend · tier select is wired by zoo.js."""
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    assert page.goto(served + "/").status == 200
    options = page.eval_on_selector_all(
        "form.scope-form select[name=backend] option", "els => els.map(e => [e.value, e.dataset.tier, e.selected])"
    )
    other = next(o for o in options if not o[2])
    with page.expect_navigation():
        page.select_option("form.scope-form select[name=backend]", other[0])
    assert f"backend={other[0].replace('+', '%2B')}" in page.url and f"tier={other[1]}" in page.url, page.url
    assert page.inner_text("#scope-backend") == other[0]
    assert not errors, errors
    page.close()


# ---------------------------------------------------------------- cursor bounds


def _raw_cursor(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


@pytest.fixture
def db_client(database_url, monkeypatch):
    with session_scope() as s:
        repository.store_snapshot(s, iter([CatalogEntry(f"org/m{i}", 100 - i) for i in range(3)]), "file:x")
    return TestClient(_app(monkeypatch))


def test_cursor_bounds_on_both_databases(db_client):
    get = lambda cursor: db_client.get("/api/v1/models", params={"cursor": cursor})  # noqa: E731
    last = get(encode_cursor(MAX_OFFSET))
    assert last.status_code == 200 and last.json()["items"] == [] and last.json()["total"] == 3
    assert get(encode_cursor(1)).json()["items"][0]["model_id"] == "org/m1"
    for bad in (
        encode_cursor(2**63),
        encode_cursor(10**30),
        encode_cursor(-1),
        _raw_cursor({"o": "5"}),
        _raw_cursor({"o": 1.5}),
        _raw_cursor({"o": True}),
        _raw_cursor([1]),
        _raw_cursor({"o": None}),
        "garbage!",
        "%%%",
        "AAAA",
    ):
        r = get(bad)
        assert r.status_code == 400 and r.json() == {"detail": "invalid cursor"}, (bad, r.status_code, r.text)


# ---------------------------------------------------------------- non-finite numbers, 500s, proxy headers


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_non_finite_number_is_a_422_that_never_echoes_it(client, raw):
    body = '{"model_ids": ["org/plain"], "timeout": ' + raw + "}"
    r = client.post("/api/v1/validations", content=body, headers={**AUTH, "Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.headers["content-type"].startswith("application/json")
    _assert_security_headers(r)
    assert "not echoed" in r.text and "NaN" not in r.text and "Infinity" not in r.text


def test_a_500_is_json_with_the_security_headers(client, monkeypatch):
    app = client.app

    @app.get("/api/v1/_boom")
    def _boom():
        raise RuntimeError("boom")

    r = TestClient(app, raise_server_exceptions=False).get("/api/v1/_boom")
    assert r.status_code == 500 and r.json() == {"detail": "internal server error"}
    _assert_security_headers(r)


def _rate_limited_codes(base: str, forwarded: bool) -> list[int]:
    import httpx

    codes = []
    for i in range(6):
        headers = {"X-Forwarded-For": f"203.0.113.{i}"} if forwarded else {}
        codes.append(httpx.get(f"{base}/api/v1/healthz", headers=headers, timeout=10).status_code)
    return codes


@pytest.mark.parametrize("trusted", ["", "127.0.0.1"])
def test_x_forwarded_for_changes_the_rate_limit_key_only_from_a_trusted_proxy(tmp_path, trusted):
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp_path / 'zoo.db'}", ZOO_RATE_LIMIT="3")
    if trusted:
        env["ZOO_FORWARDED_ALLOW_IPS"] = trusted
    with serving(env, tmp_path) as base:
        codes = _rate_limited_codes(base, forwarded=True)
    if trusted:  # each forwarded address is a client of its own
        assert 429 not in codes, codes
    else:  # one peer, 127.0.0.1, whatever the header says (the readiness probe took a token)
        assert codes.count(429) >= 3, codes


def test_a_database_that_is_down_is_a_page_for_pages_and_json_for_the_api(monkeypatch):
    # nothing listens on port 1: every request that needs the database meets DatabaseUnavailable
    client = TestClient(_app(monkeypatch, ZOO_DATABASE_URL="postgresql://nobody@127.0.0.1:1/zoo"))
    page = client.get("/")
    assert page.status_code == 503 and page.headers["content-type"].startswith("text/html")
    assert "Service Unavailable" in page.text and "<html" in page.text.lower()
    api = client.get("/api/v1/coverage")
    assert api.status_code == 503 and api.headers["content-type"].startswith("application/json")
    assert api.json()["detail"]
