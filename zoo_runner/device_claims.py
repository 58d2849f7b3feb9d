"""Device cores claimed host-wide, one core set per model process.

A device whose runtime takes every core for the first process that starts it (the Neuron runtime,
unless ``NEURON_RT_VISIBLE_CORES`` names which: AWS, the runtime's configuration guide) must give each
model process its own cores. Job slots of one ``zoo run``, a Celery worker's processes and two ``zoo
run`` on one host all claim here, by an exclusive ``flock`` on one lock file per core, taken in the
parent for as long as its model process runs and released when the parent lets go or dies (the kernel
drops a dead process's locks). A lock is per core, so core sets of other sizes (two runs with different
``ZOO_NEURON_CORES_PER_PROCESS``) still exclude each other core by core. The model process never sees
the lock files: they live in ``ZOO_DEVICE_LOCK_DIR`` (``/run/lock/zoo`` as root, else
``~/.cache/zoo/locks``, this user's own), under directories its sandbox hides, and no descriptor of them
is inherited.
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
from .interrupt import check_interrupt

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


def _lock_path(d: Path, device: str, core: int) -> Path:
    return d / f"{device}-core-{core}.lock"


def _own_dir() -> Path:
    """The lock directory, made if missing, and refused unless it is this user's alone (a directory
    another user made could hold every lock, or swap the files under a holder)."""
    import stat

    d = lock_dir()
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(d)
    if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode) or st.st_uid != os.geteuid() or st.st_mode & 0o022:
        raise BadInput(
            f"the device lock directory {d} is not this user's own (a link, another owner, or writable by "
            "others): remove it or point ZOO_DEVICE_LOCK_DIR elsewhere"
        )
    return d


def _try(path: Path) -> int | None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except OSError:
        os.close(fd)
        raise
    return fd


def _try_set(d: Path, device: str, cores: str) -> list[int] | None:
    """Every core of ``cores`` locked (one lock per core, so sets of other sizes or alignments still
    exclude each other), or none of them."""
    fds: list[int] = []
    try:
        for core in parse_cores(cores):
            fd = _try(_lock_path(d, device, core))
            if fd is None:
                break
            fds.append(fd)
        else:
            return fds
    except BaseException:
        for fd in fds:
            os.close(fd)
        raise
    for fd in fds:
        os.close(fd)
    return None


@contextlib.contextmanager
def claim(
    device: str, sets: list[str], wait_s: float | None = None, on_wait: Callable[[str], None] | None = None
) -> Iterator[str]:
    """Hold one of ``sets`` (core sets of ``device``) exclusively, host-wide, for the ``with`` block;
    yields the set. The first free one is taken; when all are held it waits (``on_wait`` hears why,
    once), at most ``wait_s`` seconds (None: for as long as it takes), then raises TimeoutError."""
    if not sets:
        raise BadInput(f"no {device} core set to claim: every core set is smaller than a model process needs")
    d = _own_dir()
    deadline = None if wait_s is None else time.monotonic() + wait_s
    told = False
    start = hash((os.getpid(), time.monotonic_ns())) % len(sets)  # processes starting together spread out
    while True:
        for i in range(len(sets)):
            cores = sets[(start + i) % len(sets)]
            fds = _try_set(d, device, cores)
            if fds is not None:
                try:
                    yield cores
                finally:
                    for fd in fds:  # closing the descriptors drops the locks
                        os.close(fd)
                return
        if deadline is not None and time.monotonic() >= deadline:
            raise TimeoutError(f"every {device} core set ({', '.join(sets)}) stayed claimed for {wait_s:.0f} s")
        if not told:
            told = True
            why = f"every {device} core set ({', '.join(sets)}) is claimed by another model process: waiting"
            log.info("%s", why)
            if on_wait:
                on_wait(why)
        check_interrupt()  # an interrupted run waits for no core
        time.sleep(POLL_S)


@contextlib.contextmanager
def for_request(req: Any, on_wait: Callable[[str], None] | None = None) -> Iterator[dict[str, Any]]:
    """What the device of ``req``'s backend needs claimed and set up for its model process, held for the
    ``with`` block: {} for a device without core sets, else ``{"cores": "0-1", "cores_var": ...}`` plus
    the plugin's ``setup_details``. ``auto`` is resolved in the model process: nothing claimed."""
    from .sandbox import device_of

    spec, plugin = device_of(req)  # (None, None) for auto: resolved in the model process, never here
    if plugin is None or not plugin.core_sets or not plugin.cores_var:
        yield {}
        return
    setup: dict[str, Any] = dict(plugin.setup_details(spec)) if plugin.setup_details else {}
    with claim(spec.device, plugin.core_sets(), on_wait=on_wait) as cores:
        setup.update(cores=cores, cores_var=plugin.cores_var)
        yield setup
