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
import fcntl
import hashlib
import hmac
import json
import logging
import os
import re
import secrets
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
# What a cache root held that a model process could have written (older layouts included): removed
# when the root is taken back from another uid. Names Zoo never reads are left alone.
LEGACY = re.compile(
    r"^([0-9a-f]{2}|[0-9a-f]{32}|\.zoo-mac-key|\.used|\.(trash|tmp|key)-.*|inductor|triton|neuron|xla|openvino)$"
)


# ------------------------------------------------------------------ namespaces


def namespace(
    model_id: str,
    revision: str | None,
    plugins: str | None,
    env: str | None = None,
    device: str | None = None,
    custom_code: bool = False,
) -> str:
    """The writer of a model process's cache entries: model, revision, third-party plugins and the
    env (``zoo env``) whose packages it ran with (another env's compiler never reads them). ``device``:
    the compile namespace of a device with caches of its own (neuron's NEFFs), apart from every other
    device's, and apart again where the repo's custom code ran (``custom_code``): code run on cpu never
    plants what a neuron process loads."""
    names = sorted({p.strip() for p in (plugins or "").split(",") if p.strip()})
    key: dict[str, object] = {"model": model_id, "revision": revision, "plugins": names}
    if env:  # absent for Zoo's own interpreter: the namespaces made before envs existed stay valid
        key["env"] = env
    if device:  # absent likewise for every device without caches of its own
        key["device"] = device
        key["custom_code"] = bool(custom_code)
    blob = json.dumps(key, sort_keys=True)
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
    if st.st_uid != os.geteuid():  # an older Zoo handed it to the sandbox uid: take it back, emptied
        os.fchown(fd, os.geteuid(), os.getegid())
        os.fchmod(fd, mode)
        for name in os.listdir(fd):  # nothing of a cache a model process could write stays
            if LEGACY.match(name):
                log.warning("cache %s taken back from uid %d: %r removed", p, st.st_uid, name[:80])
                _unlink(fd, name)
    elif stat.S_IMODE(st.st_mode) != mode:
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


def _hmac(key: bytes, ns: str, name: str) -> Any:
    h = hmac.new(key, digestmod=hashlib.sha256)
    h.update(f"{ns}/{name}\0".encode())  # bound to its place: an entry moved to another key is forged
    return h


def _open_regular(name: str, dir_fd: int, max_bytes: int, owner: int | None = None) -> int:
    """A descriptor of a regular file, never through a link, a FIFO or a hard link of someone else's."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
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
    except BaseException:
        os.close(fd)
        raise
    return fd


def _chunks(fd: int, max_bytes: int):
    total = 0
    while chunk := os.read(fd, 1 << 22):
        total += len(chunk)
        if total > max_bytes:
            raise ValueError(f"over the cap of {max_bytes} bytes")
        yield chunk


def _read_small(name: str, dir_fd: int, max_bytes: int, owner: int | None = None) -> bytes:
    fd = _open_regular(name, dir_fd, max_bytes, owner)
    try:
        return b"".join(_chunks(fd, max_bytes))
    finally:
        os.close(fd)


class _Locked:
    """An exclusive lock on a namespace's directory: publishing, checking and pruning one namespace
    never interleave, between the threads and the workers that share the cache."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __enter__(self) -> int:
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self.fd

    def __exit__(self, *exc: Any) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)


def entry_cap() -> int:
    """The largest reference file accepted: the cache's size, at most 1 GiB."""
    from .reference_cache import max_bytes

    return int(min(max_bytes(), 1 << 30))


# ------------------------------------------------------------------ the reference cache


def reference_namespace(root: str, ns: str) -> Path:
    """The namespace ``ns`` of the reference cache at ``root``, created (this process's, 0755) and
    checked: every entry whose MAC fails is deleted and logged; the others are marked used now."""
    root_fd = own_root(root)
    try:
        key = mac_key(root_fd)
        ns_fd = subdir(root_fd, ns)
        try:
            with _Locked(ns_fd):
                verify_namespace(ns_fd, ns, key)
        finally:
            os.close(ns_fd)
    finally:
        os.close(root_fd)
    return Path(root) / ns


