"""The Linux mechanics of the model process's sandbox, applied in the model process itself.

:func:`enter` runs first thing in every model process (forked from the forkserver, or spawned),
before any model file, plugin or backend is touched, while the process still has the rights it was
started with. In order:

1. new network and mount namespaces (``unshare(CLONE_NEWNET | CLONE_NEWNS)``; as a non-root user,
   inside a new user namespace) with the loopback interface up and nothing else;
2. the whole filesystem re-mounted read-only in that mount namespace; ``/tmp``, ``/var/tmp`` and
   ``/run`` (where PostgreSQL's, Redis's and other services' Unix sockets live) hidden under empty
   read-only tmpfs; ``/dev/shm`` a private tmpfs; the run directory and the Python installation
   shown again where they were, read-only; the work directory and the configured caches
   writable;
3. rlimits on private writable memory (RLIMIT_DATA), CPU time, file size and processes;
4. the environment replaced by the allowlisted one, the working directory the work directory;
5. as root, a switch to the dedicated uid/gid (supplementary groups dropped; every capability
   goes with uid 0); in a user namespace, every capability dropped;
6. ``PR_SET_NO_NEW_PRIVS``.

What held is written to the run directory's report while the process can still write there as
root, through a descriptor opened before the switch: model code, which runs later under the
sandbox uid, cannot rewrite it. Under ``ZOO_SANDBOX=strict`` a process that could not get every
protection exits with :data:`EXIT_REFUSED` before running anything.

No bubblewrap: the same system calls, made directly, work in a forked model process (no exec, so
torch stays warm) and need no extra package. ``python -m zoo_runner.sandbox_linux probe ARGS``
applies the same steps in a throwaway process and prints what held (``zoo doctor``).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import resource
import select
import signal
import socket
import struct
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWIPC = 0x08000000
CLONE_NEWPID = 0x20000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC = 0x20, 0x400, 0x800, 0x1000, 0x4000
MS_PRIVATE, MS_RELATIME, MS_STRICTATIME = 1 << 18, 1 << 21, 1 << 24
PR_SET_NO_NEW_PRIVS, PR_GET_NO_NEW_PRIVS = 38, 39
PR_SET_DUMPABLE = 4
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
LINUX_CAPABILITY_VERSION_3 = 0x20080522
# Per-mount flags a remount must repeat (a user namespace may not clear them; root should not).
MOUNT_FLAGS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
    "strictatime": MS_STRICTATIME,
}
# Kernel interfaces, guarded by permissions rather than by the mount: left as they are.
KERNEL_MOUNTS = ("/proc", "/sys")
PROTECTIONS = ("uid", "no_new_privs", "netns", "mountns", "rlimits")
RLIMITS = {
    "data": resource.RLIMIT_DATA,
    "as": resource.RLIMIT_AS,
    "cpu": resource.RLIMIT_CPU,
    "fsize": resource.RLIMIT_FSIZE,
    "nproc": resource.RLIMIT_NPROC,
    "nofile": resource.RLIMIT_NOFILE,
}
EXIT_REFUSED = 78  # EX_CONFIG: ZOO_SANDBOX=strict and a protection did not hold


@dataclass
class Plan:
    """What the parent asks of one model process (JSON in the run directory, no secrets)."""

    mode: str  # off | best_effort | strict
    run_dir: str  # root-owned, read-only to the model: request, plan, report, stderr
    work_dir: str  # the model's own: result, stage, home, tmp, staged files; cwd
    report_path: str
    uid: int | None = None  # switch to these when running as root (None: keep)
    gid: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    binds: list[list[str]] = field(default_factory=list)  # [source outside, target inside work_dir], writable
    ro_binds: list[list[str]] = field(default_factory=list)  # [source outside, target inside work_dir], read-only
    hide: list[str] = field(default_factory=list)  # directories covered by an empty read-only tmpfs
    keep: list[str] = field(default_factory=list)  # paths under a hidden directory shown again, read-only
    shm_mb: int = 512
    rlimits: dict[str, int] = field(default_factory=dict)
    pidns: bool = True  # a PID namespace of its own, with its own /proc, where the machine allows
    requester: int = 0  # the process waiting for the result: the model dies with it (0: none)
    groups: list[int] = field(default_factory=list)  # supplementary groups after the switch: its device's only
    mask: list[str] = field(default_factory=list)  # other devices' nodes, covered by /dev/null (mount namespace)
    mkdirs: list[str] = field(default_factory=list)  # directories its device wants, made as its own uid
    cgroup: list[str] = field(default_factory=list)  # cgroup.procs files it joins first (zoo_runner.cgroups)
    seccomp: bool = True  # the system-call filter (below), where the architecture has one

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        data = json.loads(text)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})


# ------------------------------------------------------------------ system calls

_LIBC: Any = None


def _libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    return _LIBC


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


KEYCTL_JOIN_SESSION_KEYRING = 1


def new_session_keyring() -> bool:
    """Join a new, empty, anonymous session keyring (keyctl(KEYCTL_JOIN_SESSION_KEYRING, NULL))."""
    ret = _libc().syscall(ctypes.c_long(_SYSCALLS[_arch()]["keyctl"]), ctypes.c_long(KEYCTL_JOIN_SESSION_KEYRING), None)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"keyctl(JOIN_SESSION_KEYRING): {os.strerror(err)}")
    return True


# ------------------------------------------------------------------ the system-call filter
# What a model never needs and an escape would: new namespaces (unshare, setns, and clone with a CLONE_NEW*
# flag; clone3 answers ENOSYS, since its flags sit in memory a filter cannot read, and glibc then falls back
# to clone), the kernel keyrings, mounts, loading kernel code or BPF programs, ptrace and other processes'
# memory, perf events, userfaultfd and io_uring (whose operations bypass this filter). Everything else is
# allowed: torch, inductor's compiler and a device runtime keep working. Installed last, after the sandbox
# itself has used unshare and mount, with no_new_privs set (which seccomp requires of an unprivileged process).
_SYSCALLS = {
    "x86_64": {
        "unshare": 272, "setns": 308, "clone": 56, "clone3": 435, "keyctl": 250, "add_key": 248,
        "request_key": 249, "mount": 165, "umount2": 166, "pivot_root": 155, "bpf": 321, "ptrace": 101,
        "process_vm_readv": 310, "process_vm_writev": 311, "perf_event_open": 298, "userfaultfd": 323,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442,
    },
    "aarch64": {
        "unshare": 97, "setns": 268, "clone": 220, "clone3": 435, "keyctl": 219, "add_key": 217,
        "request_key": 218, "mount": 40, "umount2": 39, "pivot_root": 41, "bpf": 280, "ptrace": 117,
        "process_vm_readv": 270, "process_vm_writev": 271, "perf_event_open": 241, "userfaultfd": 282,
        "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442,
    },
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x00000080
# (CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME)
DENIED = tuple(k for k in _SYSCALLS["x86_64"] if k not in ("clone", "clone3"))
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, SECCOMP_RET_KILL_PROCESS = 0x7FFF0000, 0x00050000, 0x80000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
X32_SYSCALL_BIT = 0x40000000


def _arch() -> str:
    return os.uname().machine


def seccomp_program(arch: str) -> list[tuple[int, int, int, int]]:
    """The classic-BPF filter for ``arch``, as (code, jt, jf, k) instructions."""
    nrs = _SYSCALLS[arch]
    ld_w_abs, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    eperm, enosys = SECCOMP_RET_ERRNO | 1, SECCOMP_RET_ERRNO | 38
    prog: list[tuple[int, int, int, int]] = [
        (ld_w_abs, 0, 0, 4),  # seccomp_data.arch
        (jeq, 1, 0, _AUDIT_ARCH[arch]),
        (ret, 0, 0, SECCOMP_RET_KILL_PROCESS),  # another ABI (x32, ia32) calling in: never allowed
        (ld_w_abs, 0, 0, 0),  # seccomp_data.nr
        (jge, 0, 1, X32_SYSCALL_BIT),  # x32's numbers under x86-64's audit arch: never a model's
        (ret, 0, 0, enosys),
    ]
    for name in DENIED:
        prog += [(jeq, 0, 1, nrs[name]), (ret, 0, 0, eperm)]
    prog += [(jeq, 0, 1, nrs["clone3"]), (ret, 0, 0, enosys)]
    prog += [
        (jeq, 0, 3, nrs["clone"]),
        (ld_w_abs, 0, 0, 16),  # args[0], its low 32 bits: the flags
        (jset, 0, 1, CLONE_NEW_ANY),
        (ret, 0, 0, eperm),
        (ret, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return prog


def install_seccomp() -> bool:
    """Install :func:`seccomp_program` on this process (and what it starts); False on an architecture
    without a table. Raises OSError where the kernel refuses it."""
    arch = _arch()
    if arch not in _SYSCALLS:
        return False

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    prog = seccomp_program(arch)
    insns = (SockFilter * len(prog))(*[SockFilter(*i) for i in prog])
    fprog = SockFprog(len(prog), insns)
    ret = _libc().prctl(
        ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(fprog), ctypes.c_ulong(0),
        ctypes.c_ulong(0),
    )  # fmt: skip
    _check(ret, "prctl(PR_SET_SECCOMP)")
    return True


def unshare(flags: int) -> None:
    _check(_libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    ret = _libc().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data))
    _check(ret, f"mount {target}")


def prctl(option: int, arg: int = 0) -> int:
    libc = _libc()
    libc.prctl.restype = ctypes.c_int
    ret = libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if ret < 0:
        _check(ret, "prctl")
    return ret


def drop_capabilities() -> None:
    """Empty effective, permitted and inheritable sets (a user namespace's root keeps them otherwise)."""
    header = struct.pack("Ii", LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two __user_cap_data_struct of three u32, all zero
    _check(_libc().capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")


def effective_capabilities() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return -1


def loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        import fcntl

        req = struct.pack("16sh22x", b"lo", 0)
        flags = struct.unpack("16sh22x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sh22x", b"lo", flags | IFF_UP))


def _ns(kind: str) -> str:
    try:
        return os.readlink(f"/proc/self/ns/{kind}")
    except OSError:
        return ""


def _unescape(path: str) -> str:
    """Mount points in mountinfo escape space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(path):
        if path[i] == "\\" and path[i + 1 : i + 4].isdigit() and len(path[i + 1 : i + 4]) == 3:
            out.append(chr(int(path[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(path[i])
            i += 1
    return "".join(out)


def mounts() -> list[tuple[str, set[str]]]:
    """(mount point, per-mount options) of this mount namespace, parents before children."""
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if len(parts) > 5:
                out.append((_unescape(parts[4]), set(parts[5].split(","))))
    return out


def _under(path: str, roots: list[str] | tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


def _flags(opts: set[str]) -> int:
    flags = 0
    for name, bit in MOUNT_FLAGS.items():
        if name in opts:
            flags |= bit
    return flags


# ------------------------------------------------------------------ the steps


def _map_ids(uid: int, gid: int) -> None:
    """In a fresh user namespace: the caller's uid and gid map to themselves."""
    with open("/proc/self/setgroups", "w") as f:
        f.write("deny")
    with open("/proc/self/uid_map", "w") as f:
        f.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as f:
        f.write(f"{gid} {gid} 1")


def _remount(point: str, readonly: bool) -> None:
    """Remount the topmost mount at ``point`` read-only or writable, keeping its other flags (a
    user namespace may not clear them) and adding nosuid and nodev."""
    opts = next((o for p, o in reversed(mounts()) if p == point), set())
    flags = MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | _flags(opts) | (MS_RDONLY if readonly else 0)
    mount(None, point, None, flags)


def confine_filesystem(plan: Plan) -> list[str]:
    """Read-only everything, hide the scratch, socket and home directories, expose the writable
    paths. Must run in a private mount namespace. Returns the mounts that stayed writable."""
    o_path = getattr(os, "O_PATH", 0o10000000)
    fds: dict[str, int] = {}
    for path in [plan.run_dir, plan.work_dir, *plan.keep, *(src for src, _ in plan.binds + plan.ro_binds)]:
        if path not in fds:
            fds[path] = os.open(path, o_path | os.O_CLOEXEC)
    try:
        mount(None, "/", None, MS_REC | MS_PRIVATE)
        failed = []
        for point, opts in mounts():
            if _under(point, KERNEL_MOUNTS) or "ro" in opts:
                continue
            try:
                mount(None, point, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _flags(opts))
            except OSError as exc:
                if exc.errno != 2:  # a mount point no longer reachable (covered) cannot be written either
                    failed.append(point)
        hidden = [h for h in plan.hide if os.path.isdir(h) and not os.path.islink(h)]
        hidden = [h for h in hidden if not any(h.startswith(o.rstrip("/") + "/") for o in hidden)]  # outermost only
        for h in hidden:
            size = f"mode=1777,size={int(plan.shm_mb)}m" if h == "/dev/shm" else "mode=0755,size=256k"
            mount("tmpfs", h, "tmpfs", MS_NOSUID | MS_NODEV, size)
        # shown again where they were: the run directory and the Python installation, read-only
        for path in [plan.run_dir, *plan.keep]:
            if _under(path, hidden) and path not in hidden:
                os.makedirs(path, mode=0o755, exist_ok=True)
                mount(f"/proc/self/fd/{fds[path]}", path, None, MS_BIND | MS_REC)
                _remount(path, readonly=True)
        # writable: the work directory, then the caches bound inside it
        for src, dst in [(plan.work_dir, plan.work_dir), *plan.binds]:
            mount(f"/proc/self/fd/{fds[src]}", dst, None, MS_BIND)
            _remount(dst, readonly=False)
        for src, dst in plan.ro_binds:  # the fetched model files
            mount(f"/proc/self/fd/{fds[src]}", dst, None, MS_BIND | MS_REC)
            _remount(dst, readonly=True)
        for h in hidden:
            if h != "/dev/shm":
                _remount(h, readonly=True)
        for node in plan.mask:  # another device's nodes: this process sees /dev/null there
            if os.path.exists(node) and not os.path.islink(node):
                mount("/dev/null", node, None, MS_BIND)
        return failed
    finally:
        for fd in fds.values():
            os.close(fd)


def set_rlimits(limits: dict[str, int]) -> list[str]:
    """Lower each limit (never raise one); returns the names that hold."""
    held = []
    for name, value in limits.items():
        kind = RLIMITS.get(name)
        if kind is None or value is None:
            continue
        value = int(value)
        try:
            soft, hard = resource.getrlimit(kind)
            hard_new = value if hard == resource.RLIM_INFINITY else min(hard, value)
            soft_new = value if name != "cpu" else max(1, value - 30)  # SIGXCPU first, SIGKILL 30 s later
            resource.setrlimit(kind, (min(soft_new, hard_new), hard_new))
            held.append(name)
        except (ValueError, OSError):
            pass
    return sorted(held)


def _reset_python_state(plan: Plan) -> None:
    os.environ.clear()
    os.environ.update(plan.env)
    tempfile.tempdir = None  # re-read TMPDIR (the forkserver cached its own)
    try:
        import multiprocessing.process as mpp

        # the forkserver's pymp-* dir is root's
        mpp.current_process()._config.pop("tempdir", None)  # type: ignore[attr-defined]
    except Exception:
        pass
    try:
        old = os.getcwd()
        sys.path[:] = [old if p == "" else p for p in sys.path]  # "" meant the old working directory
    except OSError:
        pass
    os.chdir(plan.work_dir)


# ------------------------------------------------------------------ the PID namespace

FORWARDED = (signal.SIGUSR1, signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT)


def _forward_signals(to: int) -> None:
    for sig in FORWARDED:
        signal.signal(sig, lambda signum, frame: _kill_quietly(to, signum))


def _kill_quietly(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _die_like(status: int) -> None:
    """End this process the way the one whose wait status is ``status`` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:  # no core of this (root) process in the model's place
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            prctl(PR_SET_DUMPABLE, 0)
        except (OSError, ValueError):
            pass
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught, so need no reset
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        time.sleep(1)
        os.kill(os.getpid(), signal.SIGKILL)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _close_all_but(keep: set[int]) -> None:
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _shim(init_pid: int, status_r: int, requester: int) -> None:
    """The model process as its parent knows it (outside the PID namespace): forwards signals to
    the namespace's init, stops everything when the requester is gone, and ends as the model did."""
    _close_all_but({status_r})
    _forward_signals(init_pid)
    data = b""
    while True:
        try:
            ready, _, _ = select.select([status_r], [], [], 1.0)
        except InterruptedError:
            continue
        if ready:
            data = os.read(status_r, 4)
            break
        if requester:
            try:
                os.kill(requester, 0)
            except ProcessLookupError:  # nobody waits for this result: the whole group goes
                os.killpg(os.getpgid(0), signal.SIGKILL)
            except PermissionError:
                pass
    _, init_status = os.waitpid(init_pid, 0)
    _die_like(struct.unpack("i", data)[0] if len(data) == 4 else init_status)


def _init(model_pid: int, status_w: int) -> None:
    """PID 1 of the namespace: reaps every orphan, forwards signals to the model process, and
    hands its wait status to the shim. When it exits the kernel kills whatever is left inside."""
    _close_all_but({status_w})
    _forward_signals(model_pid)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(1)
        if pid == model_pid:
            os.write(status_w, struct.pack("i", status))
            os._exit(0)


def enter_pid_namespace(requester: int) -> None:
    """Unshare the PID namespace and fork twice: this process stays outside as the shim, its child
    is the namespace's init, and the grandchild (pid 2) returns from here to run the model.
    Raises OSError where the machine refuses (nothing forked then)."""
    unshare(CLONE_NEWPID)
    status_r, status_w = os.pipe()
    init = os.fork()
    if init:
        os.close(status_w)
        try:
            _shim(init, status_r, requester)
        finally:
            os._exit(1)
    os.close(status_r)
    model = os.fork()
    if model:
        try:
            _init(model, status_w)
        finally:
            os._exit(1)
    os.close(status_w)
    for sig in FORWARDED:
        signal.signal(sig, signal.SIG_DFL)


def mount_proc() -> None:
    """A /proc of this PID namespace: other processes, and their command lines, are not in it."""
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def apply(plan: Plan) -> dict[str, Any]:
    """Apply ``plan`` to this process; returns what held. Never raises for a missing protection."""
    report: dict[str, Any] = {"mode": plan.mode, "errors": {}}
    errors: dict[str, str] = report["errors"]
    is_root = os.geteuid() == 0
    uid, gid = os.getuid(), os.getgid()
    netns = mountns = userns = pidns = private_proc = ipcns = False
    fs_failed: list[str] = []
    if plan.cgroup:  # first, while root and before anything of the model's: every page it touches counts
        from .cgroups import join

        failed = join(plan.cgroup)
        report["cgroup_joined"] = not failed
        if failed:
            errors["cgroup"] = f"could not join {', '.join(failed)}"
    if plan.mode != "off":
        before = (_ns("net"), _ns("mnt"), _ns("ipc"))
        flags = CLONE_NEWNET | CLONE_NEWNS | CLONE_NEWIPC | (0 if is_root else CLONE_NEWUSER)
        try:
            unshare(flags)
            userns = not is_root
            if userns:
                _map_ids(uid, gid)
        except OSError as exc:
            errors["namespaces"] = str(exc)
            if is_root:  # one may work where both do not (a container allowing only one)
                for flag in (CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWIPC):
                    try:
                        unshare(flag)
                    except OSError:
                        pass
        netns = bool(before[0]) and _ns("net") != before[0]
        mountns = bool(before[1]) and _ns("mnt") != before[1]
        ipcns = bool(before[2]) and _ns("ipc") != before[2]
        if plan.pidns and mountns:  # its own /proc needs its own mounts
            try:
                enter_pid_namespace(plan.requester)
                pidns = True
            except OSError as exc:
                errors["pidns"] = str(exc)
        if netns:
            try:
                loopback_up()
            except OSError as exc:
                errors["loopback"] = str(exc)
        if mountns:  # never touch the mounts of a namespace we share with anyone
            try:
                fs_failed = confine_filesystem(plan)
            except OSError as exc:
                errors["mountns"] = str(exc)
                mountns = False
            if fs_failed:
                errors["mountns"] = "could not make read-only: " + ", ".join(fs_failed[:5])
                mountns = False
        if pidns and mountns:  # on private mounts only: a shared /proc would change the host's
            try:
                mount_proc()
                private_proc = True
            except OSError as exc:
                errors["pidns"] = f"a /proc of its own: {exc}"
    memory = ("data", "as")  # with the sandbox off, only the memory budget holds
    limits = dict(plan.rlimits) if plan.mode != "off" else {k: v for k, v in plan.rlimits.items() if k in memory}
    held_limits = set_rlimits(limits)
    _reset_python_state(plan)
    switched = False
    if plan.mode != "off":
        try:
            os.umask(0o077)
            if is_root and plan.uid is not None and plan.gid is not None and plan.uid != 0:
                os.setgroups(list(plan.groups))  # none, or its device's group (/dev/neuron*: neuron)
                os.setresgid(plan.gid, plan.gid, plan.gid)
                os.setresuid(plan.uid, plan.uid, plan.uid)
                switched = os.getresuid() == (plan.uid,) * 3 and os.getresgid() == (plan.gid,) * 3
            elif userns:
                drop_capabilities()
        except OSError as exc:
            errors["uid"] = str(exc)
        try:
            prctl(PR_SET_NO_NEW_PRIVS, 1)
        except OSError as exc:
            errors["no_new_privs"] = str(exc)
    for path in plan.mkdirs:  # as its own uid, inside its own mounts: a cache it may write
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
        except OSError as exc:
            errors["mkdirs"] = f"{path}: {exc}"
    keyring = filtered = False
    if plan.mode != "off":
        try:  # a session keyring of its own, empty: nothing of an earlier run's keys is reachable
            keyring = new_session_keyring()
        except OSError as exc:
            errors["keyring"] = str(exc)
        if plan.seccomp:
            try:
                filtered = install_seccomp()
            except OSError as exc:
                errors["seccomp"] = str(exc)
    nnp = _get_nnp()
    caps = effective_capabilities()
    report.update(
        uid=os.geteuid(),
        gid=os.getegid(),
        groups=sorted(os.getgroups()),
        uid_switched=switched,
        capabilities=caps,
        no_new_privs=nnp,
        netns=netns,
        userns=userns,
        mountns=mountns,
        pidns=pidns,
        private_proc=private_proc,
        ipcns=ipcns,
        loopback=netns and "loopback" not in errors,
        rlimits=held_limits,
        keyring=keyring,
        seccomp=filtered,
    )
    held = {
        "uid": switched and caps == 0,
        "no_new_privs": nnp,
        "netns": netns,
        "mountns": mountns,
        "rlimits": set(plan.rlimits) <= set(held_limits),
    }
    report["missing"] = [p for p in PROTECTIONS if not held[p]] if plan.mode != "off" else list(PROTECTIONS)
    if not report["errors"]:
        del report["errors"]
    return report


def _get_nnp() -> bool:
    try:
        return prctl(PR_GET_NO_NEW_PRIVS) == 1
    except OSError:
        return False


def enter(plan_path: str) -> dict[str, Any]:
    """Sandbox this process by the plan at ``plan_path``; write the report; refuse under strict."""
    with open(plan_path) as f:
        plan = Plan.from_json(f.read())
    # opened now, while this process may still create files in the run directory
    fd = os.open(plan.report_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        report = apply(plan)
        refused = plan.mode == "strict" and bool(report["missing"])
        report["refused"] = refused
        os.write(fd, json.dumps(report).encode())
    finally:
        os.close(fd)
    if refused:
        sys.stderr.write(
            f"zoo sandbox: ZOO_SANDBOX=strict and {', '.join(report['missing'])} "
            "did not hold: refusing to run the model\n"
        )
        sys.stderr.flush()
        os._exit(EXIT_REFUSED)
    return report


def probe(uid: int, gid: int, run_dir: str, hide: list[str], keep: list[str]) -> dict[str, Any]:
    """What :func:`apply` achieves on this machine, tried in this (throwaway) process, in
    ``run_dir`` (an empty directory the caller removes)."""
    work = os.path.join(run_dir, "work")
    os.mkdir(work)
    if os.geteuid() == 0:
        os.chmod(run_dir, 0o711)
        os.chown(work, uid, gid)
    plan = Plan(
        mode="best_effort",
        run_dir=run_dir,
        work_dir=work,
        report_path=os.path.join(run_dir, "report.json"),
        uid=uid,
        gid=gid,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        hide=hide,
        keep=keep,
        rlimits={"nproc": 4096, "fsize": 1 << 30, "cpu": 3600},
    )
    report = apply(plan)
    try:  # the filter holds: a new user namespace is refused
        unshare(CLONE_NEWUSER)
        report["unshare_denied"] = False
    except OSError:
        report["unshare_denied"] = True
    try:  # the Python installation stays readable to the sandbox uid
        with open(os.path.join(os.path.dirname(os.__file__), "os.py"), "rb") as f:
            f.read(1)
        report["python_readable"] = True
    except OSError:
        report["python_readable"] = False
    try:
        with open(os.path.join(work, "probe"), "w") as f:  # the work directory is writable...
            f.write("ok")
        report["work_writable"] = True
    except OSError:
        report["work_writable"] = False
    try:
        with open(os.path.join(run_dir, "escape"), "w") as f:  # ...the run directory is not
            f.write("x")
        report["run_dir_writable"] = True
    except OSError:
        report["run_dir_writable"] = False
    return report


if __name__ == "__main__":  # python -m zoo_runner.sandbox_linux probe JSON-ARGS
    if len(sys.argv) == 3 and sys.argv[1] == "probe":
        args = json.loads(sys.argv[2])
        print(json.dumps(probe(args["uid"], args["gid"], args["run_dir"], args["hide"], args["keep"])))
        sys.exit(0)
    sys.exit(2)
