"""One validation end to end: policy and files in this process, the model in a child, the row stored.

The same function serves ``zoo validate``, the in-process ``zoo run`` and the Celery task.
"""
from __future__ import annotations

import logging
from typing import Any

from db.repository import store_result
from db.session import session_scope
from zoo_runner.exceptions import NotSupported
from zoo_runner.hub import prepare
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest, empty_result, error_info
from zoo_runner.statuses import Status

log = logging.getLogger(__name__)


def run_validation(req: ValidationRequest) -> dict[str, Any]:
    """Prepare (parent side) and run (child side); policy refusals become ``unsupported`` rows.

    Raises UnknownModel / HubUnreachable for requests that cannot produce a meaningful row.
    """
    try:
        req = prepare(req)
    except NotSupported as exc:
        result = empty_result(req)
        result.update(status=Status.UNSUPPORTED.value, reason=exc.reason, error=error_info(exc))
        result["duration_s"] = 0.0
        return result
    return run_isolated(req)


def validate_and_store(req: ValidationRequest, run_id: int | None = None, task_id: str | None = None) -> dict[str, Any]:
    result = run_validation(req)
    with session_scope() as s:
        store_result(s, result, run_id=run_id, task_id=task_id)
    return result
