"""API keys for write endpoints: ``ZOO_API_KEYS`` (comma-separated) is read once per app, kept
only as SHA-256 digests, and a presented key is compared with every digest in constant time."""

from __future__ import annotations

import hashlib
import hmac

from fastapi import HTTPException, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from zoo_runner.settings import settings

api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="one of the keys in ZOO_API_KEYS")
bearer = HTTPBearer(auto_error=False, description="Authorization: Bearer <key>, same keys as X-API-Key")


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def hashed_keys(raw: str | None = None) -> tuple[bytes, ...]:
    raw = settings().api_keys if raw is None else raw
    return tuple(_digest(k.strip()) for k in raw.split(",") if k.strip())


def key_is_valid(presented: str, digests: tuple[bytes, ...]) -> bool:
    d = _digest(presented)
    ok = False
    for h in digests:  # no early exit: time does not depend on which key matched
        ok |= hmac.compare_digest(d, h)
    return ok


def require_api_key(request: Request, key: str | None, cred: HTTPAuthorizationCredentials | None) -> None:
    presented = key or (cred.credentials if cred else None)
    if not presented:
        raise HTTPException(
            401,
            detail="an API key is required (X-API-Key header or Authorization: Bearer)",
            headers={"WWW-Authenticate": "Bearer"},
        )
    digests = getattr(request.app.state, "api_key_digests", None)
    if digests is None:
        digests = hashed_keys()
    if not key_is_valid(presented, digests):
        raise HTTPException(403, detail="invalid API key")
