"""A run's state comes from the database, not from the broker's queues.

Every task a run publishes is kept in ``run_tasks`` (:func:`workers.publish.enqueue_groups`). Redis
here keeps nothing on disk: restarted, it comes back empty, and the queued tasks (and kombu's record
of the unacknowledged ones) are gone. The broker's *epoch*, a random marker key Zoo sets in it,
tells: a marker that changed or vanished means the broker lost its state. Then every task of the
run with no stored row is published again under its own id, except one a worker has started within
the hard time limit (it is running still, and stores its row when it ends). A task delivered twice
stores one row: the worker skips a task whose row is stored (``models_stored_by_task``), and rows
are unique per model, backend, tier, week and precision.

:class:`Reconciler` is what the waiting ``zoo run`` calls every few seconds; a broker that is down
at that moment is tried again at the next call.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
import uuid
from collections.abc import Callable

log = logging.getLogger(__name__)

EPOCH_KEY = "zoo:broker-epoch"


def _client():
    from .celery_app import broker_url

    url = broker_url()
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None  # another broker keeps its queues: nothing to reconcile
    import redis

    return redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)


def broker_epoch() -> str | None:
    """The broker's epoch: its marker, set now if it has none (None: not Redis, or unreachable)."""
    client = _client()
    if client is None:
        return None
    try:
        client.set(EPOCH_KEY, uuid.uuid4().hex, nx=True)
        value = client.get(EPOCH_KEY)
    except Exception as exc:  # redis.RedisError, OSError: down for now
        log.debug("broker epoch unreadable: %s", exc)
        return None
    finally:
        client.close()
    return value.decode() if value else None


def republish_lost(run_id: int, stale_after_s: float | None = None) -> list[str]:
    """Publish again every task of ``run_id`` with no row that no worker is running; returns their ids."""
    from db import repository
    from db.session import session_scope

    from .celery_app import HARD_TIME_LIMIT_S, VALIDATE_TASK, app

    stale = dt.timedelta(seconds=stale_after_s if stale_after_s is not None else HARD_TIME_LIMIT_S + 60)
    now = dt.datetime.now(dt.timezone.utc)
    with session_scope() as s:
        pending = repository.pending_run_tasks(s, run_id)

    def running(t) -> bool:
        if t.attempted_at is None:
            return False
        at = t.attempted_at if t.attempted_at.tzinfo else t.attempted_at.replace(tzinfo=dt.timezone.utc)
        return now - at < stale

    lost = [t for t in pending if not running(t)]
    if not lost:
        return []
    from .publish import redis_messages

    client = _client()
    if client is None:
        return []
    try:  # straight onto the queues' lists, as enqueue_groups does: a broker restarted empty has no
        # exchange bindings left for a publish through Celery to find
        pipe = client.pipeline(transaction=False)
        for queue in sorted({t.queue for t in lost}):
            batch = [(t.task_id, t.args, t.kwargs) for t in lost if t.queue == queue]
            for _tid, raw in redis_messages(app, VALIDATE_TASK, queue, batch):
                pipe.lpush(queue, raw)
        pipe.execute()
    finally:
        client.close()
    ids = [t.task_id for t in lost]
    with session_scope() as s:
        repository.note_republished(s, ids)
    return ids


class Reconciler:
    """Watches the broker's epoch; when it changes, publishes again the lost tasks of the runs that
    ``runs()`` names (``zoo run``: its own; the leading beat: every recent run with a task pending).
    The first epoch read is remembered, not acted on."""

    def __init__(self, runs: Callable[[], list[int]], epoch: str | None = None, every_s: float = 5.0, say=None) -> None:
        self.runs, self.epoch, self.every_s = runs, epoch, every_s
        self.say = say or (lambda text: log.warning("%s", text))
        self.last = time.monotonic() if epoch is not None else 0.0
        self.republished = 0

    @classmethod
    def for_run(cls, run_id: int, epoch: str | None, say=None) -> Reconciler:
        return cls(lambda: [run_id], epoch, say=say)

    @classmethod
    def for_fleet(cls, horizon_days: float = 8.0) -> Reconciler:
        def recent() -> list[int]:
            from db import repository
            from db.session import session_scope

            with session_scope() as s:
                since = dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=horizon_days)
                return repository.runs_with_pending_tasks(s, since)

        return cls(recent, every_s=10.0)

    def tick(self) -> int:
        """Check now if ``every_s`` has passed; returns how many tasks were published again."""
        if time.monotonic() - self.last < self.every_s:
            return 0
        self.last = time.monotonic()
        epoch = broker_epoch()
        if epoch is None or epoch == self.epoch or self.epoch is None:
            self.epoch = epoch or self.epoch
            return 0
        try:
            runs = self.runs()
            ids = [tid for run_id in runs for tid in republish_lost(run_id)]
        except Exception as exc:  # the broker went away again, or the database: next tick
            log.warning("lost tasks not published again yet: %s", exc)
            return 0
        self.epoch = epoch
        if ids:
            self.republished += len(ids)
            self.say(
                f"the broker lost its queues (restarted empty?): {len(ids)} task(s) of run(s) "
                f"{', '.join(map(str, runs))} with no result published again"
            )
        return len(ids)
