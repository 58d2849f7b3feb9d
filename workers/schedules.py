"""Celery beat: a daily top-K refresh, a weekly full sweep and the weekly report; one beat acts.

Any number of ``zoo beat`` processes may run (one per machine, for availability); they elect a
leader through a Redis lock on the broker (``SET NX PX``, renewed on every tick, released on exit)
and only the leader sends due tasks. A standby takes over within ``ZOO_BEAT_LOCK_TTL`` seconds of
the leader's death. The sweeps are idempotent on their own too: each is claimed once per period
in the database (``services.planning.plan_sweep``), so a sweep sent twice still runs once.

The leader also sweeps the broker for dead workers' unacknowledged tasks every 10 s
(``workers.recovery``), as every worker does, so they are back on their queues even while no
worker of their kind is alive.

Environment: ``ZOO_SCHEDULE_BACKENDS`` (comma-separated backend specs, default ``cpu``),
``ZOO_DAILY_TOP_K`` (default 100), ``ZOO_SCHEDULE_TIER`` (default tiny), ``ZOO_BEAT_LOCK_TTL``
(seconds, default 30), and for tests and demos ``ZOO_BEAT_SWEEP_EVERY_S`` (send the weekly sweep
every N seconds instead of Mondays 00:30 UTC).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid

from celery.beat import PersistentScheduler

from zoo_runner.settings import settings

from .reconcile import Reconciler
from .recovery import SWEEP_S, Recovery

log = logging.getLogger(__name__)

LOCK_KEY = "zoo:beat:leader"
_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class LeaderScheduler(PersistentScheduler):
    """A PersistentScheduler that sends due tasks only while it holds the leader lock."""

    def __init__(self, *args, **kwargs):
        self.lock_ttl_s = max(3.0, settings().beat_lock_ttl)
        self.node = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.is_leader = False
        self._announced = False
        self._redis = None
        super().__init__(*args, **kwargs)

    def _client(self):
        url = str(self.app.conf.broker_url or "")
        if not url.startswith(("redis://", "rediss://", "unix://")):
            return None
        if self._redis is None:
            import redis

            self._redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=5)
        return self._redis

    def hold_lock(self) -> bool:
        client = self._client()
        if client is None:  # no Redis to elect on: a single beat is assumed
            return True
        import redis

        ttl_ms = int(self.lock_ttl_s * 1000)
        try:
            got = (
                bool(client.set(LOCK_KEY, self.node, nx=True, px=ttl_ms))
                or client.eval(_EXTEND, 1, LOCK_KEY, self.node, ttl_ms) == 1
            )
        except redis.RedisError as exc:
            if self.is_leader:
                log.warning("beat %s: the broker is unreachable (%s): standing by", self.node, exc)
            got = False
        if got != self.is_leader or not self._announced:
            self._announced = True
            log.warning(
                "beat %s: %s", self.node, "leader: sending due tasks" if got else "standby: another beat is the leader"
            )
        self.is_leader = got
        return got

    def tick(self, *args, **kwargs):
        if not self.hold_lock():
            return min(self.lock_ttl_s / 3, self.max_interval)
        self.recovery().maybe_sweep()
        self.reconciler().tick()
        return min(super().tick(*args, **kwargs), self.lock_ttl_s / 3, SWEEP_S)

    def reconciler(self) -> Reconciler:
        if getattr(self, "_reconciler", None) is None:
            self._reconciler = Reconciler.for_fleet()
        return self._reconciler

    def recovery(self) -> Recovery:
        if getattr(self, "_recovery", None) is None:
            self._recovery = Recovery(self.app)
        return self._recovery

    def close(self):
        if getattr(self, "_recovery", None) is not None:
            self._recovery.close()
        try:
            client = self._client()
            if client is not None and self.is_leader:
                client.eval(_RELEASE, 1, LOCK_KEY, self.node)
        except Exception:  # the broker is gone: the lock expires by itself
            pass
        super().close()
