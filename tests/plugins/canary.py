"""A compile backend that tries to escape the model process's sandbox (``cpu+zoo_canary``).

It stands in for hostile code that got to run inside the model process. When dynamo hands it a
graph it tries every escape and raises an exception whose message carries its findings between
``ZOO-CANARY<<`` and ``>>`` (so the row, a ``compile_error``, shows them): for each attempt
``blocked: ...`` (the expected OSError: permission, read-only, refused, unreachable, absent) or
``ESCAPED: ...``. Anything else it hits is ``ERROR: ...``: a canary that breaks never reads as a
pass. Its targets (paths, the requester's pid) come from ``request.extras["canary"]``, read from the
run directory's request (the parent of its working directory), since its environment is filtered.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path

from torch._dynamo import register_backend

MARK = "zoo-canary-secret"  # every secret the test plants contains this
SECRET_NAMES = (
    "HF_TOKEN",
    "ZOO_API_KEYS",
    "PGPASSWORD",
    "GITHUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "MY_SERVICE_TOKEN",
    "ZOO_DATABASE_URL",
    "ZOO_BROKER_URL",
)
BLOCKED = (PermissionError, FileNotFoundError, ConnectionRefusedError, TimeoutError, socket.timeout, IsADirectoryError)
BLOCKED_ERRNOS = {
    errno.EROFS,
    errno.EACCES,
    errno.EPERM,
    errno.ENETUNREACH,
    errno.EHOSTUNREACH,
    errno.ECONNREFUSED,
    errno.ENOENT,
    errno.ESRCH,
    errno.EADDRNOTAVAIL,
}


def _targets() -> dict:
    request = json.loads((Path.cwd().parent / "request.json").read_text())
    return (request.get("extras") or {})["canary"]


def _attempt(fn: Callable[[], str | None]) -> str:
    """fn returns a description of what it got (an escape), or None when it got nothing."""
    try:
        got = fn()
    except BLOCKED as exc:
        return f"blocked: {type(exc).__name__}: {exc}"[:200]
    except OSError as exc:
        if exc.errno in BLOCKED_ERRNOS:
            return f"blocked: {type(exc).__name__}: {exc}"[:200]
        return f"ERROR: {type(exc).__name__}: {exc}"[:200]
    except Exception as exc:  # a broken canary must not read as a pass
        return f"ERROR: {type(exc).__name__}: {exc}"[:200]
    return f"ESCAPED: {got}"[:300] if got else "blocked: nothing found"


def _own_env() -> str | None:
    hits = sorted({k for k, v in os.environ.items() if MARK in v} | {k for k in SECRET_NAMES if k in os.environ})
    return f"own environment has {hits}" if hits else None


def _ancestors() -> list[int]:
    pids, pid = [], os.getppid()
    while pid > 1 and pid not in pids:
        pids.append(pid)
        with open(f"/proc/{pid}/status") as f:
            pid = int(next(line.split()[1] for line in f if line.startswith("PPid:")))
    return pids


def _read_environ(pids: list[int]) -> Callable[[], str | None]:
    def attempt() -> str | None:
        read, last = [], None
        for pid in pids:
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    data = f.read()
                read.append(f"{pid}{' (secret!)' if MARK.encode() in data else ''}")
            except OSError as exc:
                last = exc
        if read:
            return f"read /proc/<pid>/environ of {read}"
        if last is not None:
            raise last
        return None

    return attempt


def _scan_all_environ() -> str | None:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                with open(f"/proc/{entry}/environ", "rb") as f:
                    if MARK.encode() in f.read():
                        found.append(entry)
            except OSError:
                pass
    return f"secrets in the environ of pids {found[:5]}" if found else None


def _read_files(paths: list[str]) -> Callable[[], str | None]:
    def attempt() -> str | None:
        got, last = [], None
        for p in paths:
            try:
                with open(p) as f:
                    got.append(f"{p}: {f.read(40)!r}")
            except OSError as exc:
                last = exc
        if got:
            return "; ".join(got)
        if last is not None:
            raise last
        return None

    return attempt


def _connect_tcp(port: int, hello: bytes | None = None) -> Callable[[], str | None]:
    def attempt() -> str | None:
        with socket.create_connection(("127.0.0.1", port), timeout=3) as s:
            if hello:
                s.sendall(hello)
                return f"connected to 127.0.0.1:{port}, answered {s.recv(64)!r}"
            return f"connected to 127.0.0.1:{port}"

    return attempt


def _connect_unix(paths: list[str]) -> Callable[[], str | None]:
    def attempt() -> str | None:
        last: OSError | None = None
        for p in paths:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.settimeout(3)
                s.connect(p)
                return f"connected to {p}"
            except OSError as exc:
                last = exc
            finally:
                s.close()
        if last is not None:
            raise last
        return None

    return attempt


def _write(paths: list[str]) -> Callable[[], str | None]:
    def attempt() -> str | None:
        wrote, last = [], None
        for p in paths:
            try:
                with open(p, "x") as f:
                    f.write("canary was here")
                wrote.append(p)
                os.unlink(p)  # reported; not left behind
            except OSError as exc:
                last = exc
        if wrote:
            return f"wrote {wrote}"
        if last is not None:
            raise last
        return None

    return attempt


def _root() -> str | None:
    caps = next((line.split()[1] for line in open("/proc/self/status") if line.startswith("CapEff:")), "?")
    if os.geteuid() == 0 or os.getuid() == 0:
        return f"uid {os.getuid()} euid {os.geteuid()}, CapEff {caps}"
    if caps != "0000000000000000":
        return f"capabilities {caps}"
    os.setuid(0)  # must raise PermissionError
    return "setuid(0) succeeded"


def _new_user_namespace() -> str | None:
    """unshare(CLONE_NEWUSER) from a forked, single-threaded child (a threaded process gets EINVAL
    whatever the sandbox does, which would make this check say nothing)."""
    import ctypes

    pid = os.fork()
    if pid == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        os._exit(0 if libc.unshare(0x10000000) == 0 else min(ctypes.get_errno(), 255) or 255)  # CLONE_NEWUSER
    _, status = os.waitpid(pid, 0)
    err = os.waitstatus_to_exitcode(status)
    if err == 0:
        return "unshare(CLONE_NEWUSER) succeeded"
    raise OSError(err, os.strerror(err))


def findings() -> dict[str, str]:
    t = _targets()
    tag = t.get("tag") or uuid.uuid4().hex[:8]
    ancestors = _ancestors() + [int(t["requester"])]
    hf_home = os.environ.get("HF_HOME", "")
    token_files = [
        *t["token_files"],
        os.path.join(hf_home, "token"),
        os.path.join(hf_home, "stored_tokens"),
        os.path.expanduser("~/.cache/huggingface/token"),
        "/root/.cache/huggingface/token",
    ]
    writes = [
        *t["write_targets"],
        f"/tmp/zoo-canary-{tag}",
        f"/var/tmp/zoo-canary-{tag}",
        str(Path.cwd().parent / f"zoo-canary-{tag}"),
    ]
    return {
        "secret_in_own_env": _attempt(_own_env),
        "ancestor_environ": _attempt(_read_environ(ancestors)),
        "any_environ_with_secret": _attempt(_scan_all_environ),
        "token_file": _attempt(_read_files(token_files)),
        "postgres_tcp": _attempt(_connect_tcp(5432)),
        "redis_tcp": _attempt(_connect_tcp(6379, b"PING\r\n")),
        "postgres_unix_socket": _attempt(
            _connect_unix(["/var/run/postgresql/.s.PGSQL.5432", "/run/postgresql/.s.PGSQL.5432", "/tmp/.s.PGSQL.5432"])
        ),
        "write_outside": _attempt(_write(writes)),
        "root": _attempt(_root),
        "private_files": _attempt(_read_files(t.get("private_files", []))),
        "new_user_namespace": _attempt(_new_user_namespace),
    }


@register_backend
def zoo_canary(gm, example_inputs):
    raise RuntimeError("ZOO-CANARY<<" + json.dumps(findings(), sort_keys=True) + ">>")
