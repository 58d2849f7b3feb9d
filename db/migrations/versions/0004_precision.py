"""precision: what each result was judged at (and who decided), part of the result key; what a run
asked for

Rows stored before this revision were all judged at fp32 by default: they get ``fp32`` /
``default``. The unique key of a result gains ``precision``, so a ``--precision fp32`` run of a
bf16 backend keeps a row beside the declared-precision one instead of overwriting it.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

OLD_KEY = ["model_id", "revision", "backend", "tier", "harness_version", "week"]


def upgrade() -> None:
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.add_column(sa.Column("precision", sa.String(length=8), nullable=True))
        batch_op.add_column(sa.Column("precision_source", sa.String(length=16), nullable=True))
    results = sa.table("results", sa.column("precision", sa.String), sa.column("precision_source", sa.String))
    op.execute(
        results.update().where(results.c.precision.is_(None)).values(precision="fp32", precision_source="default")
    )
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_constraint("uq_result_key", type_="unique")
        batch_op.create_unique_constraint("uq_result_key", OLD_KEY + ["precision"])
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("precision", sa.String(length=8), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("precision")
    # rows judged at another precision than the declared one would collide on the old key
    results = sa.table("results", sa.column("precision_source", sa.String))
    op.execute(results.delete().where(results.c.precision_source == "flag"))
    with op.batch_alter_table("results", schema=None) as batch_op:
        batch_op.drop_constraint("uq_result_key", type_="unique")
        batch_op.create_unique_constraint("uq_result_key", OLD_KEY)
        batch_op.drop_column("precision_source")
        batch_op.drop_column("precision")
