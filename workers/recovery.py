"""Prompt recovery: a dead worker's unacknowledged tasks go back on their queue within 2 minutes.

Kombu's Redis transport keeps a delivered, unacknowledged message in the ``unacked`` hash (and
its delivery time in ``unacked_index``) until it is acknowledged; it redelivers one only after the
visibility timeout (an hour and more, since that must exceed the hard task limit). It does not
record which worker holds a message, so Zoo does:

- every worker process keeps a liveness key, ``zoo:worker:<node>/<pid>/<nonce>``, that expires
  ``LOST_AFTER_S`` (30 s) after its last refresh; a thread in the worker's main process refreshes
  it every ``HEARTBEAT_S`` (5 s);
- when a worker receives a message (``task_received``, in its main process) it records, in one
  Lua script, ``zoo:unacked_owner[delivery tag] = "<worker id> <unacked_index score>"`` and
  refreshes its liveness key;
- a sweep (every ``SWEEP_S``, 10 s, by a thread in every worker and by the leading beat) finds the
  owners whose liveness key is gone. An owner missing for ``GRACE_S`` (20 s, measured by Redis's
  clock, across sweeps) is dead: each of its messages goes back on its queue, in a transaction
  that watches the owner record and the unacked entry, so a message is restored only while the
  dead worker's own delivery of it (same delivery time) is still unacknowledged. The grace keeps
  a broker restart, after which every liveness key may have expired at once, from being taken for
  the death of every worker.

Worst case with these defaults: the key expires at most 30 s after the death, a sweep sees it
within 10 s, and the restore follows 20 s later: 60 s (a worker started after the death sweeps at
once, then every 10 s). A live worker's task is never put back (its key is refreshed every 5 s);
a worker that cannot reach Redis, or whose process stalls, for longer than 30 s + 20 s is taken
for dead, as the visibility timeout would after its own, longer, delay. The visibility
timeout stays the last resort (a worker killed between kombu storing a message and Zoo recording
its owner, a few milliseconds).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import Any

from kombu.utils.encoding import bytes_to_str
from kombu.utils.json import loads

log = logging.getLogger(__name__)

HEARTBEAT_S = 5.0
LOST_AFTER_S = 30
SWEEP_S = 10.0
GRACE_S = 20

OWNERS_KEY = "zoo:unacked_owner"  # delivery tag -> "<worker id> <unacked_index score>"
SUSPECTS_KEY = "zoo:workers_lost"  # worker id -> Redis time (s) its liveness key was first missed
ALIVE_PREFIX = "zoo:worker:"

# KEYS: unacked_index, owners, liveness key; ARGV: delivery tag, worker id, ttl
_CLAIM = """
redis.call('set', KEYS[3], '1', 'EX', ARGV[3])
local score = redis.call('zscore', KEYS[1], ARGV[1])
if score then redis.call('hset', KEYS[2], ARGV[1], ARGV[2] .. ' ' .. score) end
return score
"""
# KEYS: owners, unacked: forget the owners of acknowledged messages
_FORGET_ACKED = """
local n = 0
for _, tag in ipairs(redis.call('hkeys', KEYS[1])) do
  if redis.call('hexists', KEYS[2], tag) == 0 then redis.call('hdel', KEYS[1], tag); n = n + 1 end
