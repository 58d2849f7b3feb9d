"""``neuron`` and ``neuron+neuron``: AWS TorchNeuron (torch-neuronx 2.13.3.x / 2.14.3.x, Neuron 2.33 /
2.34, extra ``neuron``), built from AWS's documentation, page by page (awsdocs-neuron, cited below
as ``AWS <page>``; docs/SPEC.md, "TorchNeuron as AWS documents it", has the full addresses).

- **Precision.** Since Neuron 2.27 neuronx-cc's ``--auto-cast`` defaults to ``none`` (it was
  ``matmult``), with mixed-precision accumulation on (AWS release-notes/components/compiler;
  compiler/neuronx-cc/api-reference-guide/neuron-compiler-cli-reference-guide). So neuron declares
  fp32 unless ``NEURON_CC_FLAGS`` asks for ``--auto-cast=matmult`` or ``all``; then
  ``--auto-cast-type`` (bf16 by default) is the precision. The row's ``details.device_setup`` says
  which flags and which neuronx-cc the parent saw.
- **Compile caches.** torch-neuronx writes NEFFs to ``TORCH_NEURONX_NEFF_CACHE_DIR`` (default
  ``/tmp/neff_cache``), a local copy to ``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR`` (``/tmp/local_cache``)
  and debug output to ``TORCH_NEURONX_DEBUG_DIR`` (``/tmp/neuron_backend``); eager mode compiles
  every op through this path (AWS torch/reference/env-vars; compiler/about-compiler-artifacts). A
  model process sees no host ``/tmp``: the NEFF cache is ``neuronx/`` in its writer's namespace of
  the compile cache (:mod:`zoo_runner.cache_trust`, as inductor's), the other two are its run's own.
  The parent's own values never reach a model process.
- **Cores.** The Neuron runtime takes every NeuronCore for the first process that starts it unless
  ``NEURON_RT_VISIBLE_CORES`` names which (AWS the runtime's configuration guide). Each neuron model
  process gets a core set claimed host-wide (:mod:`zoo_runner.device_claims`): ``ZOO_NEURON_CORES``
  (else the parent's ``NEURON_RT_VISIBLE_CORES``, else every logical core of the ``/dev/neuron*``
  devices: on Trn2 each device is 8 physical cores, 4 logical ones at the default LNC=2) cut into
  sets of ``ZOO_NEURON_CORES_PER_PROCESS``. The parent never starts the runtime: it checks that the
  package is installed, not ``torch.neuron.is_available()``.
- **Processes.** The runtime does not start in a forked child (AWS torch/troubleshooting): neuron
  model processes are spawned, and torch-neuronx reads its variables at import, after the sandbox
  has set them.
- **Device access.** ``/dev/neuron*`` are ``root:neuron 0660`` on AWS's images, and a process with
  access to them has unrestricted access to the instance's physical memory (AWS
  about-neuron/security). A neuron model process gets the devices' group and nothing else; other
  model processes see ``/dev/null`` where the devices were. Custom code does not run on neuron
  unless ``ZOO_NEURON_CUSTOM_CODE=1``.
- **torch.compile.** ``dynamic=True`` is rejected (AWS torch/compile/reference-torch-compile):
  Zoo compiles with ``dynamic=False``, and each new input shape compiles anew. Fallback execution
  (a whole graph run on CPU when it fails to compile) is pinned off, by
  ``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=1`` and the ``fallback_execution`` option: such a graph
  is a ``compile_error``; op-level CPU fallback still gives ``pass_with_fallback``
  (torch/reference/api/supported-operators). Errors surface at ``synchronize()``, which the engine
  calls inside each input's try. A cold first compile may take minutes: a ``neuron+neuron`` model
  whose NEFF cache is empty gets ``ZOO_NEURON_COLD_COMPILE_S`` more, and its row says so.
- **What TorchNeuron reports.** ``get_fallback_ops()`` (the ``fallback_ops``),
  ``get_executed_ops()`` beside it (``details.backend_share``), ``get_dynamo_metrics()`` (compiled
  graphs and compile time, ``details.fallback_report``) after ``clear_op_tracking()``; peak device
  memory from ``torch.neuron.max_memory_allocated()``.
"""

