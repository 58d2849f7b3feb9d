"""model_plans emptied: fingerprints now cover token ids (zoo_runner/fingerprint.py), so every plan
cached under the earlier scheme is stale; the scheduler computes them again at its next sweep

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DELETE FROM model_plans")


def downgrade() -> None:
    op.execute("DELETE FROM model_plans")  # the earlier scheme's plans are computed again as well
