"""A cgroup per model process: memory (shared memory and memfds included) and processes, counted by the kernel.

rlimits count one process at a time and miss what a model can allocate outside its private memory:
pages written into a memfd or ``/dev/shm`` are shared memory, which ``RLIMIT_DATA`` never sees (measured:
1,280 MB in memfds under a 1 GB budget). A cgroup counts every page its processes touch, and its OOM
killer ends the group when the budget is spent; its counters then say it was memory, not a crash.

Where the machine gives one, the parent makes ``zoo/<run>`` below its own cgroup, sets the limits, and
the model process joins it first thing, while it is still root and before it reads any of the model
(:func:`zoo_runner.sandbox_linux.apply`): nothing it allocates is charged elsewhere.

* cgroup v2, where the parent's cgroup delegates ``memory`` and ``pids`` (``memory.max``,
  ``memory.swap.max`` 0, ``pids.max``; ``memory.events`` counts OOM kills);
* cgroup v1, where ``memory`` and ``pids`` hierarchies are mounted and writable by root (these machines:
  ``memory.limit_in_bytes`` and ``memory.memsw.limit_in_bytes`` where swap accounting is on, ``pids.max``;
  ``memory.oom_control`` counts OOM kills);
* neither: the rlimits alone (``zoo doctor`` says which holds).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
SUBDIR = "zoo"
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def _own_path(controller: str) -> str | None:
    """This process's cgroup path in ``controller``'s v1 hierarchy ("" for v2's), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            return path
    return None


def _v2_base() -> Path | None:
    """The parent's v2 cgroup, where it delegates memory and pids; None elsewhere."""
    for mount in (ROOT, ROOT / "unified"):
        if not (mount / "cgroup.controllers").is_file():
            continue
        path = _own_path("") or "/"
        base = mount / path.lstrip("/")
        try:
            controllers = set((base / "cgroup.controllers").read_text().split())
        except OSError:
            continue
        if {"memory", "pids"} <= controllers:
            return base
    return None


def _v1_bases() -> dict[str, Path] | None:
    out = {}
    for controller in ("memory", "pids"):
        own = _own_path(controller)
        mount = ROOT / controller
        if own is None or not (mount / "cgroup.procs").is_file():
            return None
        out[controller] = mount / own.lstrip("/")
    return out


def mode() -> str:
    """``v2``, ``v1`` or ``none``: what a model process's cgroup would be made of on this machine."""
    if os.geteuid() != 0:
        return "none"
    if _v2_base() is not None:
        return "v2"
    bases = _v1_bases()
    if bases and all(os.access(p, os.W_OK) for p in bases.values()):
        return "v1"
    return "none"


@dataclass
class Group:
    """One model process's cgroup: its directories (one for v2, one per controller for v1)."""

    version: str
    dirs: dict[str, str] = field(default_factory=dict)  # controller (or "all" for v2) -> directory
    memory_bytes: int = 0

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files the model process writes its pid into."""
        return [str(Path(d) / "cgroup.procs") for d in dict.fromkeys(self.dirs.values())]

    def _memory_dir(self) -> Path:
        return Path(self.dirs.get("memory") or self.dirs["all"])

    def oom_kills(self) -> int:
        """How many processes the kernel's OOM killer ended in this group."""
        name = "memory.events" if self.version == "v2" else "memory.oom_control"
        try:
            text = (self._memory_dir() / name).read_text()
        except OSError:
            return 0
        m = re.search(r"^oom_kill (\d+)$", text, re.M)
        return int(m.group(1)) if m else 0

    def peak_bytes(self) -> int | None:
        """The most memory the group held at once (page cache of files it read included)."""
        name = "memory.peak" if self.version == "v2" else "memory.max_usage_in_bytes"
        try:
            return int((self._memory_dir() / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def pids(self) -> list[int]:
        """The processes in the group now (host pids)."""
        out: list[int] = []
        for f in self.procs_files():
            try:
                out += [int(x) for x in Path(f).read_text().split()]
            except (OSError, ValueError):
                pass
        return sorted(set(out))

    def remove(self) -> None:
        """Kill what is left in the group and remove its directories."""
        import signal
        import time

        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for d in dict.fromkeys(self.dirs.values()):
            for _ in range(50):
                try:
                    os.rmdir(d)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # its last process is still exiting
                    time.sleep(0.05)

    def describe(self) -> dict[str, object]:
        return {"version": self.version, "memory_mb": self.memory_bytes >> 20}


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def create(name: str, memory_bytes: int, pids_max: int) -> Group | None:
    """A cgroup ``zoo/<name>`` below this process's, limited to ``memory_bytes`` (swap none) and
    ``pids_max`` processes; None where the machine gives none (or making it failed: rlimits then hold)."""
    if not _NAME.match(name):
        raise ValueError(f"cgroup name {name!r}")
    kind = mode()
    if kind == "none":
        return None
    group: Group | None = None
    try:
        if kind == "v2":
            base = _v2_base()
            assert base is not None
            parent = base / SUBDIR
            parent.mkdir(exist_ok=True)
            _write(parent / "cgroup.subtree_control", "+memory +pids")
            d = parent / name
            d.mkdir()
            group = Group("v2", {"all": str(d)}, memory_bytes)
            _write(d / "memory.max", str(memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(pids_max))
            return group
        bases = _v1_bases()
        assert bases is not None
        group = Group("v1", {}, memory_bytes)
        for controller, base in bases.items():
            d = base / SUBDIR / name
            d.mkdir(parents=True)
            group.dirs[controller] = str(d)
        mem = Path(group.dirs["memory"])
        _write(mem / "memory.limit_in_bytes", str(memory_bytes))
        if (mem / "memory.memsw.limit_in_bytes").exists():  # swap accounting: the budget is memory plus swap
            _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
        _write(Path(group.dirs["pids"]) / "pids.max", str(pids_max))
        return group
    except OSError:
        if group is not None:  # half made: what was made goes
            group.remove()
        return None


def join(procs_files: list[str]) -> list[str]:
    """Move this process into the group (its ``cgroup.procs`` files); the files it could not join."""
    failed = []
    for f in procs_files:
        try:
            _write(Path(f), str(os.getpid()))
        except OSError:
            failed.append(f)
    return failed
