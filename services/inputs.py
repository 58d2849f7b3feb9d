"""One check of what users type, shared by the CLI, the API and the pages.

A backend filter is a spec whose names torch or Zoo's plugins know (checked without importing
torch, with the closest known name offered), or one results are stored under (a backend another
machine ran); a week is ``YYYY-Www`` within the ISO calendar. Each failure is one
:class:`~zoo_runner.exceptions.BadInput` line: exit 2 on the CLI, 422 in the API, a 4xx error
panel on a page.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from db import queries
from db.weeks import BadWeek, check_week
from zoo_runner.backends import BackendSpec, spec_problem
from zoo_runner.exceptions import BadInput, UnknownBackend

__all__ = ["BadWeek", "UnknownBackend", "check_backend", "check_env", "check_week"]


def check_requested_backend(backend: str) -> str:
    """A backend a request asks to run (POST /validations): refused only where its text cannot be a
    backend or is surely a typo of a known one ("did you mean"); any other name may be one only the
    workers know (their ``ZOO_PLUGINS``, packages), and their model process says so if not."""
    from zoo_runner.backends import typo_problem

    problem = typo_problem(backend) if backend != "auto" else None
    if problem:
        raise UnknownBackend(problem)
    return backend


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


def check_env(
    session: Session | None, env: str | None, workers_have: Callable[[str], bool] | None = None
) -> str | None:
    """``env`` (None for Zoo's own interpreter) if this host has it (``zoo env list``), results are stored
    under it, or ``workers_have(env)`` (a fleet's worker consumes its queue); else :class:`BadInput` naming
    the envs that are known. A request for an env no machine has would wait on a queue no worker takes."""
    from zoo_runner import envs

    if env is None:
        return None
    if env == "default":
        raise BadInput("env 'default' is Zoo's own interpreter: leave env out")
    known = set(envs.names()) | (set(queries.env_names(session)) - {"default"} if session is not None else set())
    if env not in known and not (workers_have is not None and workers_have(env)):
        raise BadInput(
            f"unknown env {env!r}: neither this host has it (`zoo env create {env} ...`) nor has any worker stored "
            f"results under it (known: {', '.join(sorted(known)) or 'none'})"
        )
    return env
