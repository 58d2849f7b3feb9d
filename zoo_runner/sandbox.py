"""The sandbox a model process runs in: policy, environment, and the parent's half of the setup.

Model files come from strangers, so the model process gets (docs/SPEC.md, "The sandbox a model
runs in"):

- an unprivileged uid: when Zoo runs as root it switches to ``ZOO_SANDBOX_UID`` (default 65533, a
  uid no account uses: no passwd entry is needed) and ``ZOO_SANDBOX_GID`` (default: the uid), with
  no supplementary groups and no capabilities; being another uid, it cannot read its ancestors'
  ``/proc/<pid>/environ``;
- ``PR_SET_NO_NEW_PRIVS``;
- its own network namespace with loopback only, and its own mount namespace: everything read-only,
  ``/tmp``, ``/var/tmp``, ``/run`` and home directories hidden (Unix sockets of PostgreSQL, Redis
  and friends live there), only its work directory and the configured caches writable;
- an environment built from an allowlist (:func:`base_env`); ``ZOO_SANDBOX_ENV`` names extra
  variables to pass, never one whose name looks like a secret;
- an ``HF_HOME`` of its own holding only the files the parent fetched, never a token;
- rlimits on private writable memory (the memory budget, RLIMIT_DATA), CPU time (from the time budget),
  file size and processes.

``ZOO_SANDBOX=off|best_effort|strict`` (default ``best_effort``). ``best_effort`` applies what this
machine allows and says what it could not in one warning line; ``strict`` refuses to run a model
without every protection (:class:`~zoo_runner.exceptions.SandboxUnavailable`); ``off`` runs models
as Zoo's own user, still with the allowlisted environment and the staged ``HF_HOME``. Every row's
``details.sandbox`` says what held. The mechanics are in :mod:`zoo_runner.sandbox_linux`.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from . import cache_trust, shared_headers
from .backends import INDUCTOR_FALLBACK_COMPILERS, BackendSpec
from .exceptions import BadInput, SandboxUnavailable
from .sandbox_linux import EXIT_REFUSED, PROTECTIONS, Plan
from .settings import DEFAULT_SANDBOX_UID, SANDBOX_MODES, settings

log = logging.getLogger(__name__)

MODES = SANDBOX_MODES
DEFAULT_UID = DEFAULT_SANDBOX_UID
SANDBOX_USER = "zoo-sandbox"

# The model process's environment: exactly these names, and names with these prefixes, from
# Zoo's own environment (then ZOO_SANDBOX_ENV), minus any that look like a secret.
ALLOW_NAMES = frozenset(
    """PATH LANG LANGUAGE TZ LD_LIBRARY_PATH PYTHONPATH PYTHONHASHSEED PYTHONUNBUFFERED
    PYTHONDONTWRITEBYTECODE PYTHONWARNINGS PYTHONFAULTHANDLER PYTHONIOENCODING PYTHONUTF8
    TOKENIZERS_PARALLELISM NUMEXPR_NUM_THREADS VECLIB_MAXIMUM_THREADS
    ZOO_PLUGINS ZOO_REFERENCE_CACHE_MB ZOO_SANDBOX ZOO_OPENVINO_INFERENCE_PRECISION_HINT""".split()
)
ALLOW_PREFIXES = (
    "LC_",
    "OMP_",
    "MKL_",
    "KMP_",
    "GOMP_",
    "OPENBLAS_",
    "ONEDNN_",
    "DNNL_",  # CPU math libraries
    "TORCH",
    "TRITON_",  # TORCH_*, TORCHINDUCTOR_*, TORCHDYNAMO_*: torch and its compilers
    "NEURON_",
    "XLA_",
    "PJRT_",
    "TPU_",  # TorchNeuron, torch-xla
    "CUDA_",
    "NVIDIA_",
    "CUBLAS_",
    "CUDNN_",
    "HIP_",
    "ROCR_",
    "HSA_",
    "ZE_",
    "SYCL_",  # devices
)
SECRET_WORDS = (
    "TOKEN",
    "SECRET",
    "PASSW",
    "CREDENTIAL",
    "API_KEY",
    "APIKEY",
    "ACCESS_KEY",
    "PRIVATE_KEY",
    "AUTH",
    "COOKIE",
    "SESSION",
)
FIXED_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "HF_DATASETS_OFFLINE": "1",
}
# Compile caches a backend writes, set per run: under the sandbox's compile cache (never one Zoo's
# own processes share: a model process could plant compiled code there), or Zoo's own when off.
TRIAGE_OUTBOX = "triage-out"
CACHE_VARS = {
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "XLA_PERSISTENT_CACHE_PATH": "xla",  # torch_xla's persistent compilation cache (zoo_runner/plugins/xla.py)
    "OPENVINO_CACHE_DIR": "openvino",  # OpenVINO's CACHE_DIR of compiled blobs (zoo_runner/plugins/openvino.py)
}
# Directories the model process must not see: scratch space other processes share, sockets, homes.
# Covered by an empty tmpfs in the model process's mount namespace: scratch and socket directories, homes,
# and where machines keep what is not the model's (databases under /var/lib and /opt, mounted volumes),
# and Zoo's own checkout (its data/, .git and databases): only what it needs is shown again (kept_dirs).
HIDE = ("/tmp", "/var/tmp", "/run", "/dev/shm", "/root", "/home", "/opt", "/srv", "/mnt", "/media", "/var/lib")
ENGINE = os.path.dirname(os.path.abspath(__file__))  # zoo_runner/: the one package of Zoo's a model process runs

_WARNED: set[str] = set()


def warn_once(key: str, message: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        log.warning("%s", message)


# ------------------------------------------------------------------ configuration


def mode() -> str:
    """``ZOO_SANDBOX``: off, best_effort or strict (BadInput for anything else)."""
    return settings().sandbox


def sandbox_ids() -> tuple[int, int]:
    s = settings()
    uid = s.sandbox_uid
    gid = s.sandbox_gid if s.sandbox_gid is not None else uid
    if uid >= 2**32 - 1 or gid >= 2**32 - 1:
        raise BadInput("ZOO_SANDBOX_UID and ZOO_SANDBOX_GID must be below 4294967295")
    return uid, gid


def is_secret_name(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def base_env(device: str | None = None) -> dict[str, str]:
    """The environment every model process (and the forkserver) starts from: the allowlist. For a model
    process of ``device`` (None: not known here, ``auto``), less the variables a device plugin keeps for
    its own model processes (``env_prefixes``: ``NEURON_*``, ``TORCH_NEURONX_*``) unless it is that device."""
    from .backends import device_env_prefixes

    others: tuple[str, ...] = ()
    if device is not None:  # "": the forkserver's, which hosts no device's own model process
        others = tuple(p for d, prefixes in device_env_prefixes().items() if d != device for p in prefixes)
    own = set(CACHE_VARS) | device_dir_vars()
    env = {
        k: v
        for k, v in os.environ.items()
        if (k in ALLOW_NAMES or k.startswith(ALLOW_PREFIXES))
        and k not in own
        and not (others and k.startswith(others))
        and not is_secret_name(k)
    }
    for name in (n.strip() for n in settings().sandbox_env.split(",")):
        if not name or name not in os.environ:
            continue
        if is_secret_name(name):
            warn_once(
                f"env:{name}", f"ZOO_SANDBOX_ENV names {name}, which looks like a secret: not passed to model processes"
            )
            continue
        env[name] = os.environ[name]
    env.update(FIXED_ENV)
    if others and _other_device_installed(device):
        # torch imports an installed device package by itself at `import torch` (its autoload of
        # torch.backends entry points; AWS: PyTorch loads torch_neuronx automatically): never in a
        # process of another device, which must not start that device's runtime
        env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    env.setdefault("PYTHONHASHSEED", "0")
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    return env


def _other_device_installed(device: str | None) -> bool:
    """Whether a device plugin with variables of its own, other than ``device``'s, has its package here."""
    from .backends import DEVICE_PLUGINS

    return any(
        d != device and p.env_prefixes and p.parent_check is not None and p.parent_check()[0]
        for d, p in DEVICE_PLUGINS.items()
    )


