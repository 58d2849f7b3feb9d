"""What the in-process main job is doing, on its progress bar: each model in flight and its stage.

The first model can spend minutes before it finishes (the forkserver imports torch, then the first
compile), so the bar names what is happening from the start instead of waiting for a result.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, Any

from tqdm import tqdm

# stage names: "prepare" (zoo.jobs.run_inprocess), "start" (zoo_runner.launcher.run_isolated) and
# the model process's (zoo_runner.result_schema.STAGES)
STAGE_WORDS = {
    "prepare": "preparing (Hub files, policy)",
    "start": "starting its process",
    "build": "building",
    "reference": "CPU reference",
    "census": "op census",
    "target": "compiling and running on the backend",
    "compare": "comparing",
    "done": "storing",
}
WIDTH = 40  # characters of a model id on the bar
TICK_S = {True: 1.0, False: 10.0}  # how often tick() redraws: a bar on a terminal, a plain line elsewhere


def has_width(stream: IO[str]) -> bool:
    """Whether ``stream`` is a terminal that reports a width (a bar can be drawn there). A pipe, a
    file, or a terminal of 0 columns (``docker exec -t``, some CI consoles) gets plain lines."""
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        return False
    try:
        return os.get_terminal_size(stream.fileno()).columns > 0
    except (OSError, ValueError, AttributeError):
        return False


class PlainLines:
    """What a progress bar says, as whole lines (``desc: n/total [elapsed] postfix``): for a stream
    with no terminal width, where tqdm's carriage returns draw nothing or one endless line. A line
    per change (:meth:`set_postfix_str`, :meth:`update`) and one per :meth:`refresh` (the heartbeat)."""

    def __init__(self, total: int, desc: str, file: IO[str] | None = None, **_: Any) -> None:
        self.total, self.desc, self.fp, self.n = total, desc, file or sys.stderr, 0
        self._start, self._postfix = time.monotonic(), ""
        self._written = 0.0

    def __enter__(self) -> PlainLines:
        self.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def set_postfix_str(self, s: str = "", refresh: bool = True) -> None:
        self._postfix = s
        if refresh:
            self.refresh()

    def update(self, n: int = 1) -> None:
        """A line when the count moves; when it does not (a poll), one at most every heartbeat."""
        self.n += n
        if n or time.monotonic() - self._written >= TICK_S[False]:
            self.refresh()

    def refresh(self) -> None:
        elapsed = int(time.monotonic() - self._start)
        line = f"{self.desc}: {self.n}/{self.total} [{elapsed // 60:02d}:{elapsed % 60:02d}]"
        self.fp.write(f"{line} {self._postfix}".rstrip() + "\n")
        self.fp.flush()
        self._written = time.monotonic()


def progress_bar(total: int, desc: str, unit: str = "model", file: IO[str] | None = None) -> Any:
    """tqdm's bar on a terminal with a width, :class:`PlainLines` anywhere else."""
    stream = file or sys.stderr
    if has_width(stream):
        return tqdm(total=total, desc=desc, unit=unit, file=stream)
    return PlainLines(total=total, desc=desc, file=stream)


class RunProgress:
    """Keeps ``bar``'s postfix naming every model in flight, its stage and its time so far against its
    budget (``budget_s``, the run's timeout), thread-safe, and counts finished models. A finished model
    leaves the line; it is shown alone only while nothing is in flight."""

    def __init__(self, bar: Any, budget_s: float | None = None) -> None:
        self.bar = bar
        self.budget_s = budget_s
        self._active: dict[str, str] = {}
        self._since: dict[str, float] = {}
        self._last = ""
        self._lock = threading.Lock()
        self._every = TICK_S[not isinstance(bar, PlainLines)]
        self._drawn = time.monotonic()

    def on_stage(self, model_id: str) -> Callable[[str], None]:
        """The ``on_stage`` callback for one model."""
        return lambda name: self.stage(model_id, name)

    def stage(self, model_id: str, name: str) -> None:
        with self._lock:
            self._active[model_id] = STAGE_WORDS.get(name, name)
            self._since.setdefault(model_id, time.monotonic())
            self._show()

    def finished(self, model_id: str, status: str) -> None:
        with self._lock:
            self._forget(model_id)
            self._last = f"{model_id[:WIDTH]}: {status}"
            self.bar.set_postfix_str(self._text(), refresh=False)
            self.bar.update(1)  # draws
            self._drawn = time.monotonic()

    def dropped(self, model_id: str) -> None:
        """A model that gives no row (an interrupted run ended it, or it never started)."""
        with self._lock:
            self._forget(model_id)
            self._show()

    def _forget(self, model_id: str) -> None:
        self._active.pop(model_id, None)
        self._since.pop(model_id, None)

    def tick(self) -> None:
        """Redraw now and then while nothing changes, so each model's time runs during a long compile."""
        with self._lock:
            if time.monotonic() - self._drawn >= self._every:
                self.bar.set_postfix_str(self._text(), refresh=False)
                self.bar.refresh()
                self._drawn = time.monotonic()

    def _text(self) -> str:
        now = time.monotonic()
        budget = f"/{self.budget_s:.0f}s" if self.budget_s else "s"
        return (
            " | ".join(f"{m[:WIDTH]}: {w} {now - self._since.get(m, now):.0f}{budget}" for m, w in self._active.items())
            or self._last
        )

    def _show(self) -> None:
        self.bar.set_postfix_str(self._text(), refresh=True)
        self._drawn = time.monotonic()
