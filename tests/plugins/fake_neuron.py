"""A fake ``neuron`` device that behaves, as far as Zoo can tell, like AWS TorchNeuron as AWS documents it.

Imported in the model process through ``ZOO_PLUGINS=tests.plugins.fake_neuron``, it:

- renames PyTorch's PrivateUse1 backend to ``neuron`` and registers a ``torch.neuron`` device
  module (``is_available()``, ``synchronize()``, ``device_count()``...), so ``torch.device("neuron")``
  parses and Zoo's availability check passes;
- puts a fake ``torch_neuronx`` in ``sys.modules`` with TorchNeuron's op tracking,
  ``clear_op_tracking()``, ``get_fallback_ops()``, ``get_executed_ops()`` and ``get_dynamo_metrics()``;
- computes like neuronx-cc: fp32 by default (``--auto-cast`` defaults to ``none`` since Neuron 2.27, AWS
  release-notes/components/compiler); with ``NEURON_CC_FLAGS=--auto-cast=matmult`` (or ``all``) the fp32
  operands of matmul-class ops are rounded to bf16 and accumulate in fp32 (:mod:`tests.plugins.bf16_matmul`);
- starts its "runtime" on first use (``is_available()``, the first allocation), as the Neuron runtime does:
  it refuses to start in a process forked from the one that imported it (Zoo spawns neuron model
  processes); it claims every core of ``NEURON_RT_VISIBLE_CORES`` (default: all of the fake's cores)
  exclusively, so a second process on the same cores fails with the runtime's message (AWS, the runtime's
  configuration guide: "initializes all the cores present in the system and reserves them for the
  current process"); and it makes ``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR`` (``/tmp/local_cache``) and
  ``TORCH_NEURONX_DEBUG_DIR`` (``/tmp/neuron_backend``), failing where it cannot (AWS torch/reference/env-vars);
- compiles each op it runs eagerly, and each graph ``torch.compile(backend="neuron")`` hands it, into a
  NEFF written to ``TORCH_NEURONX_NEFF_CACHE_DIR`` (``/tmp/neff_cache``), and fails where it cannot (AWS
  compiler/about-compiler-artifacts: eager mode compiles every op through this path);
- as the ``neuron`` dynamo backend, rejects ``dynamic=True`` (AWS torch/compile/reference-torch-compile)
  and, with fallback execution off (``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION``, default on, or the
  ``fallback_execution`` option), raises on a graph it cannot compile instead of running it on CPU;
- makes tensors "on neuron" real: a wrapper tensor subclass whose device is ``neuron:0`` and that
  holds a CPU tensor. Every ATen op on it is unwrapped, run on CPU and rewrapped. Ops outside
  the device's kernel set (:mod:`tests.plugins.fake_neuron_ops`) are recorded as fallbacks by
  their ATen name (``aten::cumsum``), the same names Zoo's op census records — and still
  computed on CPU, so results stay right, exactly like TorchNeuron's CPU fallback (AWS
  torch/reference/api/supported-operators: CPU_FALLBACK);
- fails asynchronously where told (``ZOO_FAKE_NEURON_ASYNC_BROKEN``: ATen names): the op runs, and its
  error is raised by the next ``synchronize()``, as a device's execution error is; and fails to compile a
  graph holding an op of ``ZOO_FAKE_NEURON_UNCOMPILABLE`` (eager mode still runs it).

The fake's hardware is a directory, ``ZOO_FAKE_NEURON_DEVICE_DIR`` (passed through ``ZOO_SANDBOX_ENV``
and shown through ``ZOO_SANDBOX_KEEP``): one file per core (``core<N>``; ``ZOO_FAKE_NEURON_CORES`` of them,
8 by default) that the runtime locks. Without it no core is claimed.

Moving to the device needs nothing from Zoo: ``tensor.to("neuron")`` and ``module.to(device=
"neuron")`` allocate through the PrivateUse1 ``empty`` / ``empty_strided`` kernels registered
here (which return the wrapper), then ``copy_`` into it; ``.to("cpu")`` unwraps. Factory ops
given ``device="neuron"`` (``torch.arange(n, device=x.device)``, ``torch.full``...) get
PrivateUse1 kernels too, so the device sees them under their own names.
"""

from __future__ import annotations

import os
import sys
import types

import torch
from torch.utils._pytree import tree_map

from tests.plugins.bf16_matmul import round_operands
from tests.plugins.fake_neuron_ops import supported_ops

DEVICE_TYPE = "neuron"


