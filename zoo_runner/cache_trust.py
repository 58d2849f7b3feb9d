"""The parent's half of the shared caches: nothing one model process writes is read by another's.

Model code is hostile (docs/SPEC.md, "Caches no model can poison"), so the caches that model
processes share are laid out by *writer*:

* **Namespaces.** Every cache entry lives under a namespace derived by the parent from what runs
  in the model process besides Zoo and the installed packages: the model id, its revision and the
  third-party plugins (``ZOO_PLUGINS``). A process validating model X sees X's namespace and
  nothing else, so whatever it writes or forges is read only by later runs of X with the same
  plugins, never by model Y's.
* **Reference cache: read-only, published by the parent, authenticated.** The model process gets
  its namespace of the reference cache read-only. A reference it computed is handed back through
  its work directory (``references-out/<key>.safetensors``); the parent reads it without following
  links, checks it (regular file of the sandbox uid, under the size cap, a safetensors file whose
  metadata and tensors agree, one output set per input of the request, every floating value
  finite), and publishes it into the namespace with an HMAC-SHA256 under a key in the cache root
  (``.zoo-mac-key``, 0600, never shown to a model process). Before each run the parent checks the
  MAC of every entry of the namespace it shows: an entry that fails is a miss, logged and deleted,
  never used.
* **Compile caches: a writable namespace per writer.** Inductor, Triton, OpenVINO, XLA and Neuron
  write their caches while they compile, in formats the parent cannot check, so each namespace of
  the compile cache is writable by the runs of its writer only (bound alone into the model
  process), and pruned by size (``ZOO_COMPILE_CACHE_MB``, least recently used namespace first).

The parent creates every directory with ``O_NOFOLLOW`` relative to a directory descriptor it owns,
and changes an owner only through a descriptor of the directory it just created or opened without
following a link (never by path), so a process swapping a directory for a symbolic link cannot
make it re-own anything else.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import stat
import time
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

KEY_FILE = ".zoo-mac-key"
ENTRY = re.compile(r"^[0-9a-f]{64}\.safetensors$")
NAMESPACE = re.compile(r"^[0-9a-f]{32}$")
OUTBOX = "references-out"
MAX_OUTBOX_FILES = 16


# ------------------------------------------------------------------ namespaces


def namespace(model_id: str, revision: str | None, plugins: str | None) -> str:
    """The writer of a model process's cache entries: model, revision and third-party plugins."""
    names = sorted({p.strip() for p in (plugins or "").split(",") if p.strip()})
    blob = json.dumps({"model": model_id, "revision": revision, "plugins": names}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _open_dir(path: str | os.PathLike[str], dir_fd: int | None = None) -> int:
    return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def own_root(path: str | os.PathLike[str], mode: int = 0o755) -> int:
    """Create ``path`` (and its parents) and make it this process's, with ``mode``; returns an
    O_NOFOLLOW descriptor of it. A root that is a symbolic link is refused (OSError ELOOP)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(p, mode)
    except FileExistsError:
        pass
    fd = _open_dir(p)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid():  # an older Zoo handed it to the sandbox uid: take it back
        os.fchown(fd, os.geteuid(), os.getegid())
    if stat.S_IMODE(st.st_mode) != mode:
        os.fchmod(fd, mode)
    return fd


def subdir(root_fd: int, name: str, uid: int | None = None, gid: int | None = None, mode: int = 0o755) -> int:
    """``name`` inside the directory ``root_fd``, created if missing, owned by ``uid`` (when given)
    through its own descriptor; returns that descriptor (the caller closes it)."""
    for attempt in range(2):
        try:
            os.mkdir(name, mode, dir_fd=root_fd)
        except FileExistsError:
            pass
        try:
            fd = _open_dir(name, dir_fd=root_fd)
            break
        except OSError as exc:  # a link or a file where the directory should be: removed, never followed
            if attempt or exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            log.warning("cache: %r was not a directory (%s): replaced", name, exc.strerror)
            os.unlink(name, dir_fd=root_fd)
    st = os.fstat(fd)
    if uid is not None and gid is not None and (st.st_uid, st.st_gid) != (uid, gid):
        os.fchown(fd, uid, gid)
    elif uid is None and st.st_uid != os.geteuid():
        os.fchown(fd, os.geteuid(), os.getegid())
    if stat.S_IMODE(st.st_mode) != mode:
        os.fchmod(fd, mode)
    return fd


# ------------------------------------------------------------------ the MAC key


def mac_key(root_fd: int) -> bytes:
    """The reference cache's MAC key, created on first use: 32 random bytes in ``.zoo-mac-key``
    (0600, this process's uid) in the cache root. Shared by the workers that share the root."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(3):
        try:
            fd = os.open(KEY_FILE, flags, dir_fd=root_fd)
        except FileNotFoundError:
            tmp = f".key-{secrets.token_hex(8)}"
            fd = os.open(
                tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=root_fd
            )
            try:
                os.write(fd, secrets.token_bytes(32))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(tmp, KEY_FILE, src_dir_fd=root_fd, dst_dir_fd=root_fd)  # first writer wins
            except FileExistsError:
                pass
            os.unlink(tmp, dir_fd=root_fd)
            continue
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077:
                raise PermissionError(f"{KEY_FILE} is not a private file of uid {os.geteuid()}")
            key = os.read(fd, 64)
        finally:
            os.close(fd)
        if len(key) >= 32:
            return key
        raise PermissionError(f"{KEY_FILE} is too short to be a key")
    raise OSError(errno.EAGAIN, f"could not create {KEY_FILE}")


def _mac(key: bytes, ns: str, name: str, data: bytes) -> str:
    h = hmac.new(key, digestmod=hashlib.sha256)
    h.update(f"{ns}/{name}\0".encode())  # bound to its place: an entry moved to another key is forged
    h.update(data)
    return h.hexdigest()


def _read_file(path: str, dir_fd: int | None, max_bytes: int, owner: int | None = None) -> bytes:
    """A regular file's bytes, never through a link, a FIFO or a hard link of someone else's."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_nlink != 1:
            raise ValueError(f"{st.st_nlink} hard links")
        if owner is not None and st.st_uid != owner:
            raise ValueError(f"owned by uid {st.st_uid}, not {owner}")
        if st.st_size > max_bytes:
            raise ValueError(f"{st.st_size} bytes, over the cap of {max_bytes}")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, 1 << 22)
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                raise ValueError(f"over the cap of {max_bytes} bytes")
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ the reference cache


def reference_namespace(root: str, ns: str) -> Path:
    """The namespace ``ns`` of the reference cache at ``root``, created (this process's, 0755) and
    checked: every entry whose MAC fails is deleted and logged; the others are marked used now."""
    root_fd = own_root(root)
    try:
        key = mac_key(root_fd)
        ns_fd = subdir(root_fd, ns)
        try:
            verify_namespace(ns_fd, ns, key)
        finally:
            os.close(ns_fd)
    finally:
        os.close(root_fd)
    return Path(root) / ns


def verify_namespace(ns_fd: int, ns: str, key: bytes) -> dict[str, int]:
    """Check every entry of a namespace against its MAC; returns counts of kept and dropped."""
    from .reference_cache import _max_bytes

    kept = dropped = 0
    now = time.time()
    for name in os.listdir(ns_fd):
        if name.endswith(".mac") and ENTRY.match(name[:-4]):
            try:
                os.stat(name[:-4], dir_fd=ns_fd, follow_symlinks=False)
            except FileNotFoundError:  # a MAC left alone
                _unlink(ns_fd, name)
            continue
        if not ENTRY.match(name):
            if not name.startswith(".tmp-"):
                log.warning("reference cache %s: %r is not an entry: removed", ns, name)
            _unlink(ns_fd, name)
            continue
        try:
            data = _read_file(name, ns_fd, int(_max_bytes()) + (1 << 20), owner=os.geteuid())
            want = _read_file(name + ".mac", ns_fd, 256, owner=os.geteuid()).decode("ascii").strip()
            ok = hmac.compare_digest(want, _mac(key, ns, name, data))
            why = "its MAC does not match"
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            ok, why = False, f"unverifiable ({exc})"
        if ok:
            kept += 1
            try:
                os.utime(name, (now, now), dir_fd=ns_fd, follow_symlinks=False)  # recently used: pruned last
            except OSError:
                pass
        else:
            dropped += 1
            log.warning("reference cache entry %s/%s: %s: deleted, never used", ns, name, why)
            _unlink(ns_fd, name)
            _unlink(ns_fd, name + ".mac")
    return {"kept": kept, "dropped": dropped}


def _unlink(dir_fd: int, name: str) -> None:
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        if stat.S_ISDIR(st.st_mode):
            fd = _open_dir(name, dir_fd=dir_fd)
            os.close(fd)
            shutil.rmtree(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)
    except (FileNotFoundError, NotADirectoryError, OSError):
        pass


def check_entry(data: bytes, inputs: int | None) -> str | None:
    """Why the bytes of a handed-back reference are not a reference of this request (None: they are)."""
    import torch
    from safetensors.torch import load as load_tensors

    try:
        header_len = int.from_bytes(data[:8], "little")
        header = json.loads(data[8 : 8 + header_len])
        meta = json.loads(header["__metadata__"]["zoo"])
        tensors = load_tensors(data)
    except Exception as exc:  # not safetensors, or no Zoo metadata
        return f"not a reference file ({type(exc).__name__}: {str(exc)[:120]})"
    keys32, keys64 = meta.get("keys32"), meta.get("keys64")
    if not isinstance(keys32, list) or not all(isinstance(k, list) for k in keys32):
        return "its metadata has no output names"
    if inputs is not None and len(keys32) != inputs:
        return f"{len(keys32)} output sets for {inputs} inputs"
    if not isinstance(meta.get("op_census", {}), dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in meta.get("op_census", {}).values()
    ):
        return "its op census is not counts"
    for v in (meta.get("reference_ms"),):
        if v is not None and not isinstance(v, (int, float)):
            return "its reference time is not a number"
    named = {f"32/{i}/{k}" for i, keys in enumerate(keys32) for k in keys}
    if not meta.get("same64"):
        if not isinstance(keys64, list) or len(keys64) != len(keys32):
            return "its fp64 outputs do not match its fp32 ones"
        named |= {f"64/{i}/{k}" for i, keys in enumerate(keys64) for k in keys}
    if named != set(tensors):
        return "its tensors are not the ones its metadata names"
    for name, t in tensors.items():
        if t.is_floating_point() or t.is_complex():
            if not bool(torch.isfinite(t).all()):
                return f"{name} is not finite"
    return None


def publish(outbox: Path, ns_dir: Path, ns: str, uid: int | None, inputs: int | None) -> dict[str, str]:
    """Check each reference the model process handed back and publish the good ones into its
    namespace with their MAC; returns {key: "published" | "refused: why"}."""
    from .reference_cache import _max_bytes

    out: dict[str, str] = {}
    try:
        box_fd = _open_dir(outbox)
    except OSError:
        return out
    try:
        names = sorted(os.listdir(box_fd))
        for i, name in enumerate(names):
            if i >= MAX_OUTBOX_FILES:
                out["..."] = f"refused: more than {MAX_OUTBOX_FILES} files"
                break
            if not ENTRY.match(name):
                out[name[:80]] = "refused: not a reference file name"
                continue
            key = name[: -len(".safetensors")]
            try:
                data = _read_file(name, box_fd, int(_max_bytes()), owner=uid if uid is not None else os.geteuid())
            except (OSError, ValueError) as exc:
                out[key] = f"refused: {exc}"
                continue
            why = check_entry(data, inputs)
            if why:
                out[key] = f"refused: {why}"
                log.warning("reference %s handed back for namespace %s refused: %s", key, ns, why)
                continue
            out[key] = _store(ns_dir, ns, name, data)
    finally:
        os.close(box_fd)
    return out


def _store(ns_dir: Path, ns: str, name: str, data: bytes) -> str:
    from .reference_cache import ReferenceCache, _max_bytes

    root_fd = _open_dir(ns_dir.parent)
    try:
        key = mac_key(root_fd)
        ns_fd = subdir(root_fd, ns)
    finally:
        os.close(root_fd)
    try:
        for payload, final in ((_mac(key, ns, name, data).encode(), name + ".mac"), (data, name)):
            tmp = f".tmp-{secrets.token_hex(8)}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=ns_fd)
            try:
                os.write(fd, payload)
            finally:
                os.close(fd)
            os.replace(tmp, final, src_dir_fd=ns_fd, dst_dir_fd=ns_fd)
    except OSError as exc:
        return f"refused: {exc}"
    finally:
        os.close(ns_fd)
    ReferenceCache(ns_dir.parent).prune(_max_bytes())
    return "published"


# ------------------------------------------------------------------ the compile cache


def compile_namespace(root: str, ns: str, uid: int | None, gid: int | None) -> Path:
    """The writable namespace ``ns`` of the compile cache at ``root``: the root this process's
    (0711: the sandbox uid may pass, not list or write), the namespace the sandbox uid's."""
    root_fd = own_root(root, 0o711)
    try:
        os.close(subdir(root_fd, ns, uid, gid, 0o700 if uid is not None else 0o755))
        now = time.time()
        os.utime(ns, (now, now), dir_fd=root_fd, follow_symlinks=False)  # used now: pruned last
    finally:
        os.close(root_fd)
    return Path(root) / ns


def tree_bytes(dir_fd: int) -> int:
    """Bytes on disk of everything under the directory ``dir_fd`` (links not followed)."""
    total = 0
    for _top, dirs, files, top_fd in os.fwalk(dir_fd=dir_fd, follow_symlinks=False):
        for name in files + dirs:
            try:
                total += os.stat(name, dir_fd=top_fd, follow_symlinks=False).st_blocks * 512
            except OSError:
                pass
    return total


def prune_compile_cache(root: str, max_bytes: int, keep: str | None = None) -> list[str]:
    """Delete the least recently used namespaces until the compile cache fits ``max_bytes``
    (never ``keep``, the one in use); returns the namespaces removed."""
    try:
        root_fd = _open_dir(root)
    except OSError:
        return []
    removed: list[str] = []
    try:
        spaces = []
        total = 0
        for name in os.listdir(root_fd):
            if not NAMESPACE.match(name):
                continue
            try:
                st = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
                if not stat.S_ISDIR(st.st_mode):
                    continue
                fd = _open_dir(name, dir_fd=root_fd)
            except OSError:
                continue
            try:
                size = tree_bytes(fd)
            finally:
                os.close(fd)
            spaces.append((st.st_mtime, size, name))
            total += size
        for _, size, name in sorted(spaces):
            if total <= max_bytes:
                break
            if name == keep:
                continue
            try:
                shutil.rmtree(name, dir_fd=root_fd)
                removed.append(name)
                total -= size
            except OSError as exc:
                log.warning("compile cache namespace %s not pruned: %s", name, exc)
    finally:
        os.close(root_fd)
    if removed:
        log.info("compile cache %s pruned to %d MB: %d namespaces removed", root, max_bytes >> 20, len(removed))
    return removed


def describe_publish(published: dict[str, str]) -> Any:
    """What ``details.reference_published`` says: the outcome per handed-back key."""
    return {k[:16]: v for k, v in published.items()}