def device_dir_vars() -> set[str]:
    """The directory variables device plugins set per run (``cache_dirs``, ``run_dirs``): never the parent's."""
    from .backends import DEVICE_PLUGINS, device_env_prefixes

    device_env_prefixes()  # Zoo's own device plugins loaded
    return {var for p in DEVICE_PLUGINS.values() for var in (*p.cache_dirs, *p.run_dirs)}


def device_of(req: Any) -> tuple[Any, Any]:
    """(spec, device plugin) of ``req``'s backend; (None, None) for ``auto`` or a spec that does not parse."""
    from .backends import device_plugin

    if str(req.backend).strip() == "auto":  # resolved in the model process, never here
        return None, None
    try:
        spec = BackendSpec.parse(str(req.backend))
        return spec, device_plugin(spec.device)
    except Exception:
        return None, None


def _empty_dir(base: Path, sub: str) -> bool:
    """Whether ``base/sub`` (a directory the sandbox uid owns) is missing or empty, read without
    following a link it may have put there."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        base_fd = os.open(base, flags)
    except OSError:
        return True
    try:
        fd = os.open(sub, flags | os.O_NONBLOCK, dir_fd=base_fd)
    except OSError:
        return True
    finally:
        os.close(base_fd)
    try:
        with os.scandir(fd) as entries:
            return next(iter(entries), None) is None
    finally:
        os.close(fd)


def device_groups(plugin: Any) -> list[int]:
    """The groups of ``plugin``'s device nodes (``/dev/neuron*``: ``neuron`` on AWS's images)."""
    import glob

    if plugin is None or not plugin.device_nodes:
        return []
    groups = set()
    for node in glob.glob(plugin.device_nodes):
        try:
            groups.add(os.stat(node).st_gid)
        except OSError:
            pass
    return sorted(groups - {0})


def masked_nodes(plugin: Any) -> list[str]:
    """Device nodes of every other device plugin: covered by /dev/null in this model process."""
    import glob

    from .backends import DEVICE_PLUGINS, device_env_prefixes

    device_env_prefixes()
    return sorted(
        node
        for p in DEVICE_PLUGINS.values()
        if p is not plugin and p.device_nodes
        for node in glob.glob(p.device_nodes)
    )


def _cache_base() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")) / "zoo"


def remote_code_dir() -> Path:
    """Where Zoo keeps the custom code it fetched and hashed for model processes (zoo_runner.remote_code)."""
    return _cache_base() / "remote-code"


def shared_headers_dir() -> Path:
    """Where Zoo keeps inductor's precompiled headers for its model processes (zoo_runner.shared_headers)."""
    return _cache_base() / "inductor-headers"


