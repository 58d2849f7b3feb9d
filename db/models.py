"""The tables: models, catalog snapshots with their downloads, runs and results."""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

JSONType = JSON().with_variant(JSONB(), "postgresql")


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


class Base(DeclarativeBase):
    pass


class Model(Base):
    """A catalog entry: a Hub repo id or a builtin ``arch:`` id."""

    __tablename__ = "models"
    id: Mapped[str] = mapped_column(String(255), primary_key=True)
    library: Mapped[str | None] = mapped_column(String(64), index=True)
    model_type: Mapped[str | None] = mapped_column(String(128))
    task: Mapped[str | None] = mapped_column(String(128), index=True)
    tags: Mapped[list[str] | None] = mapped_column(JSONType)
    custom_code: Mapped[bool] = mapped_column(Boolean, default=False)
    gated: Mapped[bool] = mapped_column(Boolean, default=False)
    sha: Mapped[str | None] = mapped_column(String(64))
    parameters: Mapped[int | None] = mapped_column(BigInteger)
    downloads: Mapped[int] = mapped_column(BigInteger, default=0, index=True)  # from the latest snapshot
    first_seen: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_seen: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Snapshot(Base):
    """One dated sync of the catalog (from the Hub, a file, or the builtin list)."""

    __tablename__ = "snapshots"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    taken_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow, index=True)
    source: Mapped[str] = mapped_column(String(512))
    n_models: Mapped[int] = mapped_column(Integer, default=0)
    total_downloads: Mapped[int] = mapped_column(BigInteger, default=0)
    entries: Mapped[list[SnapshotEntry]] = relationship(back_populates="snapshot", cascade="all, delete-orphan")


class SnapshotEntry(Base):
    __tablename__ = "snapshot_entries"
    __table_args__ = (UniqueConstraint("snapshot_id", "model_id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(ForeignKey("snapshots.id", ondelete="CASCADE"), index=True)
    model_id: Mapped[str] = mapped_column(ForeignKey("models.id"), index=True)
    downloads: Mapped[int] = mapped_column(BigInteger, default=0)
    rank: Mapped[int] = mapped_column(Integer)
    snapshot: Mapped[Snapshot] = relationship(back_populates="entries")


class Run(Base):
    """One invocation of the main job (or one API/CLI validation batch)."""

    __tablename__ = "runs"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    backend: Mapped[str] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(16))
    mode: Mapped[str] = mapped_column(String(16))  # inprocess | celery
    requested: Mapped[int] = mapped_column(Integer, default=0)
    precision: Mapped[str | None] = mapped_column(
        String(8), default="auto"
    )  # 0004: auto, or what --precision asked for
    env: Mapped[str] = mapped_column(String(64), default="", server_default="")  # 0006: "" = Zoo's own
    snapshot_id: Mapped[int | None] = mapped_column(ForeignKey("snapshots.id"))
    # 0009: running | finished | interrupted (Ctrl-C, SIGTERM: resumed by the next `zoo run` of the same parameters)
    state: Mapped[str] = mapped_column(String(16), default="running", server_default="running")
    missing: Mapped[int | None] = mapped_column(Integer)  # models an interrupted run left without a row


class Result(Base):
    """One validation outcome, in the SPEC's shape. One row per (model, revision, backend, tier,
    harness version, ISO week, precision, env): re-running in the same week updates it, a new week adds
    history, and a ``--precision`` run beside the backend's declared one keeps a row of its own.

    ``precision`` is what the verdict was judged at; ``precision_source`` is ``plugin``, ``flag``
    or ``default``. A result that says no precision (refused, or its model process died before one
    applied) is keyed at the precision its ``--precision`` asked for (source ``flag``), else at
    ``fp32`` with a NULL source, so that the key never holds a NULL."""

    __tablename__ = "results"
    __table_args__ = (
        UniqueConstraint(
            "model_id",
            "revision",
            "backend",
            "tier",
            "harness_version",
            "week",
            "precision",
            "env",
            name="uq_result_key",
        ),  # 0004: + precision, 0006: + env
        Index("ix_results_scope", "backend", "tier", "week", "status"),
        Index("ix_results_model_time", "model_id", "started_at"),
        Index("ix_results_started_at", "started_at"),  # 0002: newest result (data version, default scope)
        Index("ix_results_week_scope", "week", "backend", "tier"),  # 0002: the backends/tiers of a week, newest week
        Index(
            "ix_results_model_latest", "model_id", "backend", "tier", "started_at", "id"
        ),  # 0002: latest per backend/tier, index-only
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str] = mapped_column(String(255), index=True)
    revision: Mapped[str] = mapped_column(String(64), default="")
    tier: Mapped[str] = mapped_column(String(16))
    backend: Mapped[str] = mapped_column(String(128))
    device: Mapped[str | None] = mapped_column(String(32))
    dtype: Mapped[str | None] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(32), index=True)
    reason: Mapped[str | None] = mapped_column(String(32))
    fingerprint: Mapped[str | None] = mapped_column(String(64), index=True)
    library: Mapped[str | None] = mapped_column(String(64))
    architecture: Mapped[str | None] = mapped_column(String(128))
    task: Mapped[str | None] = mapped_column(String(128))
    metrics: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    fallback_ops: Mapped[list[str]] = mapped_column(JSONType, default=list)
    op_census: Mapped[dict[str, int]] = mapped_column(JSONType, default=dict)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    error_signature: Mapped[str | None] = mapped_column(String(300), index=True)
    versions: Mapped[dict[str, str]] = mapped_column(JSONType, default=dict)
    details: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    repro: Mapped[str | None] = mapped_column(Text)
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    duration_s: Mapped[float | None] = mapped_column(Float)
    week: Mapped[str] = mapped_column(String(8))
    harness_version: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=1)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    task_id: Mapped[str | None] = mapped_column(String(64), index=True)  # 0003: a redelivered task finds its row
    precision: Mapped[str | None] = mapped_column(String(8))  # 0004: fp32 | tf32 | bf16 | fp16
    precision_source: Mapped[str | None] = mapped_column(
        String(16)
    )  # 0004: plugin | flag | default; NULL: no verdict precision
    env: Mapped[str] = mapped_column(
        String(64), default="", server_default="", index=True
    )  # 0006: the `zoo env` its model process ran in; "" = Zoo's own interpreter


