"""A fake ``neuron`` device that behaves, as far as Zoo can tell, like AWS TorchNeuron.

Imported in the model process through ``ZOO_PLUGINS=tests.plugins.fake_neuron``, it:

- renames PyTorch's PrivateUse1 backend to ``neuron`` and registers a ``torch.neuron`` device
  module (``is_available()`` is True, ``synchronize()``, ``device_count()``...), so
  ``torch.device("neuron")`` parses and Zoo's availability check passes;
- puts a fake ``torch_neuronx`` in ``sys.modules`` with TorchNeuron's documented op tracking,
  ``clear_op_tracking()`` and ``get_fallback_ops()``, which is all Zoo reads;
- computes like TorchNeuron's compiler by default: the fp32 operands of matmul-class ops are
  rounded to bf16 and accumulate in fp32 (``--auto-cast=matmult``), unless ``NEURON_CC_FLAGS``
  says ``--auto-cast=none``, when everything stays fp32 (:mod:`tests.plugins.bf16_matmul`);
- makes tensors "on neuron" real: a wrapper tensor subclass whose device is ``neuron:0`` and that
  holds a CPU tensor. Every ATen op on it is unwrapped, run on CPU and rewrapped. Ops outside
  the device's kernel set (:mod:`tests.plugins.fake_neuron_ops`) are recorded as fallbacks by
  their ATen name (``aten::cumsum``), the same names Zoo's op census records — and still
  computed on CPU, so results stay right, exactly like TorchNeuron's CPU fallback.

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
    """TorchNeuron's compiler auto-casts fp32 matmuls to bf16 unless NEURON_CC_FLAGS says ``--auto-cast=none``."""
    flags = os.environ.get("NEURON_CC_FLAGS", "").replace("=", " ").split()
    return not any(flag == "--auto-cast" and value == "none" for flag, value in zip(flags, flags[1:]))


_AUTO_CAST = _auto_cast()
_CPU = torch.device("cpu")
BROKEN: set[str] = set()  # ATen ops whose kernel raises on this device (tests.plugins.broken_neuron)
MISSHAPEN: set[str] = set()  # ATen ops whose output loses its last element on this device (the same)

# -- op tracking (torch_neuronx.clear_op_tracking / get_fallback_ops) ---------------------------
_SUPPORTED = supported_ops()
_FALLBACKS: dict[str, int] = {}  # op name -> calls that fell back since clear_op_tracking()


def _record(name: str) -> None:
    if _SUPPORTED is not None and name not in _SUPPORTED:
        _FALLBACKS[name] = _FALLBACKS.get(name, 0) + 1


def clear_op_tracking() -> None:
    _FALLBACKS.clear()


def get_fallback_ops() -> list[str]:
    """ATen names of the ops that ran on CPU since the last ``clear_op_tracking()``."""
    return sorted(_FALLBACKS)


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
    return NeuronTensor(torch.empty(size, dtype=dtype, layout=layout, device=_CPU, memory_format=memory_format))


def _empty_strided(size, stride, dtype=None, layout=None, device=None, pin_memory=None):
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
        pass

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
torch_neuronx.NeuronTensor = NeuronTensor
sys.modules.setdefault("torch_neuronx", torch_neuronx)