def _auto_cast() -> bool:
    """neuronx-cc casts fp32 matmuls to bf16 only when NEURON_CC_FLAGS asks: ``--auto-cast`` defaults to
    ``none`` since Neuron 2.27 (AWS release-notes/components/compiler); ``matmult`` and ``all`` cast."""
    flags = os.environ.get("NEURON_CC_FLAGS", "").replace("=", " ").split()
    values = [value for flag, value in zip(flags, flags[1:]) if flag == "--auto-cast"]
    return bool(values) and values[-1] in ("matmult", "all")


_AUTO_CAST = _auto_cast()
_CPU = torch.device("cpu")
BROKEN: set[str] = set()  # ATen ops whose kernel raises on this device (tests.plugins.broken_neuron)
MISSHAPEN: set[str] = set()  # ATen ops whose output loses its last element on this device (the same)
ASYNC_BROKEN = {op.strip() for op in os.environ.get("ZOO_FAKE_NEURON_ASYNC_BROKEN", "").split(",") if op.strip()}
_PENDING: list[str] = []  # asynchronous errors, raised by the next synchronize()
# ATen ops neuronx-cc cannot lower in a graph (torch.compile(backend="neuron")); eager mode runs them
UNCOMPILABLE = {op.strip() for op in os.environ.get("ZOO_FAKE_NEURON_UNCOMPILABLE", "").split(",") if op.strip()}

# -- the runtime: started on first use, as the Neuron runtime is ------------------------------------
_IMPORTED_BY = os.getpid()
_RUNTIME: dict[str, object] = {}
_CORE_FDS: list[int] = []


def _env_dir(var: str, default: str) -> str:
    return os.environ.get(var) or default


def _visible_cores(count: int) -> list[int]:
    text = os.environ.get("NEURON_RT_VISIBLE_CORES", "").strip()
    if not text:
        return list(range(count))  # "initializes all the cores present in the system"
    cores: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cores += list(range(int(lo), int(hi or lo) + 1))
    return cores


def start_runtime() -> None:
    """Start the fake Neuron runtime in this process, once (see the module docstring)."""
    if _RUNTIME:
        return
    import fcntl

    if os.getpid() != _IMPORTED_BY:
        raise RuntimeError(
            "NRT: the Neuron runtime cannot start in a forked child process (torch_neuronx was imported by "
            f"process {_IMPORTED_BY}); start the process fresh (spawn)"
        )
    for var, default in (
        ("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "/tmp/local_cache"),
        ("TORCH_NEURONX_DEBUG_DIR", "/tmp/neuron_backend"),
    ):
        path = _env_dir(var, default)
        try:
            os.makedirs(path, exist_ok=True)
            probe = os.path.join(path, f".probe-{os.getpid()}")
            open(probe, "w").close()
            os.unlink(probe)
        except OSError as exc:
            raise RuntimeError(f"torch_neuronx: {var} {path} is not writable: {exc}") from exc
    device_dir = os.environ.get("ZOO_FAKE_NEURON_DEVICE_DIR", "")
    cores = _visible_cores(int(os.environ.get("ZOO_FAKE_NEURON_CORES", "8")))
    if device_dir:
        for core in cores:
            fd = os.open(os.path.join(device_dir, f"core{core}"), os.O_RDONLY | os.O_CLOEXEC)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise RuntimeError(
                    f"ERROR NRT:nrt_allocate_neuron_cores NeuronCore(s) not available - Requested:nc{core}-nc{core}"
                ) from None
            _CORE_FDS.append(fd)
    _RUNTIME.update(cores=cores, pid=os.getpid())
    _register_backend()  # torch.compile(backend="neuron"), once the runtime is up (dynamo costs a second to import)


_NEFFS: set[str] = set()


def _compile_neff(key: str) -> None:
    """Write the NEFF of ``key`` (an op, a graph) into the NEFF cache, once per process."""
    if key in _NEFFS:
        return
    import hashlib

    path = _env_dir("TORCH_NEURONX_NEFF_CACHE_DIR", "/tmp/neff_cache")
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    try:
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, f"{name}.neff"), "wb") as f:
            f.write(b"NEFF" + key.encode()[:200])
    except OSError as exc:
        raise RuntimeError(
            f"torch_neuronx: cannot write the NEFF cache TORCH_NEURONX_NEFF_CACHE_DIR={path}: {exc}"
        ) from exc
    _NEFFS.add(key)


# -- op tracking (torch_neuronx.clear_op_tracking / get_fallback_ops / get_executed_ops) ----------------
_SUPPORTED = supported_ops()
_FALLBACKS: dict[str, int] = {}  # op name -> calls that fell back since clear_op_tracking()
_EXECUTED: dict[str, int] = {}  # op name -> calls the device ran since clear_op_tracking()
_DYNAMO: dict[str, float] = {"graphs_compiled": 0, "compile_time_s": 0.0}


