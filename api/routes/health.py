from __future__ import annotations

from fastapi import APIRouter
from sqlalchemy import text

from api.deps import SessionDep
from api.schemas import Health
from zoo_runner.version import __version__

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz(session: SessionDep) -> Health:
    session.execute(text("SELECT 1"))
    return Health(status="ok", database=session.get_bind().dialect.name, version=__version__)