def _compiles_with_inductor(req: Any) -> bool:
    """Whether ``req``'s backend spec names inductor as its compiler (``cpu+inductor@bf16``), or a
    compiler that hands what it cannot convert to inductor (``cpu+openvino``)."""
    try:
        compiler = BackendSpec.parse(str(req.backend)).compiler
    except Exception:  # not a spec (auto is resolved before a run): nothing to share
        return False
    return compiler == "inductor" or compiler in INDUCTOR_FALLBACK_COMPILERS


def start_shared_headers(backend: str, python: str | None = None) -> bool:
    """Start building Zoo's shared inductor headers now, before the first model process asks
    (``zoo run`` calls it first thing: the build then overlaps the run's own start instead of the
    first models' compiles); returns whether they are wanted and not built yet. Never under off
    (model processes of Zoo's uid do not get them) nor for another compiler. ``python``: an env's
    interpreter, whose model processes get a build of its own (its torch)."""
    if mode() == "off" or not _compiles_with_inductor(SimpleNamespace(backend=backend)):
        return False
    base = str(shared_headers_dir())
    return shared_headers.ensure(base, base_env(), python=python) is None and shared_headers.building(base, python)


def compile_cache_dir(uid: int | None) -> str:
    """Where backends' compile caches persist between model processes (one per sandbox uid)."""
    configured = settings().compile_cache.strip()
    if configured:
        return configured
    return str(_cache_base() / (f"compiled-{uid}" if uid is not None else "compiled"))


def _real_dirs(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if not p or not os.path.isabs(p):
            continue
        for q in (os.path.normpath(p), os.path.realpath(p)):
            if os.path.isdir(q) and q != "/" and q not in out:
                out.append(q)
    return out


def checkout_root() -> str | None:
    """Zoo's source checkout (the directory holding ``zoo_runner/`` and ``pyproject.toml``), where Zoo runs
    from one; None where it is installed into a Python installation (its parent is then site-packages)."""
    root = os.path.realpath(os.path.dirname(ENGINE))
    if not os.path.isfile(os.path.join(root, "pyproject.toml")):
        return None
    prefixes = {os.path.realpath(p) for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix)}
    if any(root == p or root.startswith(p + "/") for p in prefixes):
        return None
    return root


def hidden_dirs() -> list[str]:
    """The directories covered by an empty tmpfs, outermost only (/home hides /home/me)."""
    found = _real_dirs([*HIDE, os.path.expanduser("~"), tempfile.gettempdir(), checkout_root() or ""])
    return [d for d in found if not any(d.startswith(o + "/") for o in found)]


