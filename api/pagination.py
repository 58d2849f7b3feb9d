"""Opaque cursors and CSV rendering shared by list endpoints."""

from __future__ import annotations

import base64
import csv
import io
import json
from collections.abc import Iterable
from typing import Any

from fastapi import HTTPException
from fastapi.responses import Response


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"o": offset}).encode()).decode().rstrip("=")


MAX_OFFSET = 2**63 - 1  # OFFSET is a signed 64-bit integer on PostgreSQL and SQLite


def decode_cursor(cursor: str | None) -> int:
    """The offset in an opaque cursor; 400 for one that does not decode to an integer in
    [0, 2^63)."""
    if not cursor:
        return 0
    try:
        pad = "=" * (-len(cursor) % 4)
        offset = json.loads(base64.urlsafe_b64decode(cursor + pad))["o"]
    except Exception:
        offset = None
    if type(offset) is not int or not 0 <= offset <= MAX_OFFSET:
        raise HTTPException(status_code=400, detail="invalid cursor")
    return offset


# OWASP, CSV injection: a cell a spreadsheet would read as a formula (or one that starts with a
# tab or carriage return) gets a leading single quote. Full-width forms count: some spreadsheets
# normalise them. Numbers are not strings and are written as they are (-1.5 stays a number).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r", "\uff1d", "\uff0b", "\uff0d", "\uff20")


def csv_cell(value: Any) -> Any:
    """A value as written to a CSV cell: lists and dicts as JSON, formula-like strings quoted."""
    if isinstance(value, (dict, list)):
        value = json.dumps(value, sort_keys=True)
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def csv_response(rows: Iterable[dict[str, Any]], filename: str) -> Response:
    rows = list(rows)
    buf = io.StringIO()
    if rows:
        fields: list[str] = []
        for r in rows:
            for k in r:
                if k not in fields:
                    fields.append(k)
        w = csv.DictWriter(buf, fieldnames=fields)
        w.writeheader()
        for r in rows:
            w.writerow({k: csv_cell(v) for k, v in r.items()})
    return Response(
        buf.getvalue(), media_type="text/csv", headers={"Content-Disposition": f'attachment; filename="{filename}"'}
    )
