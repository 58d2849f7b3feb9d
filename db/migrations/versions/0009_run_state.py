"""runs.state: running, finished or interrupted (Ctrl-C, SIGTERM), and how many models an interrupted run left;
model_claims: the models in-process runs are validating now, so two runs on one database split the work

A run interrupted before this revision has no way to say so: rows with a ``finished_at`` are ``finished``,
the others ``running`` (as before, a run that never ended). ``zoo run`` resumes the newest interrupted
run of the same parameters, validating only its missing models.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("state", sa.String(length=16), nullable=False, server_default="running"))
        batch_op.add_column(sa.Column("missing", sa.Integer(), nullable=True))
    runs = sa.table("runs", sa.column("state", sa.String), sa.column("finished_at", sa.DateTime))
    op.execute(runs.update().where(runs.c.finished_at.is_not(None)).values(state="finished"))
    op.create_table(
        "model_claims",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("model_id", sa.String(length=256), nullable=False),
        sa.Column("backend", sa.String(length=128), nullable=False),
        sa.Column("tier", sa.String(length=16), nullable=False),
        sa.Column("precision", sa.String(length=8), nullable=False),
        sa.Column("env", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("model_id", "backend", "tier", "precision", "env", name="uq_model_claim"),
    )


def downgrade() -> None:
    op.drop_table("model_claims")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("missing")
        batch_op.drop_column("state")