def plugin_dirs(plugins: str | None) -> list[str]:
    """The top-level package (or module) directories of the ``ZOO_PLUGINS`` modules a model process imports."""
    import importlib.util

    out = []
    for name in (plugins or "").replace(";", ",").split(","):
        top = name.strip().split(".")[0]
        if not top:
            continue
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            continue
        if spec is None:
            continue
        locations = list(spec.submodule_search_locations or [])
        out += locations or ([os.path.dirname(spec.origin)] if spec.origin else [])
    return out


def kept_dirs(python: str | None = None, plugins: str | None = None, visible: tuple[str, ...] = ()) -> list[str]:
    """What the model process needs to see under a hidden directory: the Python installation and the
    import path (never a hidden directory itself: a checkout on the path shows only what follows), Zoo's
    engine package, the ``ZOO_PLUGINS`` modules' packages, its device's directories (``visible``) and
    ``ZOO_SANDBOX_KEEP`` (colon-separated)."""
    paths = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, *sys.path]
    paths += os.environ.get("PYTHONPATH", "").split(os.pathsep) + settings().sandbox_keep.split(os.pathsep)
    paths += [ENGINE, *plugin_dirs(plugins if plugins is not None else settings().plugins), *visible]
    if python:
        real = os.path.realpath(python)
        paths += [os.path.dirname(os.path.dirname(os.path.abspath(python))), os.path.dirname(os.path.dirname(real))]
    hidden = hidden_dirs()
    root = checkout_root()  # never shown again, nor a directory holding it (a checkout under /tmp, say)
    # only what lies under a hidden directory, and never a hidden directory itself
    keep = [
        p
        for p in _real_dirs(paths)
        if any(p.startswith(h + "/") for h in hidden)
        and not any(h == p or h.startswith(p + "/") for h in hidden)
        and not (root and (p == root or root.startswith(p + "/")))
    ]
    keep.sort(key=len)
    out: list[str] = []
    for p in keep:
        if not any(p.startswith(k.rstrip("/") + "/") for k in out):
            out.append(p)
    return out


# ------------------------------------------------------------------ what this machine allows


@functools.lru_cache(maxsize=4)
def capabilities(uid: int | None = None, gid: int | None = None) -> dict[str, Any]:
    """What :mod:`zoo_runner.sandbox_linux` achieves here, tried once in a throwaway process."""
    if uid is None or gid is None:
        uid, gid = sandbox_ids()
    caps: dict[str, Any] = {"root": os.geteuid() == 0, "bwrap": shutil.which("bwrap"), "platform": sys.platform}
    if not sys.platform.startswith("linux"):
        caps.update(missing=list(PROTECTIONS), error="the sandbox needs Linux")
        return caps
    with tempfile.TemporaryDirectory(prefix="zoo-probe-") as tmp:
        args = json.dumps({"uid": uid, "gid": gid, "run_dir": tmp, "hide": hidden_dirs(), "keep": kept_dirs()})
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "zoo_runner.sandbox_linux", "probe", args],
                env=base_env(),
                capture_output=True,
                text=True,
                timeout=60,
                cwd=tmp,
            )
            caps.update(json.loads(proc.stdout.strip().splitlines()[-1]))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
            caps.update(missing=list(PROTECTIONS), error=f"the probe failed: {exc}")
            return caps
    if caps.get("uid_switched") and not caps.get("python_readable", True):
        caps["missing"] = sorted(set(caps.get("missing", [])) | {"uid"})
        caps.setdefault("errors", {})["uid"] = (
            f"uid {uid} cannot read the Python installation at {sys.base_prefix} (and no mount namespace to show it)"
        )
    return caps


def missing(caps: dict[str, Any]) -> list[str]:
    return [p for p in PROTECTIONS if p in set(caps.get("missing", PROTECTIONS))]


def why_missing(caps: dict[str, Any]) -> str:
    errors = caps.get("errors") or {}
    parts = []
    for p in missing(caps):
        reason = errors.get(p) or errors.get("namespaces" if p in ("netns", "mountns") else "", "")
        if p == "uid" and not caps.get("root"):
            reason = reason or f"Zoo runs as uid {os.geteuid()}, not root"
        parts.append(f"{p} ({reason})" if reason else p)
    return ", ".join(parts)


def check_strict() -> None:
    """Under ``ZOO_SANDBOX=strict``, raise unless this machine gives the full sandbox."""
    if mode() != "strict":
        return
    caps = capabilities(*sandbox_ids())
    if missing(caps):
        raise _refusal(caps)


