"""Celery tasks.

``zoo.validate`` is safe to deliver more than once: a delivery whose rows are already stored
(its worker died between storing and acknowledging) only acknowledges; rows are upserted on
(model, revision, backend, tier, harness version, week) anyway. Every delivery is counted, and
after ``ZOO_MAX_ATTEMPTS`` the task is stored as a permanent failure instead of tried again, so
a task that kills its worker cannot loop forever.
"""

from __future__ import annotations

import logging
from typing import Any

from zoo_runner.exceptions import DatabaseUnavailable, ZooError
from zoo_runner.request import ValidationRequest, error_info, share_of_cores
from zoo_runner.result import ValidationResult, failure_result
from zoo_runner.statuses import Status

from .celery_app import HARD_TIME_LIMIT_S, MAX_ATTEMPTS, TRIAGE_TASK, VALIDATE_TASK, app

log = logging.getLogger(__name__)

# What a task needs besides the model's own run: the Hub, the database, the fan-out.
TASK_OVERHEAD_S = max(5, min(120, HARD_TIME_LIMIT_S // 5))


def _failure_row(
    req: ValidationRequest, status: Status, type_: str, message: str, attempts: int, tb: str | None = None
) -> ValidationResult:
    """A permanent failure: the task gave up after ``attempts`` deliveries."""
    result = failure_result(req, None, status, error=error_info(type_=type_, message=message, tb=tb))
    result.details.update(permanent_failure=True, attempts=attempts)
    return result


def _requests(request: dict, followers: list[str] | None) -> list[ValidationRequest]:
    lead = ValidationRequest.from_dict(request)
    # within the hard limit, a cold first compile's extra time included (neuron+neuron: ZOO_NEURON_COLD_COMPILE_S)
    from zoo_runner.launcher import cold_compile_reserve

    ceiling = HARD_TIME_LIMIT_S - TASK_OVERHEAD_S - cold_compile_reserve(lead.backend)
    lead.timeout_s = min(lead.timeout_s, max(1.0, ceiling))
    if lead.threads is None:  # this worker's share of the cores (zoo worker --concurrency)
        lead.threads = share_of_cores(int(app.conf.get("zoo_concurrency") or 1))
    out = [lead]
    for mid in followers or []:
        out.append(
            ValidationRequest(
                model_id=mid,
                backend=lead.backend,
                tier=lead.tier,
                seed=lead.seed,
                timeout_s=lead.timeout_s,
                memory_gb=lead.memory_gb,
                precision=lead.precision,
                threads=lead.threads,
                env=lead.env,
            )
        )
    return out


@app.task(name=VALIDATE_TASK, bind=True, max_retries=None)
def validate_task(self, request: dict, run_id: int | None = None, followers: list[str] | None = None) -> str:
    """Validate one model (and the models sharing its fingerprint) and store a row for each;
    returns the first model's status."""
    from db import repository
    from db.session import session_scope
    from services import validation  # imports torch: only where a task runs, not where one is sent

    reqs = _requests(request, followers)
    task_id = self.request.id
    try:
        with session_scope() as s:
            done = repository.models_stored_by_task(s, task_id) if task_id else {}
        todo = [r for r in reqs if r.model_id not in done]
        if not todo:
            log.info(
                "task %s: its %d row(s) are stored already (delivered again after its worker died before the ack)",
                task_id,
                len(reqs),
            )
            return done[reqs[0].model_id]
        attempts = 1
        if task_id:
            with session_scope() as s:
                attempts = repository.record_attempt(s, task_id, reqs[0].model_id, reqs[0].backend, reqs[0].tier)
    except DatabaseUnavailable as exc:
        # nothing can be stored now: try again later rather than lose the task
        raise self.retry(exc=exc, countdown=min(300, 15 * (self.request.retries + 1))) from exc

    if attempts > MAX_ATTEMPTS:
        msg = (
            f"gave up after {MAX_ATTEMPTS} deliveries: the worker running this task died each time"
            f" (killed, out of memory, or past the hard time limit of {HARD_TIME_LIMIT_S} s)"
        )
        log.error("task %s (%s): %s", task_id, reqs[0].model_id, msg)
        for r in todo:
            validation.store_row(_failure_row(r, Status.CRASH, "WorkerLost", msg, attempts - 1), run_id, task_id)
        with session_scope() as s:
            repository.note_attempt_error(s, task_id, msg, gave_up=True)
        return Status.CRASH.value

    status = done.get(reqs[0].model_id)
    for r in todo:
        try:
            res = validation.validate_and_store(r, run_id=run_id, task_id=task_id)
        except DatabaseUnavailable as exc:
            raise self.retry(exc=exc, countdown=min(300, 15 * attempts)) from exc
        except ZooError as exc:
            # an unknown model or an unreachable Hub still leaves a row, so nobody waits forever
            res = validation.store_failure(r, exc, run_id, task_id)
        except Exception as exc:  # a bug of Zoo's: retried, then stored as Zoo's own failure
            info = error_info(exc)
            with session_scope() as s:
                repository.note_attempt_error(
                    s, task_id, info["traceback"] or str(exc), gave_up=attempts >= MAX_ATTEMPTS
                )
            if attempts < MAX_ATTEMPTS:
                log.warning(
                    "task %s (%s), attempt %d of %d: %s; retrying",
                    task_id,
                    r.model_id,
                    attempts,
                    MAX_ATTEMPTS,
                    info["signature"],
                )
                raise self.retry(exc=exc, countdown=min(300, 10 * attempts)) from exc
            res = _failure_row(
                r,
                Status.REFERENCE_ERROR,
                type(exc).__name__,
                f"gave up after {attempts} attempts: {exc}",
                attempts,
                info["traceback"],
            )
            validation.store_row(res, run_id, task_id)
        if status is None:
            status = str(res.status)
    return status or "unknown"


@app.task(name=TRIAGE_TASK, bind=True, ignore_result=False, acks_late=False, track_started=True)
def triage_clusters_task(
    self, backend: str, n: int, tier: str = "tiny", timeout_s: float | None = None
) -> list[dict[str, Any]]:
    """``zoo triage --clusters N`` on a worker of the backend's queue: the files go under this
    worker's ZOO_TRIAGE_DIR (the API serves them from there); returns the summaries, each with
    the worker's name. Not acknowledged late: a triage is not started again by another worker."""
    from services.triage import triage_clusters
    from zoo_runner.settings import settings

    done = triage_clusters(backend, n, settings().triage_dir, tier=tier, timeout_s=timeout_s)
    return [{**d, "worker": self.request.hostname} for d in done]


@app.task(name="zoo.weekly_report")
def weekly_report_task(week: str | None = None) -> str:
    from dashboards.report import store_weekly_report

    return store_weekly_report(week)


@app.task(name="zoo.refresh")
def refresh_task(
    top: int = 100, backend: str | None = None, tier: str = "tiny", backends: list[str] | None = None, sync: bool = True
) -> list[dict]:
    """Daily top-K refresh: sync the catalog, then enqueue the K models most in need of a run
    (download weight x staleness, with triggers), once per day and backend."""
    from services.planning import plan_sweep

    from .publish import enqueue_groups
    from .timetable import schedule_backends

    return [
        plan_sweep("daily", b, tier, publish=enqueue_groups, top=top, sync=sync)
        for b in (backends or ([backend] if backend else schedule_backends()))
    ]


@app.task(name="zoo.weekly_sweep")
def weekly_sweep_task(backends: list[str] | None = None, tier: str = "tiny", sync: bool = True) -> list[dict]:
    """Weekly full sweep: every catalog model without a result this ISO week, once per week and
    backend however often it is delivered (two beats, a redelivery)."""
    from services.planning import plan_sweep

    from .publish import enqueue_groups
    from .timetable import schedule_backends

    return [plan_sweep("weekly", b, tier, publish=enqueue_groups, sync=sync) for b in (backends or schedule_backends())]
