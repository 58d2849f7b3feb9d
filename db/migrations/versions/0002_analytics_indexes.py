"""indexes for the API at scale: newest result (data version, default scope), the backends/tiers
of a week, and a covering index for a model's latest result per backend/tier (index-only scan)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.create_index("ix_results_started_at", ["started_at"], unique=False)
        batch_op.create_index("ix_results_week_scope", ["week", "backend", "tier"], unique=False)
        batch_op.create_index(
            "ix_results_model_latest", ["model_id", "backend", "tier", "started_at", "id"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index("ix_results_model_latest")
        batch_op.drop_index("ix_results_week_scope")
        batch_op.drop_index("ix_results_started_at")