def _record(name: str) -> None:
    if _SUPPORTED is not None and name not in _SUPPORTED:
        _FALLBACKS[name] = _FALLBACKS.get(name, 0) + 1
    else:
        _EXECUTED[name] = _EXECUTED.get(name, 0) + 1
        _compile_neff(name)  # eager mode compiles every op it runs on the device


def clear_op_tracking() -> None:
    _FALLBACKS.clear()
    _EXECUTED.clear()


def get_fallback_ops() -> list[str]:
    """ATen names of the ops that ran on CPU since the last ``clear_op_tracking()``."""
    return sorted(_FALLBACKS)


def get_executed_ops() -> list[str]:
    """ATen names of the ops the device ran since the last ``clear_op_tracking()``."""
    return sorted(_EXECUTED)


def get_dynamo_metrics() -> dict[str, float]:
    return dict(_DYNAMO)


# -- tensors on the device ----------------------------------------------------------------------
def _device() -> torch.device:  # built lazily: "neuron" parses only once PrivateUse1 is renamed
    return torch.device(DEVICE_TYPE, 0)


class NeuronTensor(torch.Tensor):
    """A tensor on ``neuron:0`` whose storage is a CPU tensor (``_elem``)."""

    _elem: torch.Tensor
    __slots__ = ("_elem",)

    @staticmethod
    def __new__(cls, elem: torch.Tensor) -> NeuronTensor:
        assert type(elem) is torch.Tensor and elem.device.type == "cpu", (type(elem), elem.device)
        r = torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            layout=elem.layout,
            device=_device(),
            requires_grad=elem.requires_grad,
        )
        r._elem = elem
        return r

    __torch_function__ = torch._C._disabled_torch_function_impl

    def __repr__(self) -> str:  # the CPU values, labelled with the device
        return f"{self._elem!r} (on {self.device})"

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        _record(func._schema.name)
        if func._schema.name in BROKEN:
            raise RuntimeError(f"neuron: the device kernel of {func._schema.name} failed")
        if func._schema.name in ASYNC_BROKEN:
            _PENDING.append(f"neuron: the device kernel of {func._schema.name} failed (NRT execution error)")
        originals: dict[int, torch.Tensor] = {}

        def unwrap(x):
            if isinstance(x, NeuronTensor):
                originals[id(x._elem)] = x
                return x._elem
            if isinstance(x, torch.Tensor):
                originals[id(x)] = x
                return x
            if isinstance(x, torch.device) and x.type == DEVICE_TYPE:
                return _CPU
            return x

        to_cpu = (
            func is torch.ops.aten._to_copy.default
            and kwargs.get("device") is not None
            and torch.device(kwargs["device"]).type == "cpu"
        )
        cpu_args = tree_map(unwrap, args)
        if _AUTO_CAST:  # on the CPU tensors: the rounding itself is the device's, not an op it runs
            cpu_args = round_operands(func, cpu_args)
        out = func(*cpu_args, **tree_map(unwrap, kwargs))
        if func._schema.name in MISSHAPEN:
            out = out[..., :-1]
        if to_cpu:  # .to("cpu"): leave the device
            return out

        def rewrap(x):
            if isinstance(x, torch.Tensor):
                if id(x) in originals:  # in-place and out= ops return their argument
                    return originals[id(x)]
                return NeuronTensor(x)
            return x

        return tree_map(rewrap, out)


def _inner(x):
    return x._elem if isinstance(x, NeuronTensor) else x


# -- PrivateUse1 kernels: allocation, copies across the boundary, factories ----------------------
_lib = torch.library.Library("aten", "IMPL")


