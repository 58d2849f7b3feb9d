"""The run's interrupt: set on the first Ctrl-C or SIGTERM of an in-process run (zoo/jobs.py). Every wait of a
validation in this process (a model process supervised, device cores awaited) checks it and raises Interrupted."""

from __future__ import annotations

import threading

from .exceptions import Interrupted

INTERRUPT = threading.Event()


def check_interrupt() -> None:
    if INTERRUPT.is_set():
        raise Interrupted("interrupted")
