"""run_tasks: every task a run published, so a broker that restarts empty loses nothing

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "run_tasks",
        sa.Column("task_id", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("queue", sa.String(length=128), nullable=False),
        sa.Column("args", JSONType, nullable=False),
        sa.Column("kwargs", JSONType, nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("published", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"]),
        sa.PrimaryKeyConstraint("task_id"),
    )
    with op.batch_alter_table("run_tasks", schema=None) as batch_op:
        batch_op.create_index("ix_run_tasks_run_id", ["run_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("run_tasks", schema=None) as batch_op:
        batch_op.drop_index("ix_run_tasks_run_id")
    op.drop_table("run_tasks")
