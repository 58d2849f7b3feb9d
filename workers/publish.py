"""Publishing validation tasks on the backends' queues: the Celery and Redis side of a sweep or a run.

:func:`enqueue_groups` is the ``publish`` that :func:`services.planning.plan_sweep` takes;
:func:`enqueue_models` publishes one task per model (``zoo run`` with a broker, ``POST /validations``).
The Celery app and its tasks are imported when something is published, not when this module is.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from services.planning import Candidate, Group
from zoo_runner.exceptions import ZooError


def env_consumed(env: str, timeout: float = 1.0) -> bool:
    """Whether a running worker consumes a queue of ``env`` (``KIND:ENV``, ``zoo worker --env``): asked of
    the workers over the broker, answered within ``timeout``; False where none answers."""
    from .celery_app import app

    try:
        queues = app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception:  # a broker that does not answer: no worker is known to have it
        return False
    return any(
        str(q.get("name", "")).endswith(f":{env}") for qs in queues.values() for q in (qs or []) if isinstance(q, dict)
    )


def task_args(
    g: Group,
    backend: str,
    tier: str,
    run_id: int | None,
    timeout: float,
    precision: str = "auto",
    env: str | None = None,
) -> tuple[list, dict]:
    """(args, kwargs) of the ``zoo.validate`` task of group ``g``: only what differs from
    ValidationRequest's defaults, so messages are small and cheap to build."""
    req = {"model_id": g.leader.model_id, "backend": backend, "tier": tier, "timeout_s": float(timeout)}
    if precision and precision != "auto":
        req["precision"] = precision
    if env:
        req["env"] = env
    return [req, run_id], ({"followers": [f.model_id for f in g.followers]} if g.followers else {})


_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def redis_messages(app, task_name: str, queue: str, payloads: Iterable[tuple[str, list, dict]]):
    """(task id, raw broker message) for each (task id, args, kwargs): the very envelope kombu's Redis
    transport writes for ``apply_async`` (Celery's protocol 2, JSON body), built without its
    per-message overhead. The header's time limit is left empty: the worker's own applies."""
    import base64
    import json

    template = dict(
        app.amqp.as_task_v2(
            "0",
            task_name,
            args=[],
            kwargs={},
            argsrepr="",
            kwargsrepr="",
            time_limit=None,
            soft_time_limit=None,
            ignore_result=True,
            origin=f"gen{os.getpid()}@{socket.gethostname()}",
        ).headers
    )
    reply_to = app.thread_oid
    dumps, b64 = json.dumps, base64.b64encode
    for tid, args, kwargs in payloads:
        headers = dict(template, id=tid, root_id=tid, argsrepr=repr(args), kwargsrepr=repr(kwargs))
        body = b64(dumps([args, kwargs, _EMBED]).encode()).decode()
        msg = {
            "body": body,
            "content-encoding": "utf-8",
            "content-type": "application/json",
            "headers": headers,
            "properties": {
                "correlation_id": tid,
                "reply_to": reply_to,
                "delivery_mode": 2,
                "delivery_info": {"exchange": "", "routing_key": queue},
                "priority": 0,
                "body_encoding": "base64",
                "delivery_tag": str(uuid.uuid4()),
            },
        }
        yield tid, dumps(msg)


def enqueue_groups(
    groups: list[Group],
    backend: str,
    tier: str,
    run_id: int | None,
    timeout: float = 600.0,
    batch: int = 2000,
    queue: str | None = None,
    precision: str = "auto",
    env: str | None = None,
) -> list[str]:
    """Publish one validation task per group on the backend's queue (of ``env``'s workers, when
    given: ``cpu:NAME``), each judged at ``precision`` (``auto``: the backend's declared one).

    On Redis the first goes through Celery (declaring the queue) and the rest are written as the
    same messages in pipelined ``LPUSH`` batches (``batch`` per round trip); on other brokers each
    goes through ``apply_async`` in a kombu publish batch."""
    from kombu.exceptions import OperationalError

    from zoo_runner.exceptions import BrokerUnavailable

    from .celery_app import VALIDATE_TASK, app, queue_for, redacted_broker_url

    queue = queue or queue_for(backend, env)
    ids: list[str] = []
    if not groups:
        return ids
    payloads = [(str(uuid.uuid4()), *task_args(g, backend, tier, run_id, timeout, precision, env)) for g in groups]
    if run_id is not None:  # the run's state is the database's: a broker restarted empty loses nothing
        _record(run_id, queue, groups, payloads)
    try:
        with app.producer_or_acquire() as producer:
            producer.connection.ensure_connection(max_retries=2, timeout=5)

            def send(tid: str, args: list, kwargs: dict) -> str:
                # by name: this module is what the tasks publish with, so it does not import them
                return app.send_task(
                    VALIDATE_TASK,
                    args=args,
                    kwargs=kwargs,
                    task_id=tid,
                    queue=queue,
                    producer=producer,
                    time_limit=None,
                    soft_time_limit=None,
                    ignore_result=True,
                ).id

            ids.append(send(*payloads[0]))
            rest = payloads[1:]
            if producer.connection.transport.driver_type == "redis":
                with producer.channel.conn_or_acquire() as client:
                    pipe = client.pipeline(transaction=False)
                    for tid, raw in redis_messages(app, VALIDATE_TASK, queue, rest):
                        pipe.lpush(queue, raw)
                        ids.append(tid)
                        if len(pipe) >= batch:
                            pipe.execute()
                    pipe.execute()
            else:
                with producer.batch(max_size=batch):
                    ids.extend(send(*p) for p in rest)
    except (OperationalError, OSError) as exc:
        raise BrokerUnavailable(f"broker {redacted_broker_url()} is unreachable: {exc}") from exc
    return ids


