"""Celery tasks."""
from __future__ import annotations

import logging

from zoo_runner.exceptions import ZooError
from zoo_runner.request import ValidationRequest, empty_result, error_info

from .celery_app import app

log = logging.getLogger(__name__)


@app.task(name="zoo.validate", bind=True)
def validate_task(self, request: dict, run_id: int | None = None) -> str:
    """Validate one model and store its row; returns its status."""
    from .execute import run_validation, validate_and_store

    req = ValidationRequest.from_dict(request)
    try:
        return validate_and_store(req, run_id=run_id, task_id=self.request.id)["status"]
    except ZooError as exc:
        # an unknown model or an unreachable Hub still leaves a row, so nobody waits forever
        from db.repository import store_result
        from db.session import session_scope

        result = empty_result(req)
        result.update(status="reference_error", error=error_info(exc), duration_s=0.0)
        with session_scope() as s:
            store_result(s, result, run_id=run_id, task_id=self.request.id)
        return result["status"]


@app.task(name="zoo.weekly_report")
def weekly_report_task(week: str | None = None) -> str:
    from dashboards.report import store_weekly_report

    return store_weekly_report(week)


@app.task(name="zoo.refresh")
def refresh_task(top: int = 100, backend: str = "cpu", tier: str = "tiny") -> int:
    """Daily top-K refresh: sync the catalog's top K and enqueue them."""
    from zoo.jobs import enqueue_top

    return enqueue_top(top=top, backend=backend, tier=tier)
