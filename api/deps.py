"""Typed dependencies shared by the routes."""
from __future__ import annotations

from typing import Annotated, Iterator

from fastapi import Depends
from sqlalchemy.orm import Session

from db.session import session_scope


def get_session() -> Iterator[Session]:
    with session_scope() as s:
        yield s


SessionDep = Annotated[Session, Depends(get_session)]
