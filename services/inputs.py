"""One check of what users type, shared by the CLI, the API and the pages.

A backend filter is a spec whose names torch or Zoo's plugins know (checked without importing
torch, with the closest known name offered), or one results are stored under (a backend another
machine ran); a week is ``YYYY-Www`` within the ISO calendar. Each failure is one
:class:`~zoo_runner.exceptions.BadInput` line: exit 2 on the CLI, 422 in the API, a 4xx error
panel on a page.
"""

from __future__ import annotations

from sqlalchemy.orm import Session

from db import queries
from db.weeks import BadWeek, check_week
from zoo_runner.backends import BackendSpec, spec_problem
from zoo_runner.exceptions import UnknownBackend

__all__ = ["BadWeek", "UnknownBackend", "check_backend", "check_week"]


def check_backend(session: Session | None, backend: str | None) -> str | None:
    """``backend`` (None for none) if its names are known or results are stored under it; else
    :class:`UnknownBackend` saying why (a bare ``+`` in a query string arrives as a space: the
    message says so)."""
    if not backend:
        return None
    problem = spec_problem(backend)
    if problem is None:  # stored under its canonical text: `cpu+inductor@float32` is `cpu+inductor`
        return str(BackendSpec.parse(backend))
    if session is None or not queries.has_backend(session, backend):
        raise UnknownBackend(problem)
    return backend
