"""Pure-ASGI middlewares: a per-client token-bucket rate limit (429 + Retry-After), a request
body-size limit (413, before anything parses the body), security headers on every response, and
weak ETags on GET responses (304 on a matching If-None-Match)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from zoo_runner.settings import DEFAULT_API_MAX_BODY, settings

log = logging.getLogger(__name__)


class RateLimit:
    """``rate`` requests per minute per client IP, in bursts of up to ``rate`` (a token bucket).
    ``ZOO_RATE_LIMIT`` sets the rate (default 600); 0 switches the limit off. /static is free."""

    def __init__(self, app: ASGIApp, rate: float | None = None, max_clients: int = 100_000) -> None:
        self.app = app
        self.rate = settings().rate_limit if rate is None else float(rate)
        self.capacity = max(self.rate, 1.0)
        self.per_s = self.rate / 60.0
        self.buckets: dict[str, tuple[float, float]] = {}
        self.lock = threading.Lock()
        self.max_clients = max_clients

    def take(self, client: str, now: float | None = None) -> float:
        """Spend one token; returns 0 when allowed, else the seconds until a token is back."""
        now = time.monotonic() if now is None else now
        with self.lock:
            tokens, last = self.buckets.get(client, (self.capacity, now))
            tokens = min(self.capacity, tokens + (now - last) * self.per_s)
            if tokens >= 1.0:
                self.buckets[client] = (tokens - 1.0, now)
                if len(self.buckets) > self.max_clients:  # forget the oldest-seen clients
                    for k in list(self.buckets)[: self.max_clients // 10]:
                        del self.buckets[k]
                return 0.0
            self.buckets[client] = (tokens, now)
            return (1.0 - tokens) / self.per_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.rate <= 0 or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        client = (scope.get("client") or ("unknown", 0))[0]
        wait = self.take(client)
        if wait > 0:
            retry = str(max(1, math.ceil(wait)))
            body = b'{"detail":"rate limit exceeded: retry after ' + retry.encode() + b' s"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 429,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"retry-after", retry.encode()),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def _matches(if_none_match: str, etag: str) -> bool:
    if if_none_match.strip() == "*":
        return True
    weak = etag[2:] if etag.startswith("W/") else etag
    for tag in if_none_match.split(","):
        tag = tag.strip()
        if (tag[2:] if tag.startswith("W/") else tag) == weak:
            return True
    return False


class ETag:
    """Weak ETag (``W/"<sha256 of the body, 32 hex>"``) on every 200 GET response that has
    none; a request whose If-None-Match matches gets 304 with no body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "GET" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        inm = None
        for k, v in scope.get("headers") or []:
            if k == b"if-none-match":
                inm = v.decode("latin-1")
        start: Message | None = None
        chunks: list[bytes] = []
        passthrough = False

        async def wrapped(message: Message) -> None:
            nonlocal start, passthrough
            if passthrough:
                await send(message)
                return
            if message["type"] == "http.response.start":
                headers = message.get("headers") or []
                if message["status"] != 200 or any(k.lower() == b"etag" for k, _ in headers):
                    passthrough = True
                    await send(message)
                    return
                start = message
                return
            if message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if message.get("more_body"):
                    return
                body = b"".join(chunks)
                etag = 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'
                assert start is not None
                headers = [(k, v) for k, v in start.get("headers") or [] if k.lower() != b"content-length"]
                headers.append((b"etag", etag.encode()))
                if inm and _matches(inm, etag):
                    keep = {b"etag", b"cache-control", b"vary", b"content-location", b"date", b"expires"}
                    await send(
                        {
                            "type": "http.response.start",
                            "status": 304,
                            "headers": [(k, v) for k, v in headers if k.lower() in keep],
                        }
                    )
                    await send({"type": "http.response.body", "body": b""})
                    return
                headers.append((b"content-length", str(len(body)).encode()))
                await send({"type": "http.response.start", "status": 200, "headers": headers})
                await send({"type": "http.response.body", "body": body})
                return
            await send(message)

        await self.app(scope, receive, wrapped)


class NoNul:
    """A NUL character can be in no stored value, and PostgreSQL refuses it in a query parameter:
    it is turned into U+FFFD (also in no stored value) in the path and query, so a lookup with it
    finds nothing, on SQLite and PostgreSQL alike, instead of failing."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            qs = scope.get("query_string") or b""
            path = scope.get("path") or ""
            if b"%00" in qs or b"\x00" in qs or "\x00" in path:
                scope = dict(scope)
                scope["query_string"] = qs.replace(b"%00", b"%EF%BF%BD").replace(b"\x00", b"%EF%BF%BD")
                scope["path"] = path.replace("\x00", "\ufffd")
        await self.app(scope, receive, send)


async def _send_json(send: Send, status: int, detail: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": detail}).encode()
    base = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": base + (headers or [])})
    await send({"type": "http.response.body", "body": body})


DEFAULT_MAX_BODY = DEFAULT_API_MAX_BODY  # 1 MiB


class BodyLimit:
    """413 for a request body over ``max_bytes`` (``ZOO_API_MAX_BODY``, default 1 MiB; 0: no
    limit), before the application reads any of it: a larger ``Content-Length`` is refused at
    once, and any body (chunked, or longer than it said) is read here, counting bytes, up to the
    limit and no further; the application then gets the body as one message."""

    def __init__(self, app: ASGIApp, max_bytes: int | None = None) -> None:
        self.app = app
        self.max_bytes = settings().api_max_body if max_bytes is None else max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.max_bytes <= 0:
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and (not length.strip().isdigit() or int(length) > self.max_bytes):
            await self._too_large(scope, send)
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(chunks), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        log.info("413: %s %s body over %d bytes", scope.get("method"), scope.get("path"), self.max_bytes)
        await _send_json(
            send, 413, f"request body too large: at most {self.max_bytes} bytes", [(b"connection", b"close")]
        )


# The dashboard: its own scripts and styles only (Chart.js is vendored; its charts' data sit in
# <script type="application/json"> blocks, which are not executed); style attributes stay
# allowed (bar widths and chart heights are set inline), scripts cannot be injected.
PAGE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; style-src-attr 'unsafe-inline'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
API_CSP = "default-src 'none'; frame-ancestors 'none'"  # JSON, CSV, markdown: nothing to load
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]


class SecurityHeaders:
    """Content-Security-Policy (unless the response set its own: the API docs pages do),
    X-Content-Type-Options: nosniff, X-Frame-Options: DENY and Referrer-Policy: no-referrer on
    every HTTP response."""

    def __init__(self, app: ASGIApp, api_prefix: str = "/api/") -> None:
        self.app = app
        self.api_prefix = api_prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        csp = (API_CSP if scope["path"].startswith(self.api_prefix) else PAGE_CSP).encode()

        started = False

        async def wrapped(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = list(message.get("headers") or [])
                present = {k.lower() for k, _ in headers}
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                if b"content-security-policy" not in present:
                    headers.append((b"content-security-policy", csp))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, wrapped)
        except Exception:  # a 500 is a response like any other: JSON, with the security headers
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            if started:
                raise
            await _send_json(wrapped, 500, "internal server error")
