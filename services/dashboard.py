"""What the dashboard and the weekly report read: the one door from ``dashboards`` to the database.

The pages and the report never import ``db`` (an import-linter contract): each read they make is
named here, so a change of storage is a change of this list, not of the templates' code.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from db.models import Model
from db.queries import (
    COMPARE_LABELS,
    SOURCE_WORDS,
    bisections,
    cached_coverage,
    common_coverage,
    compare_envs,
    coverage_grouped,
    coverage_history,
    env_names,
    failure_clusters,
    history,
    judged_precision,
    latest_results,
    newest_week,
    op_gaps,
    precision_line,
    precision_summary,
    scopes,
    transitions,
)
from db.session import get_session
from db.weeks import WEEK_PATTERN

__all__ = [
    "COMPARE_LABELS",
    "SOURCE_WORDS",
    "WEEK_PATTERN",
    "bisections",
    "cached_coverage",
    "common_coverage",
    "compare_envs",
    "coverage_grouped",
    "coverage_history",
    "env_names",
    "failure_clusters",
    "get_session",
    "history",
    "judged_precision",
    "latest_results",
    "model_row",
    "newest_week",
    "op_gaps",
    "precision_line",
    "precision_summary",
    "scopes",
    "transitions",
]


def model_row(session: Session, model_id: str) -> Any | None:
    """The catalog's row of ``model_id`` (downloads, library, pipeline), or None."""
    return session.get(Model, model_id)
