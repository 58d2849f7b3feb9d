"""bisections: the first bad version of a package for a model on a backend (``zoo bisect``)

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

JSONType = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "bisections",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("model_id", sa.String(length=255), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("package", sa.String(length=128), nullable=False),
        sa.Column("good", sa.String(length=64), nullable=False),
        sa.Column("bad", sa.String(length=64), nullable=False),
        sa.Column("first_bad", sa.String(length=64), nullable=True),
        sa.Column("last_good", sa.String(length=64), nullable=True),
        sa.Column("match", sa.String(length=16), nullable=False),
        sa.Column("bad_status", sa.String(length=32), nullable=True),
        sa.Column("bad_signature", sa.String(length=300), nullable=True),
        sa.Column("env_base", sa.String(length=64), nullable=False),
        sa.Column("steps", JSONType, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.create_index("ix_bisections_model_id", ["model_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("bisections", schema=None) as batch_op:
        batch_op.drop_index("ix_bisections_model_id")
    op.drop_table("bisections")