def _refusal(caps: dict[str, Any], custom_code: bool = False) -> SandboxUnavailable:
    """Why a model process is not started where a protection is missing: strict, or custom code."""
    if custom_code:
        return SandboxUnavailable(
            f"custom code: this machine cannot give model processes {why_missing(caps)}; "
            "`zoo doctor` shows what it allows (custom code runs only with every protection, whatever ZOO_SANDBOX)"
        )
    return SandboxUnavailable(
        f"ZOO_SANDBOX=strict, but this machine cannot give model processes {why_missing(caps)}; "
        "`zoo doctor` shows what it allows (ZOO_SANDBOX=best_effort runs them anyway)"
    )


# ------------------------------------------------------------------ one run


@dataclass
class Run:
    """The files of one model process's run. ``root`` is Zoo's (read-only to the model); ``work``
    is the model's own, and everything in it is untrusted."""

    root: Path
    work: Path
    plan: Plan
    uid: int | None  # the uid the model process is meant to run as (None: Zoo's own)
    setup: dict[str, Any]
    namespace: str = ""  # the writer's namespace of the shared caches (:mod:`zoo_runner.cache_trust`)
    ref_ns: Path | None = None  # that namespace of the reference cache (published into by the parent)
    compile_ns: Path | None = None  # that namespace of the compile cache (written by the model process)
    cgroup: Any = None  # its cgroups.Group, where the machine gives one: removed by the launcher when it ends

    @property
    def outbox(self) -> Path:
        return self.work / cache_trust.OUTBOX

    @property
    def request(self) -> Path:
        return self.root / "request.json"

    @property
    def plan_path(self) -> Path:
        return self.root / "sandbox.json"

    @property
    def report(self) -> Path:
        return self.root / "sandbox-report.json"

    @property
    def stderr(self) -> Path:
        return self.root / "stderr"

    @property
    def result(self) -> Path:
        return self.work / "result.json"

    @property
    def stage(self) -> Path:
        return self.work / "stage"


def _chown_tree(path: Path, uid: int, gid: int) -> None:
    for dirpath, _dirnames, filenames in os.walk(path):
        os.chown(dirpath, uid, gid)
        for name in filenames:
            os.lchown(os.path.join(dirpath, name), uid, gid)


