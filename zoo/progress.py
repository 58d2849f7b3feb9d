"""What the in-process main job is doing, on its progress bar: each model in flight and its stage.

The first model can spend minutes before it finishes (the forkserver imports torch, then the first
compile), so the bar names what is happening from the start instead of waiting for a result.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

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
TICK_S = {True: 1.0, False: 30.0}  # how often tick() redraws the bar: on a terminal, in a log file


class RunProgress:
    """Keeps ``bar``'s postfix naming every model in flight and its stage (thread-safe), and counts
    finished models."""

    def __init__(self, bar: tqdm) -> None:
        self.bar = bar
        self._active: dict[str, str] = {}
        self._last = ""
        self._lock = threading.Lock()
        isatty = getattr(bar.fp, "isatty", None)
        self._every = TICK_S[bool(isatty and isatty())]
        self._drawn = time.monotonic()

    def on_stage(self, model_id: str) -> Callable[[str], None]:
        """The ``on_stage`` callback for one model."""
        return lambda name: self.stage(model_id, name)

    def stage(self, model_id: str, name: str) -> None:
        with self._lock:
            self._active[model_id] = STAGE_WORDS.get(name, name)
            self._show()

    def finished(self, model_id: str, status: str) -> None:
        with self._lock:
            self._active.pop(model_id, None)
            self._last = f"{model_id[:WIDTH]}: {status}"
            self.bar.set_postfix_str(self._text(), refresh=False)
            self.bar.update(1)  # draws
            self._drawn = time.monotonic()

    def tick(self) -> None:
        """Redraw now and then while nothing changes, so the elapsed time runs during a long compile."""
        with self._lock:
            if time.monotonic() - self._drawn >= self._every:
                self.bar.refresh()
                self._drawn = time.monotonic()

    def _text(self) -> str:
        return " | ".join(f"{m[:WIDTH]}: {w}" for m, w in self._active.items()) or self._last

    def _show(self) -> None:
        self.bar.set_postfix_str(self._text(), refresh=True)
        self._drawn = time.monotonic()
