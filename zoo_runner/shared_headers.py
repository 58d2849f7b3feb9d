"""Inductor's precompiled C++ headers, built once per machine by Zoo and shared read-only.

Inductor compiles every C++ kernel against a precompiled header of ``cpp_prefix.h`` (150 MB, about
6 s of one core to build). Kept in each model's own compile-cache namespace, every model built its
own on its first compile: 6 of 16 s of a cold tiny-BERT compile on 2 EPYC cores, and 150 MB of each
namespace. A header a model process built cannot be shared (it could plant code in it), so Zoo
builds it in a process of its own that compiles a fixed toy function of Zoo's, never a model, and
keeps it in ``~/.cache/zoo/inductor-headers/<key>``: Zoo's user's, directories 0755, files 0444.
The builder also builds inductor's ISA probes (:func:`build`), which the model processes copy
into their own caches (:func:`copy_isa_probes`). ``zoo run`` starts the builder first thing, else
the first model process that would want it does; a model process that would want it while the
build this Zoo process started is under way waits for it (``WAIT_S`` from the builder's start, at
most); one started after that, or when no build is ready, builds its own, as before.
Model processes get that directory read-only (a bind in their mount namespace, or mode bits where
they run as another uid) and link its files into a header directory of their own
(:func:`link_into`): inductor finds a header of the same flags there and skips the build. Each
interpreter and torch has a build of its own (:func:`key`): an env's model processes get one made
by a builder run under the env's interpreter, with the env's torch. Nothing the model process
writes reaches this directory.

    python -m zoo_runner.shared_headers BASE KEY   # the builder process (Zoo's code only)
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import cache_trust

log = logging.getLogger(__name__)

ENV = "ZOO_SHARED_HEADERS"  # the directory the model process sees them in
BUILD_TIMEOUT_S = 600  # a builder past this gives up (its lock goes with it)
RETRY_AFTER_S = 3600  # a build that failed, or a builder that never finished, is tried again after this
FORMAT = 2  # what a build holds (2: the ISA probes too); part of the key, so a new one is built
WAIT_S = 90.0  # how long a model process's start waits for a build this process started (ensure(wait=...))
ISA_PREFIX = "isa-"  # inductor's ISA probe libraries in the shared directory (see build)
_STARTED: dict[str, float] = {}  # builders this process started: when
_BUILDERS: dict[str, subprocess.Popen] = {}  # and the processes, while they may still run


@functools.lru_cache(maxsize=4)
def _compiler_id() -> str:
    """The C++ compiler inductor runs (``CXX``, else g++) and its version: a header precompiled
    by another compiler is never one gcc takes."""
    cxx = os.environ.get("CXX") or "g++"
    try:
        out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return cxx
    return f"{cxx} {out.splitlines()[0] if out else ''}"


def _zoo_python(python: str | None) -> bool:
    """``python`` is Zoo's own interpreter (None, or this process's executable by path)."""
    return python is None or os.path.abspath(python) == os.path.abspath(sys.executable)


@functools.lru_cache(maxsize=8)
def _torch_id(python: str | None = None) -> str:
    """The version and location of the torch ``python`` imports, without importing it: in this
    process for Zoo's own interpreter, else asked of ``python`` (an env's, whose torch may be its own)."""
    if _zoo_python(python):
        try:  # without importing torch (the parent may not have yet)
            spec = importlib.util.find_spec("torch")
            return f"{importlib.metadata.version('torch')} {os.path.realpath(spec.origin or '?') if spec else '?'}"
        except Exception:  # pragma: no cover - Zoo's own interpreter always has torch
            return "?"
    code = (
        "import importlib.metadata as m, importlib.util as u, os\n"
        "s = u.find_spec('torch')\n"
        "print(m.version('torch'), os.path.realpath(s.origin or '?') if s else '?')"
    )
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}  # no secret reaches its hooks
    try:
        out = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.SubprocessError):
        return "?"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "?"


@functools.lru_cache(maxsize=8)
def key(python: str | None = None) -> str:
    """Which interpreter, torch and compiler the headers are for: another's never match. An env's
    interpreter is often the same binary as Zoo's, and may fall through to Zoo's torch: the env's
    own path is in its key, so each env has a build of its own, made under its own interpreter,
    never Zoo's nor another env's."""
    exe = os.path.realpath(python or sys.executable)
    if not _zoo_python(python):
        exe += f" (env {os.path.abspath(str(python))})"
    torch_id = _torch_id(None if _zoo_python(python) else python)
    ident = f"{exe}\n{torch_id}\n{os.uname().machine}\n{_compiler_id()}\nformat {FORMAT}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def _zoos(path: Path) -> bool:
    """``path`` is a real directory (no link) of this process's user, writable by nobody else."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022