def _traversable(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid`` can reach and write ``path`` by the mode bits alone."""
    p = Path(path)
    for d in [*reversed(p.parents), p]:
        try:
            st = d.stat()
        except OSError:
            return False
        bits = st.st_mode >> (6 if st.st_uid == uid else 3 if st.st_gid == gid else 0)
        if not bits & 1:
            return False
    return True


def _stage_files(files_dir: str, dest: Path) -> int:
    """The fetched files, hard-linked (copied across filesystems or when not world-readable) into
    ``dest``: the model sees these files and nothing else of the Hub cache. Returns how many."""
    n = 0
    src_root = Path(files_dir)
    for dirpath, _, filenames in os.walk(src_root, followlinks=True):
        rel = Path(dirpath).relative_to(src_root)
        (dest / rel).mkdir(parents=True, exist_ok=True, mode=0o755)
        for name in filenames:
            real = os.path.realpath(os.path.join(dirpath, name))
            if not os.path.isfile(real):
                continue
            target = dest / rel / name
            try:
                if not os.stat(real).st_mode & stat.S_IROTH:
                    raise PermissionError("not world-readable")
                os.link(real, target)
            except OSError:
                shutil.copyfile(real, target)
                os.chmod(target, 0o644)
            n += 1
    return n


def memory_rlimits(req: Any, memory_bytes: int) -> dict[str, int]:
    """The memory budget as rlimits. ``data`` (RLIMIT_DATA) is the budget: what the process can write
    (heap, private mappings, tensors), not address space it only reserves. On a 16-core GPU machine torch's
    CUDA libraries and the malloc arenas of its threads reserve more than 16 GiB of address space before a
    model is built: under RLIMIT_AS alone every model there was a reference_error or an oom (measured on an
    H200 machine: "tokenizers.abi3.so: failed to map segment"). RLIMIT_DATA does not count shared memory
    (``MAP_SHARED`` anonymous mappings, memfds), so ``as`` (RLIMIT_AS) stays too, at the budget plus
    ``ZOO_SANDBOX_AS_HEADROOM_GB`` of reservations; a device whose runtime reserves more than that (cuda:
    DevicePlugin ``fork_safe`` False) gets none. Neither is a host-wide cap (a process group's children
    each have their own): that needs a cgroup."""
    from .backends import fork_safe

    limits = {"data": memory_bytes}
    if fork_safe(getattr(req, "backend", "") or ""):
        limits["as"] = memory_bytes + (settings().sandbox_as_headroom_gb << 30)
    return limits


def prepare_run(req: Any, tmp: str, memory_bytes: int, python: str | None = None) -> tuple[Run, Any]:
    """Lay out the run directory for ``req`` and write the plan; returns the run and the request
    the model process reads (paths as it sees them). Raises SandboxUnavailable under strict, and
    for custom code (``req.remote_code``), which runs as under strict whatever the mode: with every
    protection, or not at all (the model process refuses too, should one fail as it enters)."""
    m = mode()
    custom_code = bool(getattr(req, "remote_code", None))
    spec, plugin = device_of(req)
    if custom_code:
        if m == "off":
            raise SandboxUnavailable("custom code (ZOO_REMOTE_CODE=sandboxed) never runs with ZOO_SANDBOX=off")
        refusal = plugin.custom_code_refusal() if plugin is not None and plugin.custom_code_refusal else None
        if refusal:
            raise SandboxUnavailable(refusal)
        m = "strict"
    caps: dict[str, Any] = {}
    uid = gid = None
    if m != "off":
        want_uid, want_gid = sandbox_ids()
        caps = capabilities(want_uid, want_gid)
        gaps = missing(caps)
        if gaps:
            if m == "strict":
                raise _refusal(caps, custom_code)
            warn_once(
                f"missing:{','.join(gaps)}",
                f"sandbox (ZOO_SANDBOX=best_effort): model processes run without {why_missing(caps)}; "
                "`zoo doctor` shows what this machine allows, ZOO_SANDBOX=strict refuses instead"
                + ("; compile caches per run (no warm reruns)" if "mountns" in gaps else ""),
            )
            if "mountns" in gaps:
                _WARNED.add("compile:not-isolated")  # said in that line
        if os.geteuid() == 0 and "uid" not in gaps:
            uid, gid = want_uid, want_gid
    else:
        warn_once(
            "off", "sandbox off (ZOO_SANDBOX=off): model processes run as Zoo's own user, on its network and filesystem"
        )
    mountns = m != "off" and "mountns" not in missing(caps)

    root = Path(tmp)
    os.chmod(root, 0o711)
    work = root / "work"
    for d in (work, work / "home", work / "tmp", work / "hf_home", work / "cache"):
        d.mkdir(mode=0o700)
    setup: dict[str, Any] = {"env": "allowlist", "hf_home": "empty"}
    child_req = replace(req)
    env = base_env(spec.device if spec is not None else None)
    env.update(
        HOME=str(work / "home"),
        TMPDIR=str(work / "tmp"),
        HF_HOME=str(work / "hf_home"),
        USER=SANDBOX_USER,
        LOGNAME=SANDBOX_USER,
    )
    binds: list[list[str]] = []
    ro_binds: list[list[str]] = []
    ns = cache_trust.namespace(req.model_id, req.revision, req.plugins, getattr(req, "env", None))
    ref_ns: Path | None = None
    compile_ns: Path | None = None

    def reachable(source: str, what: str) -> bool:
        """Whether the model process can reach ``source`` without a mount namespace showing it."""
        if uid is not None and gid is not None and not _traversable(source, uid, gid):
            warn_once(
                f"cache:{source}",
                f"sandbox: uid {uid} cannot reach the {what} {source} (and no "
                "mount namespace to show it): model processes run without it",
            )
            return False
        return True

    # Shared caches only where no model process can write another's entries: read-only references
    # need a mount namespace or another uid; a writable compile namespace needs a mount namespace
    # (no other namespace visible) and a PID namespace (no other model's /proc/<pid>/root).
    isolated = mountns and bool(caps.get("pidns") and caps.get("private_proc"))
    if req.triage:  # the minified graph comes back as data, checked by the parent (zoo_runner.triage.graph)
        triage_out = work / TRIAGE_OUTBOX
        triage_out.mkdir(mode=0o700)
        child_req.triage_outbox = str(triage_out)
    if req.reference_cache:  # its namespace, read-only; new references come back through the outbox
        outbox = work / cache_trust.OUTBOX
        outbox.mkdir(mode=0o700)
        child_req.reference_outbox = str(outbox)
        child_req.reference_cache = ""
        setup["reference_cache"] = "off"
        if m == "off" or mountns or uid is not None:
            try:
                ref_ns = cache_trust.reference_namespace(req.reference_cache, ns)
            except OSError as exc:
                warn_once(f"refcache:{exc}", f"reference cache {req.reference_cache} unusable ({exc}): off")
                setup["reference_cache"] = f"off ({str(exc)[:120]})"
        else:
            warn_once(
                "refcache:shared-uid",
                "sandbox: model processes run as Zoo's own uid without a mount namespace: the reference "
                "cache is off (they could write it)",
            )
        if ref_ns is not None and mountns:
            inside = work / "cache" / "references"
            inside.mkdir(mode=0o755)
            ro_binds.append([str(ref_ns), str(inside)])
            child_req.reference_cache = str(inside)
            setup["reference_cache"] = "read-only"
        elif ref_ns is not None and (m == "off" or reachable(str(ref_ns), "reference cache")):
            child_req.reference_cache = str(ref_ns)
            setup["reference_cache"] = "direct" if m == "off" else "read-only (mode bits)"
        elif ref_ns is not None:
            ref_ns = None
    env["ZOO_REFERENCE_CACHE"] = child_req.reference_cache or "off"
    if m == "off":
        env.update({var: os.environ[var] for var in CACHE_VARS if var in os.environ})
    else:  # the writer's own namespace of the compile caches: compiled code no other model loads
        compile_root = str(work / "tmp")
        setup["compile_cache"] = "per run"
        if isolated:
            compile_key = ns
            if plugin is not None and plugin.cache_dirs:  # a device's own caches: a namespace of their own
                compile_key = cache_trust.namespace(
                    req.model_id, req.revision, req.plugins, getattr(req, "env", None), spec.device, custom_code
                )
            try:
                compile_ns = cache_trust.compile_namespace(compile_cache_dir(uid), compile_key, uid, gid)
            except OSError as exc:
                warn_once(f"compile:{exc}", f"compile cache {compile_cache_dir(uid)} unusable ({exc}): per run")
        else:
            warn_once(
                "compile:not-isolated",
                "sandbox: without mount and PID namespaces a model process could reach another's compile "
                "cache: each model process compiles into its own work directory (no warm reruns)",
            )
        if compile_ns is not None:
            compile_root = str(work / "cache" / "compile")
            Path(compile_root).mkdir(mode=0o700)
            binds.append([str(compile_ns), compile_root])
            setup["compile_cache"] = "its namespace"
        env.update({var: os.path.join(compile_root, sub) for var, sub in CACHE_VARS.items()})
    mkdirs: list[str] = []
    if plugin is not None:  # the device's own: its caches (made writable), fixed variables, cores
        cache_root = compile_root if m != "off" else str(work / "tmp")
        dirs = {var: os.path.join(cache_root, sub) for var, sub in plugin.cache_dirs.items()}
        dirs.update({var: str(work / "tmp" / sub) for var, sub in plugin.run_dirs.items()})
        env.update(dirs)
        mkdirs += list(dirs.values())  # made by the model process itself, as its uid, inside its own mounts
        env.update(plugin.model_env)
        device_setup = getattr(req, "device_setup", None) or {}
        if device_setup.get("cores_var") and device_setup.get("cores"):
            env[device_setup["cores_var"]] = device_setup["cores"]
        if plugin.cold_compile_s and spec.compiler and plugin.cache_dirs:
            subs = list(plugin.cache_dirs.values())
            if compile_ns is None or all(_empty_dir(compile_ns, sub) for sub in subs):
                setup["cold_compile_s"] = plugin.cold_compile_s()
    if _compiles_with_inductor(req) and (mountns or uid is not None):
        # inductor's precompiled headers, built once by Zoo (zoo_runner.shared_headers) for this
        # interpreter and torch (an env's own): read-only here.
        # Never under off: a model process of Zoo's own uid could rewrite them for every later one
        t_wait = time.monotonic()
        # a compiler that may hand graphs to inductor waits too: at most the build's ~20 s, once per
        # machine and interpreter, against the header and probes each of its model processes would build
        headers = shared_headers.ensure(
            str(shared_headers_dir()), base_env(), wait=shared_headers.WAIT_S, python=python
        )
        waited = time.monotonic() - t_wait
        if waited >= 0.5:  # the build this process started, waited for (part of the row's duration)
            setup["inductor_headers_waited_s"] = round(waited, 1)
        setup["inductor_headers"] = "its own (no shared build is ready)"
        if headers is not None and mountns:
            inside = work / "cache" / "headers"
            inside.mkdir(mode=0o755)
            ro_binds.append([str(headers), str(inside)])
            env[shared_headers.ENV] = str(inside)
            setup["inductor_headers"] = "shared, read-only"
        elif headers is not None and uid is not None and reachable(str(headers), "headers"):
            env[shared_headers.ENV] = str(headers)
            setup["inductor_headers"] = "shared, read-only (mode bits)"
    if uid is not None and gid is not None:
        _chown_tree(work, uid, gid)  # before staging: hard links share their inode with Zoo's Hub cache
    if req.files_dir:  # Zoo's, readable and not writable by the model
        files = Path(req.files_dir)
        if mountns:  # the repo's directory of the Hub cache (snapshots link into its blobs), read-only
            repo = (
                files.parent.parent
                if files.parent.name == "snapshots" and files.parent.parent.name.startswith("models--")
                else files
            )
            target = work / "hf_home" / "hub" / (repo.name if repo != files else "files")
            target.mkdir(parents=True, mode=0o755)
            ro_binds.append([str(repo), str(target)])
            child_req.files_dir = str(target / files.relative_to(repo)) if repo != files else str(target)
            setup["hf_home"] = "bound read-only"
        else:
            staged = work / "hf_home" / "files"
            n = _stage_files(req.files_dir, staged)
            child_req.files_dir = str(staged)
            setup["hf_home"] = f"staged ({n} files)"

    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limits = settings()
    rlimits = {
        **memory_rlimits(req, int(memory_bytes)),
        "cpu": int(req.timeout_s * max(1, cpus)) + 60,
        "fsize": limits.sandbox_fsize_mb << 20,
        "nproc": limits.sandbox_nproc if limits.sandbox_nproc is not None else max(4096, 64 * cpus),
        "nofile": limits.sandbox_nofile,  # open files: with fsize, bounds what it can hold in files it unlinked
    }
    group = None
    if m != "off" and uid is not None:  # root, the model on its own uid: a cgroup of its own where there is one
        from uuid import uuid4

        from . import cgroups

        group = cgroups.create(f"run-{os.getpid()}-{uuid4().hex[:8]}", int(memory_bytes), rlimits["nproc"])
    setup["cgroup"] = group.describe() if group is not None else "none (rlimits only)"
    plan = Plan(
        mode=m,
        run_dir=str(root),
        work_dir=str(work),
        report_path=str(root / "sandbox-report.json"),
        uid=uid,
        gid=gid,
        env=env,
        binds=binds,
        ro_binds=ro_binds,
        hide=hidden_dirs() if mountns else [],
        keep=kept_dirs(python, getattr(req, "plugins", None), tuple(getattr(plugin, "visible_dirs", ()) or ()))
        if mountns
        else [],
        shm_mb=limits.sandbox_shm_mb,
        rlimits=rlimits,
        requester=os.getpid(),
        groups=device_groups(plugin) if uid is not None else [],
        mask=masked_nodes(plugin) if mountns else [],
        mkdirs=mkdirs,
        cgroup=group.procs_files() if group is not None else [],
    )
    run = Run(
        root=root, work=work, plan=plan, uid=uid, setup=setup, namespace=ns, ref_ns=ref_ns, compile_ns=compile_ns,
        cgroup=group,
    )  # fmt: skip
    run.plan_path.write_text(plan.to_json())
    run.request.write_text(json.dumps(child_req.to_dict()))
    for p in (run.plan_path, run.request):
        os.chmod(p, 0o644)
    return run, child_req


def read_report(run: Run) -> dict[str, Any] | None:
    """What the model process said held, written as root before it ran anything of the model's."""
    from .result_schema import read_json_file

    value, problem = read_json_file(run.report, 64 << 10, owner=os.geteuid())
    if problem or not isinstance(value, dict):
        return None
    return value


def refused(run: Run, rc: int, report: dict[str, Any] | None) -> bool:
    return rc == EXIT_REFUSED and bool(report and report.get("refused"))


def describe(run: Run, report: dict[str, Any] | None) -> dict[str, Any]:
    """``details.sandbox``: what the parent set up, and what the model process says held."""
    out: dict[str, Any] = {"mode": run.plan.mode, **run.setup}
    if report is None:
        out.update(report="missing", missing=list(PROTECTIONS))
        return out
    for key in (
        "uid",
        "gid",
        "groups",
        "uid_switched",
        "capabilities",
        "no_new_privs",
        "netns",
        "mountns",
        "pidns",
        "private_proc",
        "ipcns",
        "userns",
        "loopback",
        "rlimits",
        "keyring",
        "seccomp",
        "cgroup_joined",
        "missing",
        "errors",
    ):
        if key in report:
            out[key] = report[key]
    if run.uid is None and report.get("uid_switched"):  # Zoo never asked for a switch: the report was rewritten
        out.update(report="untrusted", missing=list(PROTECTIONS))
    return out