def verify_namespace(ns_fd: int, ns: str, key: bytes) -> dict[str, int]:
    """Check every entry of a namespace against its MAC (the caller holds its lock); returns counts."""
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
            log.warning("reference cache %s: %r is not an entry: removed", ns, name[:80])
            _unlink(ns_fd, name)
            continue
        try:
            want = _read_small(name + ".mac", ns_fd, 256, owner=os.geteuid()).decode("ascii").strip()
            h = _hmac(key, ns, name)
            fd = _open_regular(name, ns_fd, entry_cap(), owner=os.geteuid())
            try:
                for chunk in _chunks(fd, entry_cap()):
                    h.update(chunk)
            finally:
                os.close(fd)
            ok = hmac.compare_digest(want, h.hexdigest())
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
            remove_tree(dir_fd, name)
        else:
            os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def check_entry(path: str, inputs: int | None) -> str | None:
    """Why the reference file at ``path`` (a copy only the parent can write) is not a reference of
    this request (None: it is). Tensors are read one at a time, mapped, not copied."""
    try:
        import torch
        from safetensors import safe_open

        with safe_open(path, framework="pt") as f:
            meta = json.loads((f.metadata() or {})["zoo"])
            if not isinstance(meta, dict):
                return "its metadata is not an object"
            keys32, keys64 = meta.get("keys32"), meta.get("keys64")
            if not isinstance(keys32, list) or not all(isinstance(k, list) for k in keys32):
                return "its metadata has no output names"
            if inputs is not None and len(keys32) != inputs:
                return f"{len(keys32)} output sets for {inputs} inputs"
            census = meta.get("op_census", {})
            if not isinstance(census, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in census.values()
            ):
                return "its op census is not counts"
            if meta.get("reference_ms") is not None and not isinstance(meta.get("reference_ms"), (int, float)):
                return "its reference time is not a number"
            named = {f"32/{i}/{k}" for i, keys in enumerate(keys32) for k in keys}
            if not meta.get("same64"):
                if not isinstance(keys64, list) or len(keys64) != len(keys32):
                    return "its fp64 outputs do not match its fp32 ones"
                named |= {f"64/{i}/{k}" for i, keys in enumerate(keys64) for k in keys}
            if named != set(f.keys()):
                return "its tensors are not the ones its metadata names"
            for name in f.keys():
                t = f.get_tensor(name)
                if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all()):
                    return f"{name} is not finite"
                del t
    except Exception as exc:  # not safetensors, no Zoo metadata, a dtype torch cannot check
        return f"not a reference file ({type(exc).__name__}: {str(exc)[:120]})"
    return None


def publish(outbox: Path, ns_dir: Path, ns: str, uid: int | None, inputs: int | None) -> dict[str, str]:
    """Check each reference the model process handed back and publish the good ones into its
    namespace with their MAC; returns {key: "published" | "refused: why"}. Each is copied first
    (streamed, at most :func:`entry_cap` bytes) into a file only the parent can write, and that
    copy is what is checked and published: the model process cannot change it afterwards."""
    out: dict[str, str] = {}
    try:
        box_fd = _open_dir(outbox)
    except OSError:
        return out
    owner = uid if uid is not None else os.geteuid()
    root_fd = _open_dir(ns_dir.parent)
    try:
        key = mac_key(root_fd)
        ns_fd = subdir(root_fd, ns)
    finally:
        os.close(root_fd)
    try:
        names = sorted(os.listdir(box_fd))
        with _Locked(ns_fd):
            for i, name in enumerate(names):
                if i >= MAX_OUTBOX_FILES:
                    out["..."] = f"refused: more than {MAX_OUTBOX_FILES} files"
                    break
                if not ENTRY.match(name):
                    out[name[:80]] = "refused: not a reference file name"
                    continue
                out[name[: -len(".safetensors")]] = _publish_one(box_fd, ns_fd, ns_dir, ns, name, key, owner, inputs)
    finally:
        os.close(box_fd)
        os.close(ns_fd)
    from .reference_cache import max_bytes

    prune_references(str(ns_dir.parent), int(max_bytes()))
    return out