def ensure(base: str, env: dict[str, str], wait: float = 0.0, python: str | None = None) -> Path | None:
    """The shared header directory for interpreter ``python`` (Zoo's own by default; an env's runs
    its own builder, with its torch) under ``base`` (Zoo's own), or None while
    it is not built yet: then a builder process is started in the background (once an hour at
    most per process; it takes a lock, so one per machine builds) with the model processes'
    environment ``env``. With ``wait``, a builder this process started is waited for, that many
    seconds after it started at most (it takes about 20 s of one core: less than the header and ISA probes every
    model process would otherwise build beside it); a model process started before it is done
    builds its own, as before. A directory that is not Zoo's user's alone (a link, or writable by
    another) is never shared."""
    if not _zoo_python(python) and _torch_id(python) == "?":
        return None  # an interpreter whose torch could not be told: nothing shared, it builds its own
    k = key(python)
    target = Path(base) / k
    if (target / "done").is_file():
        return _if_zoos(target)
    _start(base, k, env, python)
    builder = _BUILDERS.get(str(target))
    if wait > 0 and builder is not None:  # from the builder's start: a slow build is not waited for by each run
        deadline = _STARTED.get(str(target), 0.0) + wait
        while builder.poll() is None and time.time() < deadline and not (target / "done").is_file():
            time.sleep(0.2)
        if (target / "done").is_file():
            return _if_zoos(target)
    return None


def building(base: str, python: str | None = None) -> bool:
    """Whether a builder this process started for interpreter ``python`` under ``base`` still runs."""
    builder = _BUILDERS.get(str(Path(base) / key(python)))
    return builder is not None and builder.poll() is None


def _if_zoos(target: Path) -> Path | None:
    """``target`` where it and its parent are Zoo's user's alone and no link; else None."""
    chain = [target, *list(target.parents)[: len(target.parts) - 1]]
    if all(_zoos(p) for p in chain[:2]) and not any(p.is_symlink() for p in chain):
        return target
    log.warning("shared inductor headers %s: not Zoo's alone (a link, or writable by others): not shared", target)
    return None


def _start(base: str, k: str, env: dict[str, str], python: str | None = None) -> None:
    """A builder of ``base/k`` in the background, run by ``python`` (Zoo's own interpreter by
    default; an env's imports Zoo's engine through its fall-through to Zoo's site-packages),
    unless this process started one within the hour or one failed within the hour."""
    target = Path(base) / k
    now = time.time()
    try:
        failed_at = (Path(base) / f"{k}.failed").stat().st_mtime
    except OSError:
        failed_at = 0.0
    if now - max(failed_at, _STARTED.get(str(target), 0.0)) < RETRY_AFTER_S:
        return
    _STARTED[str(target)] = now
    try:
        Path(base).mkdir(mode=0o755, parents=True, exist_ok=True)
        _BUILDERS[str(target)] = subprocess.Popen(
            [python or sys.executable, "-m", __name__, str(base), k],
            env=env,
            cwd=base,  # not the parent's working directory first on sys.path
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # its own: a Ctrl-C of zoo run leaves it to finish (or its lock to the next)
            close_fds=True,
        )
    except OSError as exc:
        log.warning("shared inductor headers: builder not started (%s): each model process builds its own", exc)