class Report(Base):
    """A generated weekly coverage report, stored so /reports/{week} serves it as it was."""

    __tablename__ = "reports"
    __table_args__ = (UniqueConstraint("week", "backend", "tier", name="uq_report_scope"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    week: Mapped[str] = mapped_column(String(8), index=True)
    backend: Mapped[str] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)
    markdown: Mapped[str] = mapped_column(Text)


class ModelClaim(Base):
    """A model an in-process run is validating now (0009): two `zoo run` on one database claim models one by
    one, so each model is validated once. Released when its row is stored; ``expires_at`` frees the claim
    of a run that died."""

    __tablename__ = "model_claims"
    __table_args__ = (UniqueConstraint("model_id", "backend", "tier", "precision", "env", name="uq_model_claim"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str] = mapped_column(String(256))
    backend: Mapped[str] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(16))
    precision: Mapped[str] = mapped_column(String(8))
    env: Mapped[str] = mapped_column(String(64), default="")
    run_id: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True))


class Sweep(Base):
    """One scheduled sweep (the daily top-K refresh or the weekly full sweep) of one backend and
    tier; unique per period, so a second beat, or the same sweep delivered twice, does nothing."""

    __tablename__ = "sweeps"
    __table_args__ = (UniqueConstraint("kind", "period", "backend", "tier", name="uq_sweep_period"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # daily | weekly
    period: Mapped[str] = mapped_column(String(16))  # 2025-03-14 | 2025-W11
    backend: Mapped[str] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True))
    candidates: Mapped[int] = mapped_column(Integer, default=0)
    enqueued: Mapped[int] = mapped_column(Integer, default=0)
    deduplicated: Mapped[int] = mapped_column(Integer, default=0)
    run_id: Mapped[int | None] = mapped_column(ForeignKey("runs.id"))
    host: Mapped[str | None] = mapped_column(String(255))


class TaskAttempt(Base):
    """Deliveries of one Celery task: redeliveries after a dead worker count, and after
    ``ZOO_MAX_ATTEMPTS`` the task is stored as a permanent failure instead of tried again."""

    __tablename__ = "task_attempts"
    task_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    model_id: Mapped[str] = mapped_column(String(255))
    backend: Mapped[str] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    first_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    last_error: Mapped[str | None] = mapped_column(Text)
    gave_up: Mapped[bool] = mapped_column(Boolean, default=False)


class ModelPlan(Base):
    """The plan-time fingerprint of a model at a revision and tier: the scheduler groups models
    that share one before it enqueues them (fingerprint dedup), without asking the Hub again."""

    __tablename__ = "model_plans"
    model_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    tier: Mapped[str] = mapped_column(String(16), primary_key=True)
    sha: Mapped[str] = mapped_column(String(64), default="")
    fingerprint: Mapped[str | None] = mapped_column(String(64), index=True)
    computed_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class RunTask(Base):
    """A validation task a run published, kept in the database: the run's state comes from here,
    not from the broker. A broker that restarts empty loses its queues; the tasks of a run with
    no row yet are published again under the same ids (``workers.reconcile``)."""

    __tablename__ = "run_tasks"
    task_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id"), index=True)
    model_id: Mapped[str] = mapped_column(String(255))
    queue: Mapped[str] = mapped_column(String(128))
    args: Mapped[list[Any]] = mapped_column(JSONType)
    kwargs: Mapped[dict[str, Any]] = mapped_column(JSONType, default=dict)
    enqueued_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    published: Mapped[int] = mapped_column(Integer, default=1)  # how many times it was sent


class Bisection(Base):
    """The first bad version of ``package`` for a model on a backend and tier (``zoo bisect``):
    every version tried (``steps``: version, env, status, signature, bad), the last good and the
    first bad one. "Bad" is the status of the row at ``bad`` (and its error signature with
    ``match`` = ``signature``)."""

    __tablename__ = "bisections"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    model_id: Mapped[str] = mapped_column(String(255), index=True)
    backend: Mapped[str] = mapped_column(String(128))
    tier: Mapped[str] = mapped_column(String(16))
    package: Mapped[str] = mapped_column(String(128))
    good: Mapped[str] = mapped_column(String(64))
    bad: Mapped[str] = mapped_column(String(64))
    first_bad: Mapped[str | None] = mapped_column(String(64))
    last_good: Mapped[str | None] = mapped_column(String(64))
    match: Mapped[str] = mapped_column(String(16))  # status | signature
    bad_status: Mapped[str | None] = mapped_column(String(32))
    bad_signature: Mapped[str | None] = mapped_column(String(300))
    env_base: Mapped[str] = mapped_column(String(64), default="")  # "" = Zoo's own pins
    steps: Mapped[list[dict[str, Any]]] = mapped_column(JSONType, default=list)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