def _empty_memory_format(size, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    start_runtime()
    return NeuronTensor(torch.empty(size, dtype=dtype, layout=layout, device=_CPU, memory_format=memory_format))


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
    start_runtime()
    return NeuronTensor(torch.empty_strided(size, stride, dtype=dtype, layout=layout, device=_CPU))


def _copy_from(self, dst, non_blocking=False):
    # reached with the Python key excluded (e.g. torch.tensor(..., device="neuron")): copy raw
    _inner(dst).copy_(_inner(self))
    return dst


def _copy_from_and_resize(self, dst):
    d = _inner(dst)
    d.resize_(self.shape)
    d.copy_(_inner(self))
    return dst


def _factory(op):
    name = op._schema.name

    def kernel(*args, **kwargs):
        _record(name)
        kwargs["device"] = _CPU
        return NeuronTensor(op(*args, **kwargs))

    return kernel


_lib.impl("empty.memory_format", _empty_memory_format, "PrivateUse1")
_lib.impl("empty_strided", _empty_strided, "PrivateUse1")
_lib.impl("_copy_from", _copy_from, "PrivateUse1")
_lib.impl("_copy_from_and_resize", _copy_from_and_resize, "PrivateUse1")
for _op in (
    "arange",
    "arange.start",
    "arange.start_step",
    "zeros",
    "ones",
    "full",
    "scalar_tensor",
    "rand",
    "randn",
    "linspace",
    "eye",
):
    _packet, _, _overload = _op.partition(".")
    _lib.impl(_op, _factory(getattr(getattr(torch.ops.aten, _packet), _overload or "default")), "PrivateUse1")


# -- the device module (torch.neuron) -----------------------------------------------------------
class _NeuronModule(types.ModuleType):
    @staticmethod
    def is_available() -> bool:
        start_runtime()
        return True

    @staticmethod
    def is_initialized() -> bool:
        return True

    @staticmethod
    def device_count() -> int:
        return 1

    @staticmethod
    def current_device() -> int:
        return 0

    @staticmethod
    def set_device(device) -> None:
        pass

    @staticmethod
    def synchronize(device=None) -> None:
        if _PENDING:
            message = _PENDING[0]
            _PENDING.clear()
            raise RuntimeError(message)

    @staticmethod
    def _is_in_bad_fork() -> bool:
        return False

    @staticmethod
    def manual_seed(seed: int) -> None:
        pass

    @staticmethod
    def manual_seed_all(seed: int) -> None:
        pass

    @staticmethod
    def get_rng_state(device=None) -> torch.Tensor:
        return torch.empty(0, dtype=torch.uint8)

    @staticmethod
    def set_rng_state(state, device=None) -> None:
        pass


def _register() -> None:
    if torch._C._get_privateuse1_backend_name() == DEVICE_TYPE:
        return  # imported twice (another name for this module): already set up
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(rename=DEVICE_TYPE, backend_module=_NeuronModule("torch.neuron"))


_register()

# -- the fake torch_neuronx package ----------------------------------------------------------
torch_neuronx = types.ModuleType("torch_neuronx")
torch_neuronx.__version__ = "0.0.0+zoo.fake"
torch_neuronx.__doc__ = "Fake TorchNeuron for Zoo's tests (tests/plugins/fake_neuron.py)."
torch_neuronx.clear_op_tracking = clear_op_tracking
torch_neuronx.get_fallback_ops = get_fallback_ops
torch_neuronx.get_executed_ops = get_executed_ops
torch_neuronx.get_dynamo_metrics = get_dynamo_metrics


# -- torch.compile(backend="neuron") ----------------------------------------------------------------
def _dynamic(gm) -> bool:
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            continue
        value = node.meta.get("example_value")
        if isinstance(value, torch.SymInt) or (
            isinstance(value, torch.Tensor) and any(isinstance(d, torch.SymInt) for d in value.shape)
        ):
            return True
    return False


def neuron_backend(gm, example_inputs, options=None, **_kwargs):
    """The fake's dynamo backend: a NEFF per graph; dynamic shapes rejected; fallback execution off by
    default (``TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION``, 1 by default; the ``fallback_execution``
    option overrides it, AWS torch/reference/env-vars)."""
    import time

    start_runtime()
    if _dynamic(gm):
        raise RuntimeError("torch_neuronx: dynamic=True is not supported by the neuron backend; use dynamic=False")
    options = options or {}
    fallback = os.environ.get("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "1") not in ("1", "true", "True")
    fallback = bool(options.get("fallback_execution", fallback))
    t0 = time.perf_counter()
    targets = {getattr(n.target, "_schema", None) and n.target._schema.name for n in gm.graph.nodes}
    broken = sorted(t for t in targets if t in UNCOMPILABLE)
    if broken and not fallback:
        raise RuntimeError(f"neuronx-cc: compilation failed: no lowering for {broken[0]}")
    _compile_neff(gm.code)
    _DYNAMO["graphs_compiled"] += 1
    _DYNAMO["compile_time_s"] += time.perf_counter() - t0
    return gm.forward


def _register_backend() -> None:
    from torch._dynamo import list_backends, register_backend

    if "neuron" not in list_backends(exclude_tags=()):
        register_backend(neuron_backend, name="neuron")


torch_neuronx.NeuronTensor = NeuronTensor
sys.modules.setdefault("torch_neuronx", torch_neuronx)