def prune_references(root: str, max_bytes: int) -> int:
    """Delete the least recently used entries of the reference cache until it fits ``max_bytes``;
    only entries of namespaces, by descriptor (never a path a model process could have swapped)."""
    try:
        root_fd = _open_dir(root)
    except OSError:
        return 0
    entries = []
    total = removed = 0
    try:
        spaces = [n for n in os.listdir(root_fd) if NAMESPACE.match(n)]
        for ns in spaces:
            try:
                ns_fd = _open_dir(ns, dir_fd=root_fd)
            except OSError:
                continue
            try:
                for name in os.listdir(ns_fd):
                    if ENTRY.match(name) or (name.endswith(".mac") and ENTRY.match(name[:-4])):
                        try:
                            st = os.stat(name, dir_fd=ns_fd, follow_symlinks=False)
                        except OSError:
                            continue
                        total += st.st_size
                        if ENTRY.match(name):
                            entries.append((st.st_mtime, st.st_size, ns, name))
            finally:
                os.close(ns_fd)
        for _, size, ns, name in sorted(entries):
            if total <= max_bytes:
                break
            try:
                ns_fd = _open_dir(ns, dir_fd=root_fd)
            except OSError:
                continue
            try:
                with _Locked(ns_fd):
                    _unlink(ns_fd, name)
                    _unlink(ns_fd, name + ".mac")
            finally:
                os.close(ns_fd)
            total -= size
            removed += 1
    finally:
        os.close(root_fd)
    return removed


def _publish_one(
    box_fd: int, ns_fd: int, ns_dir: Path, ns: str, name: str, key: bytes, owner: int, inputs: int | None
) -> str:
    tmp = f".tmp-{secrets.token_hex(8)}"
    h = _hmac(key, ns, name)
    try:
        src = _open_regular(name, box_fd, entry_cap(), owner)
        try:
            dst = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=ns_fd)
            try:
                for chunk in _chunks(src, entry_cap()):
                    h.update(chunk)
                    os.write(dst, chunk)
            finally:
                os.close(dst)
        finally:
            os.close(src)
        why = check_entry(str(ns_dir / tmp), inputs)
        if why:
            log.warning("reference %s handed back for namespace %s refused: %s", name, ns, why)
            return f"refused: {why}"
        os.replace(tmp, name, src_dir_fd=ns_fd, dst_dir_fd=ns_fd)  # the data, then its MAC
        mac_tmp = f".tmp-{secrets.token_hex(8)}"
        fd = os.open(mac_tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=ns_fd)
        try:
            os.write(fd, h.hexdigest().encode())
        finally:
            os.close(fd)
        os.replace(mac_tmp, name + ".mac", src_dir_fd=ns_fd, dst_dir_fd=ns_fd)
        return "published"
    except (OSError, ValueError) as exc:
        return f"refused: {exc}"
    finally:
        _unlink(ns_fd, tmp)


# ------------------------------------------------------------------ the compile cache


def compile_namespace(root: str, ns: str, uid: int | None, gid: int | None) -> Path:
    """The writable namespace ``ns`` of the compile cache at ``root``: the root this process's
    (0711: the sandbox uid may pass, not list or write), the namespace the sandbox uid's."""
    root_fd = own_root(root, 0o711)
    try:
        os.close(subdir(root_fd, ns, uid, gid, 0o700 if uid is not None else 0o755))
        _stamp(root_fd, ns)
    finally:
        os.close(root_fd)
    return Path(root) / ns


USED = ".used"  # root-owned: when each namespace was last used (its own mtime is the model's to set)


def _stamp(root_fd: int, ns: str) -> None:
    used_fd = subdir(root_fd, USED, mode=0o700)
    try:
        fd = os.open(ns, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=used_fd)
        os.close(fd)
        now = time.time()
        os.utime(ns, (now, now), dir_fd=used_fd, follow_symlinks=False)
    finally:
        os.close(used_fd)