from __future__ import annotations

import glob
import importlib
import importlib.util
import os
import shlex
import sys
from typing import Any

from ..backends import BackendSpec, CompilerPlugin, DevicePlugin, FallbackTracker, register_compiler, register_device

CC_FLAGS = "NEURON_CC_FLAGS"
CORES_VAR = "NEURON_RT_VISIBLE_CORES"
DISABLE_FALLBACK = "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"
# variables only a neuron model process receives (its runtime's, its compiler's, torch-neuronx's)
ENV_PREFIXES = ("NEURON_", "TORCH_NEURONX_")
# the NEFF cache: in the writer's namespace of the compile cache (warm reruns of the same model)
CACHE_DIRS = {"TORCH_NEURONX_NEFF_CACHE_DIR": "neuronx", "NEURON_COMPILE_CACHE_URL": "neuron"}  # the latter: XLA-era
# the run's own: a local copy of NEFFs and the backend's debug output
RUN_DIRS = {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": "neuronx-local", "TORCH_NEURONX_DEBUG_DIR": "neuronx-debug"}
DEVICE_NODES = "/dev/neuron[0-9]*"
# AWS's apt packages install the Neuron tools and runtime under /opt/aws/neuron ("export
# PATH=/opt/aws/neuron/bin:$PATH" after installing aws-neuronx-tools, awsdocs-neuron setup guides, e.g.
# frameworks/tensorflow/tensorflow-setup): shown read-only to a neuron model process, though the sandbox
# hides /opt.
VISIBLE_DIRS = ("/opt/aws/neuron",)
INSTALL_HINT = (
    "bash scripts/setup.sh neuron (torch-neuronx 2.14.*, neuronx-cc 2.*, nki from AWS's index "
    "https://pip.repos.neuron.amazonaws.com)"
)


def cc_flags() -> list[str]:
    """``NEURON_CC_FLAGS`` as neuronx-cc reads them (shell words; a bad quote: split on spaces)."""
    raw = os.environ.get(CC_FLAGS, "")
    try:
        return shlex.split(raw)
    except ValueError:
        return raw.split()


def flag_value(flags: list[str], name: str) -> str | None:
    """The last value given to ``name`` in ``flags`` (``--name=value`` or ``--name value``)."""
    found = None
    for i, word in enumerate(flags):
        if word == name and i + 1 < len(flags):
            found = flags[i + 1]
        elif word.startswith(name + "="):
            found = word[len(name) + 1 :]
    return found


def auto_cast(flags: list[str] | None = None) -> tuple[str, str]:
    """(``--auto-cast``, ``--auto-cast-type``) in effect: ``none`` by default since Neuron 2.27 (AWS
    release-notes/components/compiler), the type ``bf16`` by default."""
    flags = cc_flags() if flags is None else flags
    cast = (flag_value(flags, "--auto-cast") or "none").lower()
    return cast, (flag_value(flags, "--auto-cast-type") or "bf16").lower()


def neuron_precision(spec: BackendSpec) -> str:
    """fp32 unless ``NEURON_CC_FLAGS`` asks for ``--auto-cast=matmult`` or ``all``: then the cast's type
    (``--auto-cast-type``: bf16, fp16, tf32; a type Zoo has no budget for, fp8_e4m3 say, is judged at
    bf16, the narrowest budget Zoo has)."""
    cast, cast_type = auto_cast()
    if cast not in ("matmult", "all"):
        return "fp32"
    return cast_type if cast_type in ("bf16", "fp16", "tf32") else "bf16"


def installed() -> tuple[bool, str]:
    """Whether torch-neuronx can be imported here, asked without importing it (which would start the
    Neuron runtime in the asking process: never the parent's)."""
    if "torch_neuronx" in sys.modules:  # a plugin put one there (tests/plugins/fake_neuron.py)
        return True, ""
    try:
        found = importlib.util.find_spec("torch_neuronx") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return True, ""
    return False, f"backend neuron is not available here: torch-neuronx is not installed; {INSTALL_HINT}"


def device_nodes() -> list[str]:
    return sorted(glob.glob(DEVICE_NODES))


def core_pool() -> list[int]:
    """The NeuronCores Zoo's neuron model processes share out on this host (see the module's docstring)."""
    from ..device_claims import parse_cores
    from ..settings import settings

    s = settings()
    configured = s.neuron_cores.strip() or os.environ.get(CORES_VAR, "").strip()
    if configured:
        return parse_cores(configured)
    nodes = device_nodes()
    if nodes:
        return list(range(len(nodes) * s.neuron_cores_per_device))
    return [0]


def core_sets() -> list[str]:
    """The pool cut into sets of ``ZOO_NEURON_CORES_PER_PROCESS``, each contiguous (the runtime takes
    only a contiguous ``NEURON_RT_VISIBLE_CORES``: AWS nrt-developer-guide), as its values; a remainder
    smaller than a set is left out: a model process gets the cores it was promised or none."""
    from ..device_claims import format_cores
    from ..settings import settings

    pool, per = core_pool(), settings().neuron_cores_per_process
    runs: list[list[int]] = []
    for core in pool:  # runs of consecutive cores
        if runs and core == runs[-1][-1] + 1:
            runs[-1].append(core)
        else:
            runs.append([core])
    return [format_cores(run[i : i + per]) for run in runs for i in range(0, len(run) - per + 1, per)]


def neuronx_cc_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("neuronx-cc")
    except PackageNotFoundError:
        return None


def setup_details(spec: BackendSpec) -> dict[str, Any]:
    """What the parent set up for a neuron model process (``details.device_setup``): the compiler's
    flags and version, the precision they make, fallback execution pinned off, dynamic shapes off."""
    cast, cast_type = auto_cast()
    return {
        "neuronx_cc": neuronx_cc_version(),
        "cc_flags": os.environ.get(CC_FLAGS, ""),
        "auto_cast": cast,
        "auto_cast_type": cast_type if cast in ("matmult", "all") else None,
        "fallback_execution": False,
        "dynamic": False if spec.compiler == "neuron" else None,
    }


def custom_code_refusal() -> str | None:
    from ..settings import settings

    if settings().neuron_custom_code:
        return None
    return (
        "custom code does not run on neuron: a process with access to the Neuron devices has unrestricted "
        "access to the instance's physical memory (AWS about-neuron/security); ZOO_NEURON_CUSTOM_CODE=1 allows it"
    )


SUPPORTED_TORCH_NEURONX = ("2.13.3.", "2.14.3.")  # AWS release-notes/components/torchneuron, Neuron 2.33 / 2.34


def _dist(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def preconditions() -> list[dict[str, Any]]:
    """What a first neuron run on this machine needs, each checked without starting the Neuron runtime:
    [{check, ok, detail, fix}], for ``zoo doctor --backend neuron``."""
    from ..settings import settings

    out: list[dict[str, Any]] = []

    def check(name: str, ok: bool, detail: str, fix: str = "") -> None:
        out.append({"check": name, "ok": bool(ok), "detail": detail, "fix": "" if ok else fix})

    tnx, torch_v = _dist("torch-neuronx"), _dist("torch")
    check(
        "torch-neuronx",
        bool(tnx and tnx.startswith(SUPPORTED_TORCH_NEURONX)),
        f"torch-neuronx {tnx}" if tnx else "torch-neuronx is not installed",
        INSTALL_HINT
        if not tnx
        else f"torch-neuronx {tnx} is not TorchNeuron 2.13.3.x / 2.14.3.x (the XLA-based package of the same "
        f"name ended at 2.31): {INSTALL_HINT}",
    )
    if tnx:
        want = ".".join(tnx.split(".")[:2])
        check(
            "torch for torch-neuronx",
            bool(torch_v and torch_v.startswith(want + ".")),
            f"torch {torch_v}, torch-neuronx {tnx} needs torch {want}",
            f"install the torch torch-neuronx {tnx} requires: {INSTALL_HINT}",
        )
    cc = _dist("neuronx-cc")
    check(
        "neuronx-cc",
        bool(cc and cc.startswith("2.")),
        f"neuronx-cc {cc}" if cc else "neuronx-cc is not installed",
        INSTALL_HINT,
    )
    nki = _dist("nki")
    check("nki", nki is not None, f"nki {nki}" if nki else "nki is not installed", INSTALL_HINT)
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    check(
        "python",
        sys.version_info >= (3, 12),
        f"Python {py} (TorchNeuron's wheels: 3.12, 3.13, 3.14)",
        "run Zoo's neuron worker on Python 3.12+ (the neuron image: docker compose --profile neuron build)",
    )
    nodes = device_nodes()
    check(
        "device nodes",
        bool(nodes),
        f"{len(nodes)} /dev/neuron* ({', '.join(nodes[:4])}{', ...' if len(nodes) > 4 else ''})"
        if nodes
        else "no /dev/neuron* on this machine",
        "run on a Trainium or Inferentia instance with the Neuron driver (aws-neuronx-dkms) installed",
    )
    if nodes:
        import stat as stat_

        bad = []
        for node in nodes:
            st = os.stat(node)
            if st.st_gid == 0 or not st.st_mode & stat_.S_IRGRP or not st.st_mode & stat_.S_IWGRP:
                bad.append(f"{node} {st.st_uid}:{st.st_gid} {stat_.filemode(st.st_mode)}")
        uid_ok = os.geteuid() == 0
        check(
            "device access for the sandbox uid",
            not bad and uid_ok,
            "every node is group read-write, the model process gets that group"
            if not bad and uid_ok
            else "; ".join(bad) or f"Zoo runs as uid {os.geteuid()}: it cannot give the sandbox uid the device group",
            'a udev rule KERNEL=="neuron*", GROUP="neuron", MODE="0660" (AWS about-neuron/security), and Zoo as root',
        )
    configured = settings().neuron_cores.strip() or os.environ.get(CORES_VAR, "").strip()
    try:
        sets = core_sets()
        pool = core_pool()
        source = (
            "ZOO_NEURON_CORES"
            if settings().neuron_cores.strip()
            else CORES_VAR
            if configured
            else f"{len(nodes)} devices x ZOO_NEURON_CORES_PER_DEVICE={settings().neuron_cores_per_device}"
            if nodes
            else "nothing (core 0 assumed)"
        )
        check(
            "visible cores",
            bool(sets) and (bool(nodes) or bool(configured)),
            f"{len(pool)} NeuronCores from {source}, {len(sets)} sets of {settings().neuron_cores_per_process}: "
            f"--jobs defaults to {max(1, len(sets))}",
            "set ZOO_NEURON_CORES (e.g. 0-63 on a trn2.48xlarge at LNC=2) or run where /dev/neuron* exist",
        )
    except Exception as exc:
        check("visible cores", False, str(exc), "fix ZOO_NEURON_CORES, e.g. 0-31")
    from ..device_claims import lock_dir
    from ..sandbox import compile_cache_dir, sandbox_ids

    for name, path, var in (
        ("compile cache", compile_cache_dir(sandbox_ids()[0]), "ZOO_COMPILE_CACHE"),
        ("core locks", str(lock_dir()), "ZOO_DEVICE_LOCK_DIR"),
    ):
        probe = path
        while probe and not os.path.exists(probe):
            probe = os.path.dirname(probe)
        check(
            f"{name} directory",
            bool(probe) and os.access(probe, os.W_OK),
            f"{path}" + ("" if probe == path else f" (to be made under {probe})"),
            f"make {path} writable for Zoo's user, or point {var} elsewhere",
        )
    cast, cast_type = auto_cast()
    flags_ok = cast in ("none", "matmult", "all") and cast_type in ("bf16", "fp16", "tf32", "fp8_e4m3")
    check(
        "compiler flags",
        flags_ok,
        f"NEURON_CC_FLAGS={os.environ.get(CC_FLAGS, '')!r}: --auto-cast {cast}"
        + (f" --auto-cast-type {cast_type}" if cast != "none" else "")
        + f", judged at {neuron_precision(BackendSpec('neuron'))}",
        "--auto-cast takes none, matmult or all; --auto-cast-type bf16, fp16, tf32 or fp8_e4m3",
    )
    return out


class NeuronFallbackTracker(FallbackTracker):
    """TorchNeuron's documented op tracking: ``clear_op_tracking()``, then ``get_fallback_ops()`` and
    ``get_executed_ops()``, and ``get_dynamo_metrics()`` where this torch-neuronx has them."""

    def __init__(self) -> None:
        self._mod = importlib.import_module("torch_neuronx")

    def clear(self) -> None:
        self._mod.clear_op_tracking()

    @staticmethod
    def _names(ops: Any) -> list[str]:
        if isinstance(ops, dict):
            ops = list(ops)
        names = []
        for op in ops or []:
            name = op if isinstance(op, str) else getattr(op, "name", None) or str(op)
            names.append(str(name))
        return sorted(set(names))

    def collect(self) -> list[str]:
        return self._names(self._mod.get_fallback_ops())

    def backend_share(self) -> float | None:
        get = getattr(self._mod, "get_executed_ops", None)
        if get is None:
            return None
        executed = set(self._names(get()))
        fell_back = set(self.collect())
        ops = executed | fell_back
        return round(len(executed - fell_back) / len(ops), 4) if ops else None

    def report(self) -> dict:
        get = getattr(self._mod, "get_dynamo_metrics", None)
        metrics = get() if get is not None else None
        if not isinstance(metrics, dict):
            return {}
        keep = {k: v for k, v in metrics.items() if isinstance(k, str) and isinstance(v, (int, float))}
        return {"dynamo_metrics": dict(sorted(keep.items())[:16])} if keep else {}


def cold_compile_s() -> float:
    from ..settings import settings

    return settings().neuron_cold_compile_s


def compile_options(spec: BackendSpec) -> dict:
    """Fallback execution off: a graph that does not compile is a compile_error, never silently CPU's."""
    return {"fallback_execution": False}


register_device(
    DevicePlugin(
        "neuron",
        package="torch_neuronx",
        package_dist="torch-neuronx",
        fallback_tracker=NeuronFallbackTracker,
        precision=neuron_precision,
        install_hint=INSTALL_HINT,
        fork_safe=False,
        env_prefixes=ENV_PREFIXES,
        model_env={DISABLE_FALLBACK: "1"},
        cache_dirs=CACHE_DIRS,
        run_dirs=RUN_DIRS,
        device_nodes=DEVICE_NODES,
        visible_dirs=VISIBLE_DIRS,
        cores_var=CORES_VAR,
        core_sets=core_sets,
        parent_check=installed,
        custom_code_refusal=custom_code_refusal,
        setup_details=setup_details,
        cold_compile_s=cold_compile_s,
        preconditions=preconditions,
    )
)
register_compiler(
    CompilerPlugin(
        "neuron",
        package_dist="neuronx-cc",
        precision=neuron_precision,
        packages=("torch_neuronx",),
        extra="neuron",
        compile_options=compile_options,
        fallback_tracker=NeuronFallbackTracker,
        dynamic=False,
    )
)