end
return n
"""


class Recovery:
    """Liveness, ownership and the sweep, on the broker of ``app`` (a no-op on non-Redis brokers)."""

    def __init__(self, app: Any, worker_id: str | None = None):
        self.app = app
        self.worker_id = worker_id
        self._conn: Any = None
        self._channel: Any = None
        self._lock = threading.Lock()
        self._next_sweep = 0.0
        self._failing = False

    def channel(self) -> Any:
        """A kombu Redis channel of our own (its key names, routing and client), or None."""
        with self._lock:
            if self._conn is None:
                from kombu.transport.redis import Channel

                conn = self.app.connection_for_write()
                try:
                    ch = conn.default_channel
                except Exception:
                    conn.release()  # the broker is down: connect again next time
                    raise
                self._conn, self._channel = conn, ch if isinstance(ch, Channel) else None
            return self._channel

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.release()
            self._conn = self._channel = None

    # ------------------------------------------------------------ the worker's side

    def alive_key(self, worker_id: str) -> str:
        return ALIVE_PREFIX + worker_id

    def heartbeat(self) -> None:
        ch = self.channel()
        if ch is not None and self.worker_id:
            with ch.conn_or_acquire() as client:
                client.set(self.alive_key(self.worker_id), "1", ex=LOST_AFTER_S)

    def claim(self, delivery_tag: str) -> None:
        """Record that this worker holds ``delivery_tag`` (kombu stored it in ``unacked`` already)."""
        ch = self.channel()
        if ch is None or not self.worker_id or not delivery_tag:
            return
        with ch.conn_or_acquire() as client:
            keys = [ch.unacked_index_key, OWNERS_KEY, self.alive_key(self.worker_id)]
            client.eval(_CLAIM, len(keys), *keys, delivery_tag, self.worker_id, LOST_AFTER_S)

    # ------------------------------------------------------------ the sweep

    def sweep(self) -> int:
        """Put the messages of workers gone for ``GRACE_S`` back on their queues; returns how many."""
        ch = self.channel()
        if ch is None:
            return 0
        with ch.conn_or_acquire() as client:
            client.eval(_FORGET_ACKED, 2, OWNERS_KEY, ch.unacked_key)
            held: dict[str, list[tuple[str, bytes]]] = {}
            for tag, record in client.hgetall(OWNERS_KEY).items():
                held.setdefault(bytes_to_str(record).rsplit(" ", 1)[0], []).append((bytes_to_str(tag), record))
            ids = list(held)
            with client.pipeline(transaction=False) as pipe:
                for wid in ids:
                    pipe.exists(self.alive_key(wid))
                alive = dict(zip(ids, pipe.execute())) if ids else {}
            now = int(client.time()[0])
            stale = [bytes_to_str(w) for w in client.hkeys(SUSPECTS_KEY)]
            forget = [w for w in stale if alive.get(w, 1)]  # seen alive, or holding nothing
            if forget:
                client.hdel(SUSPECTS_KEY, *forget)
            restored = 0
            for wid in (w for w in ids if not alive[w]):
                client.hsetnx(SUSPECTS_KEY, wid, now)
                since = int(client.hget(SUSPECTS_KEY, wid) or now)
                if now - since < GRACE_S:
                    continue
                n = sum(self._restore(ch, client, wid, tag, record) for tag, record in held[wid])
                client.hdel(SUSPECTS_KEY, wid)
                restored += n
                if n:
                    log.warning(
                        "worker %s is gone (no liveness for over %d s): %d unacknowledged task(s) put back on "
                        "the queue",
                        wid,
                        now - since + LOST_AFTER_S,
                        n,
                    )
            return restored

    def _restore(self, ch: Any, client: Any, wid: str, tag: str, record: bytes) -> bool:
        """Move one message from ``unacked`` back to its queue while ``record`` still describes
        it and its worker ``wid`` is still without a liveness key."""
        score = float(bytes_to_str(record).rsplit(" ", 1)[1])
        done = False

        def txn(pipe: Any) -> None:
            nonlocal done
            done = False
            mine = pipe.hget(OWNERS_KEY, tag) == record and not pipe.exists(self.alive_key(wid))
            current = pipe.zscore(ch.unacked_index_key, tag)
            raw = pipe.hget(ch.unacked_key, tag)
            pipe.multi()
            if not mine:
                return  # acknowledged, restored or claimed by another worker since the read, or it is back
            pipe.hdel(OWNERS_KEY, tag)
            if raw is None or current != score:
                return  # this delivery is over; another may be under way and is not ours to touch
            pipe.zrem(ch.unacked_index_key, tag).hdel(ch.unacked_key, tag)
            message, exchange, routing_key = loads(bytes_to_str(raw))
            ch._do_restore_message(message, exchange, routing_key, pipe, leftmost=False)  # to the front, as kombu does
            done = True

        client.transaction(txn, OWNERS_KEY, ch.unacked_key, ch.unacked_index_key, self.alive_key(wid))
        return done

    def maybe_sweep(self) -> int:
        """Sweep if ``SWEEP_S`` has passed since the last one; never raises (logs once per outage)."""
        if time.monotonic() < self._next_sweep:
            return 0
        self._next_sweep = time.monotonic() + SWEEP_S
        return self.guarded(self.sweep) or 0

    def guarded(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)``, or None if it failed (logged once until the broker answers again)."""
        try:
            out = fn(*args)
        except Exception as exc:  # the broker is down or restarting: try again next time
            if not self._failing:
                log.warning(
                    "worker recovery: %s failed (%s: %s); retrying",
                    getattr(fn, "__name__", fn),
                    type(exc).__name__,
                    exc,
                )
            self._failing = True
            return None
        if self._failing:
            log.info("worker recovery: the broker answers again")
        self._failing = False
        return out

    def run_forever(self) -> None:
        while True:
            self.guarded(self.heartbeat)
            self.maybe_sweep()
            time.sleep(HEARTBEAT_S)


_worker: Recovery | None = None
_worker_pid = 0
_start_lock = threading.Lock()


def worker_recovery(app: Any, node: str) -> Recovery:
    """This worker process's Recovery, its heartbeat-and-sweep thread started on first use."""
    global _worker, _worker_pid
    with _start_lock:
        if _worker is None or _worker_pid != os.getpid():
            _worker = Recovery(app, f"{node}/{os.getpid()}/{uuid.uuid4().hex[:8]}")
            _worker_pid = os.getpid()
            _worker.guarded(_worker.heartbeat)
            threading.Thread(target=_worker.run_forever, name="zoo-recovery", daemon=True).start()
            log.info(
                "worker recovery: %s, liveness every %.0f s (lost after %d s), sweeping every %.0f s",
                _worker.worker_id,
                HEARTBEAT_S,
                LOST_AFTER_S,
                SWEEP_S,
            )
        return _worker
