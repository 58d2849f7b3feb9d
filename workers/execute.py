"""One validation end to end: policy and files in this process, the model in a child, the row stored.

The same function serves ``zoo validate``, the in-process ``zoo run`` and the Celery task.
"""
from __future__ import annotations

import logging
from typing import Any

from db.repository import shared_result, store_result
from db.session import session_scope
from zoo_runner.exceptions import NotSupported
from zoo_runner.hub import prepare
from zoo_runner.launcher import run_isolated
from zoo_runner.planning import plan_fingerprint
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


def validate_and_store(req: ValidationRequest, run_id: int | None = None, task_id: str | None = None, dedup: bool = True) -> dict[str, Any]:
    """Validate and store one model. Models sharing a compute graph (fingerprint) with one already
    validated this week on the same backend and tier get that result, recorded under their own id."""
    try:
        req = prepare(req)
    except NotSupported as exc:
        result = empty_result(req)
        result.update(status=Status.UNSUPPORTED.value, reason=exc.reason, error=error_info(exc), duration_s=0.0)
    else:
        result = None
        if dedup and req.tier != "full":  # full tier: real weights differ per model, never shared
            fp = plan_fingerprint(req)
            if fp:
                with session_scope() as s:
                    result = shared_result(s, fp, req)
        if result is None:
            result = run_isolated(req)
    with session_scope() as s:
        store_result(s, result, run_id=run_id, task_id=task_id)
    return result
