"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "models",
        sa.Column("id", sa.String(length=255), nullable=False),
        sa.Column("library", sa.String(length=64), nullable=True),
        sa.Column("model_type", sa.String(length=128), nullable=True),
        sa.Column("task", sa.String(length=128), nullable=True),
        sa.Column("tags", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=True),
        sa.Column("custom_code", sa.Boolean(), nullable=False),
        sa.Column("gated", sa.Boolean(), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=True),
        sa.Column("parameters", sa.BigInteger(), nullable=True),
        sa.Column("downloads", sa.BigInteger(), nullable=False),
        sa.Column("first_seen", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_models_downloads"), ["downloads"], unique=False)
        batch_op.create_index(batch_op.f("ix_models_library"), ["library"], unique=False)
        batch_op.create_index(batch_op.f("ix_models_task"), ["task"], unique=False)

    op.create_table(
        "reports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("week", sa.String(length=8), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column(
            "data", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column("markdown", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("week", "backend", "tier", name="uq_report_scope"),
    )
    with op.batch_alter_table("reports", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_reports_week"), ["week"], unique=False)

    op.create_table(
        "snapshots",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("taken_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("source", sa.String(length=512), nullable=False),
        sa.Column("n_models", sa.Integer(), nullable=False),
        sa.Column("total_downloads", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshots_taken_at"), ["taken_at"], unique=False)

    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("requested", sa.Integer(), nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "snapshot_entries",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("snapshot_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("downloads", sa.BigInteger(), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["model_id"],
            ["models.id"],
        ),
        sa.ForeignKeyConstraint(["snapshot_id"], ["snapshots.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("snapshot_id", "model_id"),
    )
    with op.batch_alter_table("snapshot_entries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshot_entries_model_id"), ["model_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_snapshot_entries_snapshot_id"), ["snapshot_id"], unique=False)

    op.create_table(
        "results",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("revision", sa.String(length=64), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("device", sa.String(length=32), nullable=True),
        sa.Column("dtype", sa.String(length=16), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("library", sa.String(length=64), nullable=True),
        sa.Column("architecture", sa.String(length=128), nullable=True),
        sa.Column("task", sa.String(length=128), nullable=True),
        sa.Column(
            "metrics", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column(
            "fallback_ops",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column(
            "op_census", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column(
            "error", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=True
        ),
        sa.Column("error_signature", sa.String(length=300), nullable=True),
        sa.Column(
            "versions", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column(
            "details", sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"), nullable=False
        ),
        sa.Column("repro", sa.Text(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("week", sa.String(length=8), nullable=False),
        sa.Column("harness_version", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("task_id", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["runs.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("model_id", "revision", "backend", "tier", "harness_version", "week", name="uq_result_key"),
    )
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_results_error_signature"), ["error_signature"], unique=False)
        batch_op.create_index(batch_op.f("ix_results_fingerprint"), ["fingerprint"], unique=False)
        batch_op.create_index(batch_op.f("ix_results_model_id"), ["model_id"], unique=False)
        batch_op.create_index("ix_results_model_time", ["model_id", "started_at"], unique=False)
        batch_op.create_index("ix_results_scope", ["backend", "tier", "week", "status"], unique=False)
        batch_op.create_index(batch_op.f("ix_results_status"), ["status"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_results_status"))
        batch_op.drop_index("ix_results_scope")
        batch_op.drop_index("ix_results_model_time")
        batch_op.drop_index(batch_op.f("ix_results_model_id"))
        batch_op.drop_index(batch_op.f("ix_results_fingerprint"))
        batch_op.drop_index(batch_op.f("ix_results_error_signature"))

    op.drop_table("results")
    with op.batch_alter_table("snapshot_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshot_entries_snapshot_id"))
        batch_op.drop_index(batch_op.f("ix_snapshot_entries_model_id"))

    op.drop_table("snapshot_entries")
    op.drop_table("runs")
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshots_taken_at"))

    op.drop_table("snapshots")
    with op.batch_alter_table("reports", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_reports_week"))

    op.drop_table("reports")
    with op.batch_alter_table("models", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_models_task"))
        batch_op.drop_index(batch_op.f("ix_models_library"))
        batch_op.drop_index(batch_op.f("ix_models_downloads"))

    op.drop_table("models")
