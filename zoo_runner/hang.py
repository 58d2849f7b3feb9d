"""Where a hung model process was stuck: its Python stacks, asked for before it is killed.

The model process registers :mod:`faulthandler` on ``SIGUSR1`` (:func:`listen`); at the deadline
the launcher sends that signal (:func:`ask_for_stacks`), gives the process a moment to write every
thread's stack to its stderr, and only then kills it. The timeout row then says where it was
(:func:`stuck`) and carries the stacks in its traceback, so a cluster of timeouts points a
vendor at the call that never returned (a compiler pass, a lock, a loop) instead of a bare budget.
"""

from __future__ import annotations

import os
import re
import signal
import time
from dataclasses import dataclass
from pathlib import Path

SIGNAL = signal.SIGUSR1
_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')


def listen() -> None:
    """In the model process: dump every thread's Python stack to stderr on :data:`SIGNAL`."""
    import faulthandler

    faulthandler.register(SIGNAL, all_threads=True, chain=False)


def ask_for_stacks(pid: int, stderr: Path | str, grace_s: float = 3.0) -> None:
    """Send :data:`SIGNAL` to ``pid`` and wait until its stderr stops growing (at most ``grace_s``)."""
    try:
        before = os.path.getsize(stderr)
    except OSError:
        before = 0
    try:
        os.kill(pid, SIGNAL)
    except (ProcessLookupError, PermissionError):
        return
    deadline = time.monotonic() + grace_s
    size, still = before, 0
    while time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            now = os.path.getsize(stderr)
        except OSError:
            return
        still = still + 1 if now == size and now > before else 0
        size = now
        if still >= 3:  # 0.3 s without a new byte after the dump began
            return


@dataclass(frozen=True)
class Stuck:
    """Where the deepest thread stack of a faulthandler dump was: ``frame`` is its innermost call
    as ``func (path:line)`` with the path from its package on; ``stack`` is that thread's dump."""

    frame: str
    stack: str


def stuck(text: str) -> Stuck | None:
    """The deepest thread stack in ``text`` (a stderr that holds a faulthandler dump), or ``None``."""
    blocks: list[tuple[list[re.Match[str]], list[str]]] = []  # per thread: its frames, its lines
    for line in text.splitlines():
        if "(most recent call first):" in line:
            blocks.append(([], [line]))
        elif blocks and (m := _FRAME.match(line)):
            blocks[-1][0].append(m)
            blocks[-1][1].append(line)
    frames, lines = max(blocks, key=lambda b: len(b[0]), default=([], []))
    if not frames:
        return None
    top = frames[0]
    path = top["path"]
    for marker in ("site-packages/", "dist-packages/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    else:
        path = "/".join(Path(path).parts[-3:])
    return Stuck(frame=f"{top['func']} ({path}:{top['line']})", stack="\n".join(lines))
