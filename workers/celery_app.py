"""The Celery app: Redis broker from ``ZOO_BROKER_URL``, one queue per device kind.

Reliability settings: late acks (a task is acknowledged only after its row is stored), prefetch
of one, and tasks rejected back to the queue when their worker dies. The model itself always runs
in a child process, so a model crash is a result row, never a lost or looping task.
"""
from __future__ import annotations

import os

from celery import Celery

HARD_TIME_LIMIT_S = int(os.environ.get("ZOO_TASK_TIME_LIMIT", "3600"))
VISIBILITY_TIMEOUT_S = int(os.environ.get("ZOO_VISIBILITY_TIMEOUT", str(HARD_TIME_LIMIT_S + 600)))


def broker_url() -> str:
    return os.environ.get("ZOO_BROKER_URL", "redis://127.0.0.1:6379/0")


def make_app() -> Celery:
    app = Celery("zoo", broker=broker_url(), include=["workers.tasks"])
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=HARD_TIME_LIMIT_S,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue="cpu",
        broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        enable_utc=True,
        timezone="UTC",
    )
    from .schedules import beat_schedule

    app.conf.beat_schedule = beat_schedule()
    return app


app = make_app()


def queue_for(backend: str) -> str:
    """Work for a device kind goes to that kind's queue: a Trainium worker takes only neuron work."""
    return backend.split("+", 1)[0].split("@", 1)[0] or "cpu"
