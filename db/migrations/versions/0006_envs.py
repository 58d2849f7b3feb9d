"""env: the named version set (``zoo env``) a result's model process ran in, part of the result key

Rows stored before this revision ran in Zoo's own interpreter: they get ``""`` (Zoo's own), which
is what every query scopes to unless it asks for an env. The unique key of a result gains ``env``,
so the same model on the same backend in two releases keeps two rows.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

KEY = ["model_id", "revision", "backend", "tier", "harness_version", "week", "precision"]


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("env", sa.String(length=64), nullable=False, server_default=""))
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_constraint("uq_result_key", type_="unique")
        batch_op.create_unique_constraint("uq_result_key", KEY + ["env"])
        batch_op.create_index("ix_results_env", ["env"], unique=False)
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("env", sa.String(length=64), nullable=False, server_default=""))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("env")
    results = sa.table("results", sa.column("env", sa.String))
    op.execute(results.delete().where(results.c.env != ""))  # they would collide on the old key
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_index("ix_results_env")
        batch_op.drop_constraint("uq_result_key", type_="unique")
        batch_op.create_unique_constraint("uq_result_key", KEY)
        batch_op.drop_column("env")
