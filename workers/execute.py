"""One validation end to end: policy and files in this process, the model in a child, the row stored.

The same function serves ``zoo validate``, the in-process ``zoo run`` and the Celery task.
"""
from __future__ import annotations

import logging
from typing import Any

from db.repository import shared_result, store_result
from db.session import session_scope
from zoo_runner.exceptions import NotSupported, ZooError
from zoo_runner.hub import prepare
from zoo_runner.launcher import run_isolated
from zoo_runner.planning import plan_fingerprint
from zoo_runner.request import ValidationRequest, empty_result, error_info
from zoo_runner.statuses import PREPARE_FAILED, Status

log = logging.getLogger(__name__)


def prepared(req: ValidationRequest) -> tuple[ValidationRequest, dict[str, Any] | None]:
    """``(req, None)`` when ``req`` is ready for its model process, else ``(req, row)``: preparing it
    (Hub metadata, strangers' config files, the plan) already decided its row. A policy refusal,
    or a file over the limits, is ``unsupported`` with its reason; any other failure there is
    Zoo's, ``reference_error`` with reason ``prepare_failed`` and the error's signature, so one
    hostile repo costs one row, never the run. UnknownModel and HubUnreachable propagate: the
    callers decide (``zoo validate`` says so in one line, a run stores a row and goes on)."""
    try:
        return prepare(req), None
    except NotSupported as exc:
        row = empty_result(req)
        row.update(status=Status.UNSUPPORTED.value, reason=exc.reason, error=error_info(exc), duration_s=0.0)
        return req, row
    except ZooError:
        raise
    except Exception as exc:  # RecursionError, TypeError on a config of the wrong shape, a bug of Zoo's
        info = error_info(exc)
        log.warning("%s: preparing it failed (%s); stored as reference_error", req.model_id, info["signature"])
        row = empty_result(req)
        row.update(status=Status.REFERENCE_ERROR.value, reason=PREPARE_FAILED, error=info, duration_s=0.0)
        return req, row


def run_validation(req: ValidationRequest) -> dict[str, Any]:
    """Prepare (parent side) and run (child side); a model that cannot be prepared is its row.

    Raises UnknownModel / HubUnreachable for requests that cannot produce a meaningful row.
    """
    req, row = prepared(req)
    return row if row is not None else run_isolated(req)


def validate_and_store(req: ValidationRequest, run_id: int | None = None, task_id: str | None = None, dedup: bool = True) -> dict[str, Any]:
    """Validate and store one model. Models sharing a compute graph (fingerprint) with one already
    validated this week on the same backend and tier get that result, recorded under their own id."""
    req, result = prepared(req)
    if result is None:
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
