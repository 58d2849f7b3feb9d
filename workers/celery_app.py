"""The Celery app: Redis broker from ``ZOO_BROKER_URL``, one queue per device kind.

Reliability settings: late acks (a task is acknowledged only after its row is stored), prefetch
of one, and tasks rejected back to the queue when their worker dies. The model itself always runs
in a child process, so a model crash is a result row, never a lost or looping task.

Redelivery on Redis: an unacknowledged message stays in the broker's ``unacked`` hash. When its
worker dies (``kill -9``, a lost machine) any live worker, or the leading beat, puts it back on its
queue within 2 minutes: workers record which messages they hold and keep a liveness key fresh,
and a sweep restores the messages of a worker whose key has expired (``workers.recovery``). The
last resort is kombu's own: a message older than the visibility timeout is put back by any worker.
So the visibility timeout must exceed the longest a task can run (the hard time limit) plus a
margin, or a task still running is delivered a second time: the worker refuses to start otherwise
(``check_visibility``).

Environment (all optional):

- ``ZOO_TASK_TIME_LIMIT`` (s, default 3600): hard limit of one task; the model's own timeout is
  clamped below it.
- ``ZOO_VISIBILITY_TIMEOUT`` (s, default hard limit + 600): how long an unacknowledged message
  waits before it is redelivered.
- ``ZOO_VISIBILITY_MARGIN`` (s, default 60): what the visibility timeout must exceed the hard
  limit by.
- ``ZOO_SOFT_SHUTDOWN_TIMEOUT`` (s, default 30): on SIGTERM a worker lets a running task finish
  for this long, then stops it and puts its message back on the queue (cold shutdown).
- ``ZOO_MAX_ATTEMPTS`` (default 3): deliveries of one task before it is stored as a permanent
  failure instead of being tried again.
"""

from __future__ import annotations

import logging
import os
import sys

from celery import Celery, signals

from zoo_runner.settings import ConfigError, settings

log = logging.getLogger(__name__)