def build_shared(base: Path, k: str) -> int:
    """The builder process: ``base/k`` built unless it is, or another builder holds its lock.
    Runs at the lowest priority, compiling on one core, for at most BUILD_TIMEOUT_S."""
    os.close(cache_trust.own_root(base, 0o755))  # a directory of this user's, never a link
    target = base / k
    fd = os.open(base / f"{k}.lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return 0  # another builder is at it
        if (target / "done").is_file():
            return 0
        for stale in base.glob(".build-*"):  # a builder killed before it cleaned up
            shutil.rmtree(stale, ignore_errors=True)
        os.nice(19)  # beside model processes whose latency is being measured
        signal.alarm(BUILD_TIMEOUT_S)
        t0 = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=base))
        try:
            out = tmp / "headers"
            out.mkdir()
            os.environ.update(HOME=str(tmp), TMPDIR=str(tmp), TORCHINDUCTOR_CACHE_DIR=str(tmp / "inductor"))
            libs = build(str(out))
            built = [p for p in out.iterdir() if p.name.endswith(".gch")]
            if not built:
                raise RuntimeError("inductor precompiled no header")
            probes = {}
            for lib in libs:  # flat here: name -> its path in a cache
                rel = os.path.relpath(lib, tmp / "inductor")
                if not _probe_path_ok(rel):
                    continue
                name = ISA_PREFIX + rel.replace("/", "-")
                shutil.copyfile(tmp / "inductor" / rel, out / name)
                probes[name] = rel
            shutil.rmtree(out / "locks", ignore_errors=True)
            for p in out.iterdir():
                if p.is_symlink() or not p.is_file():
                    raise RuntimeError(f"the build left {p.name}, not a file")
                os.chmod(p, 0o444)
            done = {
                "built_s": round(time.monotonic() - t0, 1),
                "headers": sorted(p.name for p in built),
                "isa_probes": probes,
            }
            (out / "done").write_text(json.dumps(done))
            os.chmod(out / "done", 0o444)
            os.chmod(out, 0o755)
            shutil.rmtree(target, ignore_errors=True)
            os.rename(out, target)
            (base / f"{k}.failed").unlink(missing_ok=True)
            return 0
        except BaseException as exc:
            (base / f"{k}.failed").write_text(f"{type(exc).__name__}: {exc}"[:2000])
            raise
        finally:
            signal.alarm(0)
            shutil.rmtree(tmp, ignore_errors=True)


def link_into(shared: str, headers: str) -> int:
    """Symbolic links in ``headers`` (the model process's own directory) to each shared header in
    ``shared``; returns how many. Runs in the model process: what it does here touches only itself."""
    os.makedirs(headers, exist_ok=True)
    n = 0
    for name in os.listdir(shared):
        if not name.endswith((".h", ".h.gch")):
            continue
        link = os.path.join(headers, name)
        if not os.path.lexists(link):
            os.symlink(os.path.join(shared, name), link)
            n += 1
    return n


def _probe_lib(isa: object, code: str) -> str | None:
    """Where inductor's ``VecISA.check_build(code)`` of ``isa`` leaves its library: the same key,
    source and target it computes (its private helpers: None where they moved, in another torch)."""
    try:
        from torch._inductor import cpu_vec_isa
        from torch._inductor.codecache import write
        from torch._inductor.cpp_builder import CppBuilder, CppTorchOptions

        fingerprint = cpu_vec_isa._get_isa_dry_compile_fingerprint(isa.build_arch_flags())  # type: ignore[attr-defined]
        k, src = write(code, "cpp", extra=fingerprint)
        opts = CppTorchOptions(vec_isa=isa, warning_all=False)
        return CppBuilder(k, [src], opts, os.path.dirname(src)).get_target_file_path()
    except Exception as exc:
        log.warning("inductor's ISA probe not shared: %s", exc)
        return None


def _probe_path_ok(rel: str) -> bool:
    """``rel`` is where inductor keeps a compiled file in its cache: ``<2 chars>/<name>.so``."""
    parts = rel.split("/")
    return len(parts) == 2 and len(parts[0]) == 2 and parts[1].endswith(".so") and ".." not in parts


def _listed_probes(shared: str) -> list[tuple[str, str]]:
    """The probes Zoo's builder listed in ``shared``'s ``done``: (its file there, its path in a cache)."""
    try:
        with open(os.path.join(shared, "done")) as f:
            probes = json.load(f).get("isa_probes") or {}
    except (OSError, ValueError):
        return []
    return [
        (os.path.join(shared, name), str(rel))
        for name, rel in probes.items()
        if "/" not in name and name.startswith(ISA_PREFIX) and _probe_path_ok(str(rel))
    ]