def _record(run_id: int, queue: str, groups: list[Group], payloads: list[tuple[str, list, dict]]) -> None:
    from db import repository
    from db.session import session_scope

    with session_scope() as s:
        repository.record_run_tasks(
            s, run_id, ((tid, g.leader.model_id, queue, a, k) for g, (tid, a, k) in zip(groups, payloads))
        )


def enqueue_models(
    model_ids: list[str],
    backend: str,
    tier: str,
    run_id: int | None,
    timeout: float,
    precision: str = "auto",
    env: str | None = None,
) -> list[str]:
    """One validation task per model on the backend's queue (``env``'s), published in pipelined batches."""
    return enqueue_groups(
        [Group(Candidate(model_id=mid, downloads=0, weight=0.0)) for mid in model_ids],
        backend,
        tier,
        run_id,
        timeout,
        precision=precision,
        env=env,
    )


def triage_clusters_remote(
    backend: str, n: int, tier: str, timeout_s: float, say: Callable[[str], None] | None = None
) -> list[dict[str, Any]]:
    """``zoo triage --clusters N`` through Celery: one task on the backend's queue, its result
    waited for (with a line every 30 s while no worker has it). Raises ZooError in one line where
    the broker cannot carry a result, or the worker's triage failed."""
    import time

    from .celery_app import HARD_TIME_LIMIT_S, TRIAGE_TASK, app, queue_for, redacted_broker_url, result_backend_url

    if result_backend_url() is None:
        raise ZooError(
            f"the triage through Celery needs a Redis broker to bring its result back ({redacted_broker_url()}); "
            "`--here` triages in this process"
        )
    queue = queue_for(backend)
    # the ladder's rungs and the minifier's trials per cluster, within a task's hard limit (a worker holds
    # the next message it reserved that long, and the broker's visibility timeout is checked against it)
    limit = min(n * timeout_s * 5 + 300, HARD_TIME_LIMIT_S)
    wait_s = 3600 + limit  # an hour to be taken by a worker, then its limit
    res = app.send_task(
        TRIAGE_TASK,
        args=[backend, n],
        kwargs={"tier": tier, "timeout_s": timeout_s},
        queue=queue,
        time_limit=limit,
        expires=3600,  # not taken within the hour (no worker of that queue): dropped, never run for nobody
    )
    if say:
        say(f"sent to queue {queue!r} ({redacted_broker_url()}), task {res.id}; a worker of that queue triages")
    start = last = time.monotonic()
    answered = False
    try:
        while not res.ready():
            if time.monotonic() - start > wait_s:
                raise ZooError(f"no answer for the triage task {res.id} after {wait_s:.0f} s (queue {queue!r})")
            if say and time.monotonic() - last >= 30:
                last = time.monotonic()
                state = "no worker has taken it yet" if res.state == "PENDING" else f"{res.state.lower()} on a worker"
                say(f"{time.monotonic() - start:.0f} s: {state} (queue {queue!r})")
            time.sleep(1)
        answered = True
        try:
            return list(res.get(propagate=True, disable_sync_subtasks=False))
        except Exception as exc:
            raise ZooError(f"the worker's triage failed: {type(exc).__name__}: {str(exc)[:300]}") from exc
    finally:
        with contextlib.suppress(Exception):  # never hides the error above
            if not answered:  # given up on, or interrupted: not run later for nobody
                res.revoke(terminate=True)
            res.forget()
