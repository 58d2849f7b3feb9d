"""fleet: sweeps (one per kind, period, backend and tier), task attempts, plan fingerprints

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("period", sa.String(length=16), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("candidates", sa.Integer(), nullable=False),
        sa.Column("enqueued", sa.Integer(), nullable=False),
        sa.Column("deduplicated", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("host", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("kind", "period", "backend", "tier", name="uq_sweep_period"),
    )
    op.create_table(
        "task_attempts",
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("gave_up", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("task_id"),
    )
    op.create_table(
        "model_plans",
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("sha", sa.String(length=64), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=True),
        sa.Column("computed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("model_id", "tier"),
    )
    with op.batch_alter_table("model_plans", schema=None) as batch_op:
        batch_op.create_index("ix_model_plans_fingerprint", ["fingerprint"], unique=False)
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index("ix_results_task_id", ["task_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index("ix_results_task_id")
    with op.batch_alter_table("model_plans", schema=None) as batch_op:
        batch_op.drop_index("ix_model_plans_fingerprint")
    op.drop_table("model_plans")
    op.drop_table("task_attempts")
    op.drop_table("sweeps")
