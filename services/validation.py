"""One validation end to end: policy and files in this process, the model in a child, the row stored.

The same functions serve ``zoo validate``, the in-process ``zoo run`` and the Celery task. Results
travel as :class:`~zoo_runner.result.ValidationResult` (the SPEC dict only at the edges: JSON, the
CLI's lines). A request that cannot be validated still leaves a row: :func:`zoo_runner.result.failure_result`.
"""

from __future__ import annotations

import logging

from db.repository import shared_result, store_result
from db.session import session_scope
from zoo_runner.backends import BackendSpec
from zoo_runner.exceptions import DatabaseUnavailable, NotSupported, ZooError
from zoo_runner.hub import prepare
from zoo_runner.launcher import run_result
from zoo_runner.planning import plan_fingerprint
from zoo_runner.precision import resolve as resolve_precision
from zoo_runner.request import ValidationRequest, error_info
from zoo_runner.result import ValidationResult, failure_result
from zoo_runner.statuses import Reason, Status

log = logging.getLogger(__name__)


def store_row(result: ValidationResult, run_id: int | None = None, task_id: str | None = None) -> None:
    """Upsert one result row in a transaction of its own."""
    with session_scope() as s:
        store_result(s, result, run_id=run_id, task_id=task_id)


def prepared(req: ValidationRequest) -> tuple[ValidationRequest, ValidationResult | None]:
    """``(req, None)`` when ``req`` is ready for its model process, else ``(req, row)``: preparing it
    (Hub metadata, strangers' config files, the plan) already decided its row. A policy refusal,
    or a file over the limits, is ``unsupported`` with its reason; any other failure there is
    Zoo's, ``reference_error`` with reason ``prepare_failed`` and the error's signature, so one
    hostile repo costs one row, never the run. UnknownModel and HubUnreachable propagate: the
    callers decide (``zoo validate`` says so in one line, a run stores a row and goes on)."""
    try:
        return prepare(req), None
    except NotSupported as exc:
        return req, failure_result(req, exc, Status.UNSUPPORTED, exc.reason)
    except ZooError:
        raise
    except Exception as exc:  # RecursionError, TypeError on a config of the wrong shape, a bug of Zoo's
        row = failure_result(req, exc, Status.REFERENCE_ERROR, Reason.PREPARE_FAILED)
        log.warning("%s: preparing it failed (%s); stored as reference_error", req.model_id, _signature(row))
        return req, row


def run_validation(req: ValidationRequest) -> ValidationResult:
    """Prepare (parent side) and run (child side); a model that cannot be prepared is its row.

    Raises UnknownModel / HubUnreachable for requests that cannot produce a meaningful row.
    """
    req, row = prepared(req)
    return row if row is not None else run_result(req)


def validate_and_store(
    req: ValidationRequest, run_id: int | None = None, task_id: str | None = None, dedup: bool = True
) -> ValidationResult:
    """Validate and store one model. Models sharing a compute graph (fingerprint) with one already
    validated this week on the same backend and tier get that result, recorded under their own id."""
    req, result = prepared(req)
    if result is None:
        if dedup and req.tier != "full" and not req.env:  # full tier: real weights differ per model; an env's
            # packages differ from the rows it would share with: never shared
            fp = plan_fingerprint(req)
            if fp:
                judged = resolve_precision(req.precision, BackendSpec.parse(req.backend))[0]
                with session_scope() as s:
                    shared = shared_result(s, fp, req, judged=judged)
                result = ValidationResult.from_dict(shared) if shared is not None else None
        if result is None:
            result = run_result(req)
    store_row(result, run_id=run_id, task_id=task_id)
    return result


def store_failure(
    req: ValidationRequest, exc: BaseException, run_id: int | None = None, task_id: str | None = None
) -> ValidationResult:
    """Store and return the ``reference_error`` row of a request whose validation raised ``exc``
    (an unknown model, an unreachable Hub), so nobody waits for a row that never comes."""
    row = failure_result(req, exc)
    store_row(row, run_id=run_id, task_id=task_id)
    return row


def validate_or_fail(req: ValidationRequest, run_id: int | None = None) -> ValidationResult:
    """:func:`validate_and_store`, where any failure but the database's is the request's row: an
    unknown model, an unreachable Hub, a bug of Zoo's are stored as ``reference_error`` and the
    caller goes on (a row that cannot be stored either is logged). DatabaseUnavailable propagates:
    nothing can be stored, the caller stops."""
    try:
        return validate_and_store(req, run_id=run_id)
    except DatabaseUnavailable:
        raise
    except Exception as exc:
        row = failure_result(req, exc)
        if not isinstance(exc, ZooError):
            log.warning("%s: %s; stored as reference_error", req.model_id, _signature(row))
        try:
            store_row(row, run_id=run_id)
        except DatabaseUnavailable:
            raise
        except Exception as store_exc:  # the row itself cannot be stored: say so, go on
            log.error("%s: its row could not be stored: %s", req.model_id, error_info(store_exc)["signature"])
        return row


def _signature(row: ValidationResult) -> str:
    return str((row.error or {}).get("signature", ""))