def _stamps(root_fd: int) -> dict[str, float]:
    try:
        used_fd = _open_dir(USED, dir_fd=root_fd)
    except OSError:
        return {}
    try:
        out = {}
        for name in os.listdir(used_fd):
            try:
                out[name] = os.stat(name, dir_fd=used_fd, follow_symlinks=False).st_mtime
            except OSError:
                pass
        return out
    finally:
        os.close(used_fd)


MAX_DEPTH = 64  # directories deeper than this under a namespace: counted as over any cap
MAX_ENTRIES = 1_000_000
TOO_MUCH = 1 << 62


def tree_bytes(dir_fd: int, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> int:
    """Bytes on disk of everything under the directory ``dir_fd`` (links not followed; each entry
    counts 512 bytes besides its blocks, so empty files are not free). Without recursion, holding
    one descriptor per level: a tree deeper than ``max_depth`` or with more than ``max_entries``
    entries is :data:`TOO_MUCH`."""
    total = count = 0
    fds = [os.dup(dir_fd)]
    iters = [os.scandir(fds[0])]
    try:
        while iters:
            try:
                entry = next(iters[-1])
            except StopIteration:
                iters.pop().close()
                os.close(fds.pop())
                continue
            count += 1
            if count > max_entries:
                return TOO_MUCH
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            total += st.st_blocks * 512 + 512
            if stat.S_ISDIR(st.st_mode):
                if len(fds) >= max_depth:
                    return TOO_MUCH
                try:
                    fd = _open_dir(entry.name, dir_fd=fds[-1])
                except OSError:
                    continue
                fds.append(fd)
                iters.append(os.scandir(fd))
    finally:
        for it in iters:
            it.close()
        for fd in fds:
            os.close(fd)
    return total


def remove_tree(root_fd: int, name: str, tries: int = 5) -> None:
    """Delete ``name`` (a directory in ``root_fd``) and everything in it, however deep, holding two
    descriptors at most: each subdirectory is moved up beside it, emptied, then removed. Links
    are unlinked, never followed."""
    token = secrets.token_hex(6)
    trash = f".trash-{token}"
    os.rename(name, trash, src_dir_fd=root_fd, dst_dir_fd=root_fd)
    todo = [trash]
    n = 0
    left = {trash: tries}
    while todo:
        d = todo.pop()
        try:
            fd = _open_dir(d, dir_fd=root_fd)
        except FileNotFoundError:
            continue
        except OSError:
            _unlink(root_fd, d)
            continue
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            n += 1
                            up = f".trash-{token}-{n}"
                            os.rename(entry.name, up, src_dir_fd=fd, dst_dir_fd=root_fd)
                            todo.append(up)
                            left[up] = tries
                        else:
                            os.unlink(entry.name, dir_fd=fd)
                    except FileNotFoundError:
                        pass
        finally:
            os.close(fd)
        try:
            os.rmdir(d, dir_fd=root_fd)
        except OSError as exc:  # something wrote into it meanwhile: again, a few times
            if exc.errno == errno.ENOTEMPTY and left[d] > 0:
                left[d] -= 1
                todo.insert(0, d)
            else:
                log.warning("could not remove %s: %s", d, exc)


def prune_compile_cache(root: str, max_bytes: int, keep: str | None = None) -> list[str]:
    """Delete namespaces until the compile cache fits ``max_bytes``: first any one larger than the
    whole cap, then the least recently used by the parent's own stamps (never ``keep``, the one in
    use, unless it alone is over the cap); returns the namespaces removed. Leftovers of an
    interrupted removal go too."""
    try:
        root_fd = _open_dir(root)
    except OSError:
        return []
    removed: list[str] = []
    try:
        stamps = _stamps(root_fd)
        spaces = []
        total = 0
        for name in os.listdir(root_fd):
            if name.startswith(".trash-"):
                _unlink(root_fd, name)
                continue
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
            over = size > max_bytes
            spaces.append((not over, stamps.get(name, 0.0), size, name))
            total += size
        for fits, _, size, name in sorted(spaces):
            if total <= max_bytes and fits:
                break
            if name == keep and fits:
                continue
            try:
                remove_tree(root_fd, name)
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
