"""Engine and sessions from ``ZOO_DATABASE_URL``; migrations applied on first use."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

from sqlalchemy import Engine, create_engine, event, inspect, text
from sqlalchemy.exc import OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from zoo_runner.exceptions import DatabaseUnavailable
from zoo_runner.settings import settings

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).parent / "migrations"


def database_url() -> str:
    url = settings().database_url or f"sqlite:///{Path.cwd() / 'zoo.db'}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def redact_url(url: str) -> str:
    """The database URL fit to print: its password hidden (``postgresql+psycopg://zoo:***@host/zoo``);
    the URL unchanged if it cannot be parsed."""
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return url


@lru_cache(maxsize=8)
def get_engine(url: str | None = None) -> Engine:
    url = url or database_url()
    kwargs: dict = {"future": True, "pool_pre_ping": True}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
    else:
        kwargs["connect_args"] = {"connect_timeout": 5}
        kwargs.update(pool_size=10, max_overflow=20)
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn, _):  # WAL lets the API read while workers write
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

    return engine


def alembic_config(url: str):
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return cfg


def upgrade(url: str | None = None) -> str:
    """Apply all migrations; returns the head revision."""
    from alembic import command
    from alembic.script import ScriptDirectory

    url = url or database_url()
    cfg = alembic_config(url)
    try:
        with _MIGRATE_LOCK, get_engine(url).connect() as conn:
            if conn.dialect.name == "postgresql":  # one migrator at a time across processes
                conn.execute(text("SELECT pg_advisory_lock(724991)"))
                conn.commit()
            try:
                cfg.attributes["connection"] = conn
                command.upgrade(cfg, "head")
                conn.commit()
            finally:
                if conn.dialect.name == "postgresql":
                    conn.execute(text("SELECT pg_advisory_unlock(724991)"))
                    conn.commit()
    except OperationalError as exc:
        raise DatabaseUnavailable(
            f"database {redact_url(url)} is unreachable: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}"
        ) from exc
    except SQLAlchemyError as exc:
        raise DatabaseUnavailable(
            f"database {redact_url(url)} could not be migrated: {exc.__class__.__name__}: {str(exc).splitlines()[0]}"
        ) from exc
    return ScriptDirectory.from_config(cfg).get_current_head() or ""


_READY: set[str] = set()
_MIGRATE_LOCK = threading.RLock()


def ensure_schema(url: str | None = None) -> None:
    """Migrate once per process (first use); cheap afterwards."""
    url = url or database_url()
    if url in _READY:
        return
    with _MIGRATE_LOCK:
        if url not in _READY:
            _ensure_schema(url)


def _ensure_schema(url: str) -> None:
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    try:
        with get_engine(url).connect() as conn:
            current = MigrationContext.configure(conn).get_current_revision()
    except OperationalError as exc:
        raise DatabaseUnavailable(
            f"database {redact_url(url)} is unreachable: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}"
        ) from exc
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    if current != head:
        upgrade(url)
    _READY.add(url)


@lru_cache(maxsize=8)
def _factory(url: str) -> sessionmaker[Session]:
    return sessionmaker(bind=get_engine(url), expire_on_commit=False)


@contextmanager
def session_scope(url: str | None = None) -> Iterator[Session]:
    """A transaction: commit on success, roll back on error."""
    url = url or database_url()
    ensure_schema(url)
    session = _factory(url)()
    try:
        yield session
        session.commit()
    except OperationalError as exc:
        session.rollback()
        raise DatabaseUnavailable(
            f"database {redact_url(url)} failed: {str(exc.orig).strip().splitlines()[0] if exc.orig else exc}"
        ) from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def get_session() -> Iterator[Session]:
    """One :func:`session_scope` per web request: the FastAPI dependency of the API and the pages."""
    with session_scope() as s:
        yield s


def table_names(url: str | None = None) -> list[str]:
    return inspect(get_engine(url or database_url())).get_table_names()