def _limits() -> tuple[int, int, int, int, int]:
    """The worker's time limits and attempts, read once, when the app is made; a bad value is one
    line on stderr and exit status 2."""
    s = settings()
    try:
        hard = s.task_time_limit
        visibility = s.visibility_timeout if s.visibility_timeout is not None else hard + 600
        return hard, visibility, s.visibility_margin, s.soft_shutdown_timeout, max(1, s.max_attempts)
    except ConfigError as exc:
        print(f"zoo: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


HARD_TIME_LIMIT_S, VISIBILITY_TIMEOUT_S, VISIBILITY_MARGIN_S, SOFT_SHUTDOWN_S, MAX_ATTEMPTS = _limits()
# How often a worker sweeps the broker for messages abandoned by dead workers.
RESTORE_INTERVAL_S = max(1, min(60, VISIBILITY_TIMEOUT_S // 10))

VALIDATE_TASK = "zoo.validate"  # the task name publishers send by (workers/tasks.py registers it)
TRIAGE_TASK = "zoo.triage_clusters"  # `zoo triage --clusters N` with a broker: on a worker of the backend's queue
SCHEDULER_QUEUE = "scheduler"  # beat's own tasks (sweeps, refreshes, reports): no accelerator needed


def broker_url() -> str:
    url = settings().broker_url
    return "redis://127.0.0.1:6379/0" if url is None else url


def redacted_broker_url() -> str:
    """The broker URL with its password masked, for messages."""
    from kombu.utils.url import maybe_sanitize_url

    return maybe_sanitize_url(broker_url())


def transport_options() -> dict:
    return {
        "visibility_timeout": VISIBILITY_TIMEOUT_S,
        "unacked_restore_interval": RESTORE_INTERVAL_S,
        "unacked_restore_throttle": 1,
        "socket_timeout": 30,
        "socket_connect_timeout": 10,
        "health_check_interval": 10,
    }


def result_backend_url() -> str | None:
    """Where a task that answers (only ``zoo triage --clusters``: every validation's answer is its
    row) leaves its result: the broker itself where it is Redis (results expire in a day)."""
    url = broker_url()
    return url if url.startswith(("redis://", "rediss://", "redis+socket://")) else None


def make_app() -> Celery:
    app = Celery("zoo", broker=broker_url(), backend=result_backend_url(), include=["workers.tasks"])
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_time_limit=HARD_TIME_LIMIT_S,
        task_ignore_result=True,  # but the triage's (its task says so)
        result_expires=86400,
        task_serializer="json",
        accept_content=["json"],
        task_default_queue="cpu",
        task_routes={
            "zoo.weekly_sweep": {"queue": SCHEDULER_QUEUE},
            "zoo.refresh": {"queue": SCHEDULER_QUEUE},
            "zoo.weekly_report": {"queue": SCHEDULER_QUEUE},
        },
        broker_transport_options=transport_options(),
        broker_connection_retry_on_startup=True,
        broker_connection_max_retries=None,  # a restarted broker is waited for, not given up on
        worker_soft_shutdown_timeout=float(SOFT_SHUTDOWN_S),
        worker_cancel_long_running_tasks_on_connection_loss=False,
        worker_hijack_root_logger=False,
        beat_scheduler="workers.schedules:LeaderScheduler",
        beat_max_loop_interval=10,
        enable_utc=True,
        timezone="UTC",
    )
    from .timetable import beat_schedule

    app.conf.beat_schedule = beat_schedule()
    return app


app = make_app()


def queue_for(backend: str, env: str | None = None) -> str:
    """Work for a device kind goes to that kind's queue: a Trainium worker takes only neuron work;
    work for an env (``zoo env``) to that kind's queue of the env, ``KIND:ENV``, which only workers
    started with ``--env ENV`` consume (the Neuron SDK of the next release beside this one)."""
    kind = backend.split("+", 1)[0].split("@", 1)[0] or "cpu"
    return f"{kind}:{env}" if env else kind


# ---------------------------------------------------------------- worker startup


def visibility_problem(conf=None) -> str | None:
    """One line saying why this configuration would redeliver running tasks, or None."""
    conf = conf or app.conf
    url = str(conf.broker_url or broker_url())
    if not url.startswith(("redis", "rediss", "sqs", "sentinel")):
        return None  # AMQP redelivers on connection loss, not on a timer
    vt = (conf.broker_transport_options or {}).get("visibility_timeout", 3600)
    limit = conf.task_time_limit or 0
    if not limit:
        return (
            f"the broker's visibility timeout ({vt} s) needs a hard task time limit below it: set ZOO_TASK_TIME_LIMIT"
        )
    if vt <= limit + VISIBILITY_MARGIN_S:
        return (
            f"the broker's visibility timeout ({vt} s) must exceed the hard task time limit ({limit} s) plus a margin "
            f"({VISIBILITY_MARGIN_S} s), or running tasks are delivered twice: raise ZOO_VISIBILITY_TIMEOUT or "
            "lower ZOO_TASK_TIME_LIMIT"
        )
    return None


@signals.worker_ready.connect
def _start_recovery(sender=None, **_):
    """Liveness key and sweep thread in the worker's main process (``workers.recovery``)."""
    from .recovery import worker_recovery

    worker_recovery(sender.app, sender.hostname)


@signals.task_received.connect
def _claim_delivery(sender=None, request=None, **_):
    """Record this worker as the holder of the message just received (main process)."""
    from .recovery import worker_recovery

    rec = worker_recovery(sender.app, sender.hostname)
    rec.guarded(rec.claim, request.message.delivery_tag)


@signals.worker_init.connect
def _check_on_worker_init(sender=None, **_):
    problem = visibility_problem(getattr(sender, "app", app).conf)
    if problem:
        print(f"zoo: error: {problem}", file=sys.stderr, flush=True)
        os._exit(2)  # before the pool starts: nothing to clean up, and no traceback


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (Linux /proc), children first."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode("utf-8", "replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_descendants(pid: int | None = None, sig: int | None = None) -> int:
    import signal as _signal

    sig = _signal.SIGKILL if sig is None else sig
    n = 0
    for child in descendants(pid or os.getpid()):
        try:
            os.kill(child, sig)
            n += 1
        except OSError:
            pass
    return n


@signals.worker_process_init.connect
def _pool_process_init(**_):
    """In each pool process: allow model processes, and take them down with the task.

    Pool processes are daemonic, and daemonic processes may not start children; the model
    process (forked from Zoo's forkserver) is one, and is reaped by its parent, so lift that
    (and give the process an authkey multiprocessing can send to its forkserver).
    When a task is cancelled (SIGTERM: a cold shutdown puts its message back on the queue), the
    model process and the forkserver would outlive it, the model in a session of its own: kill
    them first.
    """
    import multiprocessing
    import signal as _signal

    me = multiprocessing.current_process()
    me._config["daemon"] = False  # type: ignore[attr-defined]
    # billiard's authkey type refuses to be pickled by multiprocessing's forkserver: rewrap it
    authkey = multiprocessing.process.AuthenticationString(bytes(me.authkey))
    me._config["authkey"] = authkey  # type: ignore[attr-defined]

    def _on_term(signum, frame):
        kill_descendants()
        os._exit(128 + signum)

    _signal.signal(_signal.SIGTERM, _on_term)