def _same_bytes(path: str, data: bytes) -> bool:
    """``path`` is a regular file (no link) holding ``data``."""
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            return False
        with open(path, "rb") as f:
            return f.read() == data
    except OSError:
        return False


def copy_isa_probes(shared: str, cache: str) -> int:
    """Copy the ISA probe libraries Zoo's builder left in ``shared`` into the model process's
    inductor cache ``cache`` where it has none (copies, not links: a link would name this run's
    mount point, gone at the next run); returns how many. Runs in the model process: what it
    does here touches only its own namespace."""
    n = 0
    for source, rel in _listed_probes(shared):
        dest = os.path.join(cache, rel)
        with open(source, "rb") as f:
            data = f.read()
        if _same_bytes(dest, data):
            continue
        # anything else there (a copy cut short, a link) would be taken as the probe: replaced whole
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(dest), prefix=".zoo-probe-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dest)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        n += 1
    return n


def probes_as_built(shared: str, cache: str) -> set[str]:
    """The probe libraries in the model process's cache ``cache`` that are byte for byte the ones
    Zoo's builder left in ``shared`` (real paths): those the builder loaded already."""
    same = set()
    for source, rel in _listed_probes(shared):
        dest = os.path.join(cache, rel)
        try:
            with open(source, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if _same_bytes(dest, data):
            same.add(os.path.realpath(dest))
    return same


def _probe_at_once(cpu_vec_isa: Any) -> None:
    """Probe the ISAs the CPU lists in threads (inductor probes them one by one, each a compile of
    its own, when it first needs the list): the compilers run at once, and the toy's compile then
    finds every answer cached. Where inductor's helpers moved, it probes as it does."""
    try:
        cpu = cpu_vec_isa.x86_isa_checker() if os.uname().machine in ("x86_64", "AMD64") else []
        listed = [isa for isa in cpu_vec_isa.supported_vec_isa_list if all(f in cpu for f in str(isa).split())]
        with ThreadPoolExecutor(max_workers=max(1, len(listed))) as pool:
            list(pool.map(bool, listed))
    except Exception as exc:
        log.warning("inductor's ISA probes not run at once: %s", exc)


def build(out: str) -> list[str]:
    """Compile a toy function of Zoo's with inductor, as a model process compiles (its header
    directory ``out``, thread-independent kernels): inductor precompiles ``cpp_prefix.h`` there.
    Returns the libraries of inductor's ISA probes that passed (paths in its cache directory).

    Before its first compile, every process probes the CPU's vector ISAs: it compiles test
    programs (AVX512, its VNNI and BF16 forms, AVX2, ...) into its cache and loads each in a child.
    That was about 8 of the 22 s of a cold tiny-DistilBERT target stage on one core, paid by every
    model process, whose cache namespace is its own. A probe library found in the cache is loaded,
    not rebuilt, so the model processes get copies of these (:func:`copy_isa_probes`)."""
    import torch
    from torch._inductor import codecache, config, cpu_vec_isa

    probes: list[str] = []
    check_build = cpu_vec_isa.VecISA.check_build

    def recording(isa: cpu_vec_isa.VecISA, code: str) -> bool:
        ok = check_build(isa, code)
        lib = _probe_lib(isa, code) if ok else None  # flags as the probe had them (bf16's are set for it)
        if lib and os.path.isfile(lib):
            probes.append(lib)
        return ok

    cpu_vec_isa.VecISA.check_build = recording  # type: ignore[method-assign]
    _probe_at_once(cpu_vec_isa)

    codecache._HEADER_DIR = out
    codecache._HEADER_LOCK_DIR = os.path.join(out, "locks")
    config.compile_threads = 1  # no worker pool: one core, beside the model processes
    if hasattr(config.cpp, "dynamic_threads"):
        config.cpp.dynamic_threads = True  # as zoo_runner.engine sets it where a compile cache is shared

    def toy(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.softmax(torch.relu(x @ w) * 2.0 + 1.0, dim=-1).sum(dim=0)

    with torch.no_grad():
        torch.compile(toy, backend="inductor")(torch.randn(16, 32), torch.randn(32, 64))
    return probes


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit("usage: python -m zoo_runner.shared_headers BASE KEY")
    raise SystemExit(build_shared(Path(sys.argv[1]), sys.argv[2]))
