"""Device cores claimed host-wide, one core set per model process.

A device whose runtime takes every core for the first process that starts it (the Neuron runtime,
unless ``NEURON_RT_VISIBLE_CORES`` names which: AWS, the runtime's configuration guide) must give each
model process its own cores. Job slots of one ``zoo run``, a Celery worker's processes and two ``zoo
run`` on one host all claim here, by an exclusive ``flock`` on one lock file per core set, taken in the
parent for as long as its model process runs and released when the parent lets go or dies (the kernel
drops a dead process's locks). The model process never sees the lock files: they live in
``ZOO_DEVICE_LOCK_DIR`` (``/run/lock/zoo`` as root, else ``~/.cache/zoo/locks``), under directories its
sandbox hides, and no descriptor of them is inherited.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .exceptions import BadInput

log = logging.getLogger(__name__)

POLL_S = 0.2


def parse_cores(text: str) -> list[int]:
    """``0-3,6`` -> [0, 1, 2, 3, 6] (sorted, unique); BadInput in one line for anything else."""
    cores: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first, last = int(lo), int(hi) if sep else int(lo)
        except ValueError:
            raise BadInput(f"core list {text!r}: {part!r} is not a core number or a range like 0-3") from None
        if first < 0 or last < first or last - first > 4096:
            raise BadInput(f"core list {text!r}: {part!r} is not a range of core numbers")
        cores.update(range(first, last + 1))
    if not cores:
        raise BadInput(f"core list {text!r} names no core")
    return sorted(cores)


def format_cores(cores: list[int]) -> str:
    """[0, 1, 2, 3] -> ``0-3``; a set that is not contiguous keeps its commas (``0,2``)."""
    if not cores:
        return ""
    if cores == list(range(cores[0], cores[-1] + 1)):
        return str(cores[0]) if len(cores) == 1 else f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def lock_dir() -> Path:
    from .settings import settings

    configured = settings().device_lock_dir.strip()
    if configured:
        return Path(configured)
    if os.geteuid() == 0:
        return Path("/run/lock/zoo")
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "zoo" / "locks"


def _lock_path(device: str, cores: str) -> Path:
    return lock_dir() / f"{device}-cores-{cores.replace(',', '_')}.lock"


def _try(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextlib.contextmanager
def claim(
    device: str, sets: list[str], wait_s: float | None = None, on_wait: Callable[[str], None] | None = None
) -> Iterator[str]:
    """Hold one of ``sets`` (core sets of ``device``) exclusively, host-wide, for the ``with`` block;
    yields the set. The first free one is taken; when all are held it waits (``on_wait`` hears why,
    once), at most ``wait_s`` seconds (None: for as long as it takes), then raises TimeoutError."""
    if not sets:
        raise BadInput(f"no {device} core set to claim: every core set is smaller than a model process needs")
    d = lock_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    deadline = None if wait_s is None else time.monotonic() + wait_s
    told = False
    start = hash((os.getpid(), time.monotonic_ns())) % len(sets)  # processes starting together spread out
    while True:
        for i in range(len(sets)):
            cores = sets[(start + i) % len(sets)]
            fd = _try(_lock_path(device, cores))
            if fd is not None:
                try:
                    yield cores
                finally:
                    os.close(fd)  # closing the descriptor drops the lock
                return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"every {device} core set ({', '.join(sets)}) stayed claimed for {wait_s:.0f} s")
        if not told:
            told = True
            why = f"every {device} core set ({', '.join(sets)}) is claimed by another model process: waiting"
            log.info("%s", why)
            if on_wait:
                on_wait(why)
        time.sleep(POLL_S)


@contextlib.contextmanager
def for_request(req: Any, on_wait: Callable[[str], None] | None = None) -> Iterator[dict[str, Any]]:
    """What the device of ``req``'s backend needs claimed and set up for its model process, held for the
    ``with`` block: {} for a device without core sets, else ``{"cores": "0-1", "cores_var": ...}`` plus
    the plugin's ``setup_details``. ``auto`` is resolved in the model process: nothing claimed."""
    from .backends import BackendSpec, device_plugin

    try:
        spec = BackendSpec.parse(str(req.backend))
        plugin = device_plugin(spec.device)
    except Exception:
        plugin = None
    if plugin is None or not plugin.core_sets or not plugin.cores_var:
        yield {}
        return
    setup: dict[str, Any] = dict(plugin.setup_details(spec)) if plugin.setup_details else {}
    with claim(spec.device, plugin.core_sets(), on_wait=on_wait) as cores:
        setup.update(cores=cores, cores_var=plugin.cores_var)
        yield setup
