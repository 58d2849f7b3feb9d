"""``xla`` and ``xla+openxla``: PyTorch/XLA (``torch_xla``, extra ``xla``, a venv of its own).

torch-xla 2.9.0 requires torch==2.9.0, so it is installed apart from Zoo's main venv:
``ZOO_VENV=.venv-xla bash scripts/setup.sh xla``. Where it is missing, both backends fail in one
line with that command.

- **Device.** ``xla`` is PyTorch/XLA's lazy tensor device: ops are traced into a graph that XLA
  compiles and runs when a result is needed (``.to("cpu")``) or at ``torch_xla.sync()``. torch_xla
  gives torch no ``torch.xla`` module, so this plugin registers a small one: ``is_available()``
  (the PJRT client has a device) and ``synchronize()`` (``torch_xla.sync(wait=True)``: runs the
  pending graph and waits for it), which Zoo calls after each run it times.
- **Which PJRT device.** torch_xla picks TPU where libtpu and a TPU are present, Neuron where
  libneuronxla is, else CPU (with a warning). Importing this module sets ``PJRT_DEVICE=CPU`` when
  ``PJRT_DEVICE`` is unset and neither libtpu nor libneuronxla is installed, so the model process
  (which inherits ``PJRT_*``) uses XLA's CPU client without a word. Set ``PJRT_DEVICE`` (``TPU``,
  ``CUDA``, ``CPU``) to choose.
- **Precision.** XLA's CPU client computes fp32 as fp32. ``XLA_USE_BF16=1`` or
  ``XLA_DOWNCAST_BF16=1`` make torch_xla store fp32 tensors as bf16: bf16. On a TPU, fp32 matmuls
  and convolutions run at ``torch_xla.backends.get_mat_mul_precision()``: ``default`` one bf16
  pass (bf16), ``high`` three (about 14 bits: judged as tf32), ``highest`` six (fp32); on CUDA,
  ``highest`` is fp32 and anything less TF32.
- **Fallbacks.** An ATen op torch_xla does not lower runs on CPU (its tensors copied to the host
  and back), and torch_xla counts it under ``aten::<op>`` in ``torch_xla.debug.metrics`` (lowered
  ops count under ``xla::``). Those counters are the ``fallback_ops`` (TorchNeuron's
  ``get_fallback_ops()`` semantics), named as ATen ops (``aten::searchsorted.Tensor`` ->
  ``aten::searchsorted``); their counts are ``details.fallback_report``. One counter is left out:
  ``aten::_local_scalar_dense`` (``.item()``, ``bool(tensor)``, which transformers' masking code
  calls) is how torch_xla reads a scalar back to the host, through the same CPU path, with nothing
  to lower (torch_xla registers an XLA kernel for it, which calls that path). Its count is
  ``details.fallback_report.xla_host_reads`` (each one also ends the lazy graph there).
- **Compile cache.** The sandbox points ``XLA_PERSISTENT_CACHE_PATH`` (torch_xla's persistent
  compilation cache, read when its computation client starts) at ``xla/`` under the compile cache
  (``ZOO_COMPILE_CACHE``), shared by a worker's model processes. torch_xla counts
  ``PersistentCacheHit``, ``PersistentCacheMiss`` and ``PersistentCacheDeserializeFailure``; they are
  ``details.fallback_report.xla_persistent_cache`` and give ``details.compile_cache``. XLA's PJRT CPU
  client (torch-xla 2.9.0) writes the executables but cannot read them back ("Deserializing
  serialized executable not supported"): on CPU every graph is a deserialize failure, so a miss.
- **xla+openxla.** ``torch.compile(backend="openxla")``: torch's dynamo backend that hands each
  graph to torch_xla's dynamo bridge, which runs nodes XLA cannot lower outside the XLA graphs,
  eagerly (and they count as above). Only for the ``xla`` device.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import types
from typing import Any

from ..backends import (
    BackendSpec,
    CompilerPlugin,
    DevicePlugin,
    FallbackTracker,
    cache_verdict,
    register_compiler,
    register_device,
)
from ..exceptions import UnknownBackend

INSTALL_HINT = "ZOO_VENV=.venv-xla bash scripts/setup.sh xla (torch-xla 2.9.0 needs torch==2.9.0: a venv of its own)"
_TRUE = ("1", "true", "yes", "on")
# aten:: counters that are no missing lowering: scalar reads back to the host (.item())
HOST_READS = frozenset({"aten::_local_scalar_dense"})
# torch_xla's persistent compilation cache counters -> the names Zoo reports them under
CACHE_COUNTERS = {
    "PersistentCacheHit": "hit",
    "PersistentCacheMiss": "miss",
    "PersistentCacheDeserializeFailure": "deserialize_failure",
}


def default_pjrt_device(environ: Any = os.environ) -> str | None:
    """Set ``PJRT_DEVICE=CPU`` where nothing else is configured; returns what was set, or None."""
    if environ.get("PJRT_DEVICE"):
        return None
    if any(importlib.util.find_spec(m) is not None for m in ("libtpu", "libneuronxla")):
        return None  # torch_xla picks TPU or Neuron itself when there is one
    environ["PJRT_DEVICE"] = "CPU"
    return "CPU"


# -- precision ------------------------------------------------------------------------------------
def xla_precision(spec: BackendSpec, environ: Any = os.environ, mat_mul: Any = None) -> str | None:
    """The compute precision of fp32 work on torch_xla's PJRT device (see the module docstring).
    ``mat_mul`` returns ``get_mat_mul_precision()`` (asked of torch_xla only on TPU and CUDA)."""
    if any(environ.get(v, "").strip().lower() in _TRUE for v in ("XLA_USE_BF16", "XLA_DOWNCAST_BF16")):
        return "bf16"
    pjrt = (environ.get("PJRT_DEVICE") or "CPU").split("_")[0].upper()
    if pjrt == "CPU":
        return "fp32"
    if pjrt not in ("TPU", "CUDA", "GPU"):
        return None  # Neuron and others: Zoo does not know; judged at the default
    if mat_mul is None:
        try:
            from torch_xla.backends import get_mat_mul_precision as mat_mul
        except ImportError:  # not installed: check_backend says so, with the install hint
            return None
    level = mat_mul()
    if pjrt == "TPU":
        return {"default": "bf16", "high": "tf32", "highest": "fp32"}.get(level)
    return "fp32" if level == "highest" else "tf32"


# -- what ran on CPU instead of XLA ---------------------------------------------------------------
def aten_name(counter: str) -> str | None:
    """Zoo's ATen op name for a torch_xla counter name, or None for a counter that is no fallback:
    ``aten::searchsorted.Tensor`` -> ``aten::searchsorted``; ``xla::mm``, ``MarkStep`` -> None."""
    if not counter.startswith("aten::"):
        return None
    op = counter[len("aten::") :].split(".")[0]
    return f"aten::{op}" if op else None


def fallback_counts(metrics: Any) -> dict[str, int]:
    """{ATen op: times it ran on CPU} from a ``torch_xla.debug.metrics``-like module's counters
    (:data:`HOST_READS` included: :class:`XLAFallbacks` sets them apart)."""
    counts: dict[str, int] = {}
    for counter in metrics.counter_names():
        name = aten_name(str(counter))
        if name is None:
            continue
        n = int(metrics.counter_value(counter) or 0)
        if n > 0:
            counts[name] = counts.get(name, 0) + n
    return counts


class XLAFallbacks(FallbackTracker):
    """ATen ops torch_xla ran on CPU since :meth:`clear`, from its ``aten::*`` counters.

    The counters are process-wide, and clearing them clears every counter (torch_xla's dynamo
    bridge clears them too, while it looks for fallbacks in a graph it compiles: what it finds
    there runs again, and counts again, when the compiled graph runs)."""

    def __init__(self, metrics: Any = None) -> None:
        self._metrics = metrics if metrics is not None else importlib.import_module("torch_xla.debug.metrics")

    def clear(self) -> None:
        self._metrics.clear_counters()

    def collect(self) -> list[str]:
        return sorted(set(fallback_counts(self._metrics)) - HOST_READS)

    def report(self) -> dict:
        counts = fallback_counts(self._metrics)
        out: dict[str, Any] = {}
        fallbacks = {op: n for op, n in sorted(counts.items()) if op not in HOST_READS}
        if fallbacks:
            out["xla_cpu_fallback_counts"] = fallbacks
        reads = sum(n for op, n in counts.items() if op in HOST_READS)
        if reads:
            out["xla_host_reads"] = reads
        cache = self._cache_counts()
        if cache:
            out["xla_persistent_cache"] = cache
        return out

    def _cache_counts(self) -> dict[str, int]:
        names = set(self._metrics.counter_names())
        counts = {key: int(self._metrics.counter_value(c) or 0) for c, key in CACHE_COUNTERS.items() if c in names}
        return {k: n for k, n in counts.items() if n}

    def compile_cache(self) -> str | None:
        """``hit`` when every graph came from the persistent cache, ``miss`` when none did (a graph
        the cache held but could not load is a miss), ``partial`` between; None when it is off."""
        counts = self._cache_counts()
        return cache_verdict(counts.get("hit", 0), counts.get("miss", 0) + counts.get("deserialize_failure", 0))


# -- torch.xla ------------------------------------------------------------------------------------
def device_module() -> types.ModuleType:
    """The ``torch.xla`` module Zoo's engine asks (torch_xla registers none)."""
    import torch_xla

    mod = types.ModuleType("torch.xla", "torch_xla as a torch device module, for Zoo (zoo_runner.plugins.xla)")

    def is_available() -> bool:
        return torch_xla.device_count() > 0

    def synchronize(device: Any = None) -> None:
        torch_xla.sync(wait=True)

    mod.is_available = is_available
    mod.device_count = torch_xla.device_count
    mod.synchronize = synchronize
    return mod


def openxla_options(spec: BackendSpec) -> dict | None:
    if spec.device != "xla":
        raise UnknownBackend(f"backend {spec}: openxla compiles for the xla device: use xla+openxla")
    return None


default_pjrt_device()
register_device(
    DevicePlugin(
        "xla",
        package="torch_xla",
        package_dist="torch-xla",
        fallback_tracker=XLAFallbacks,
        precision=xla_precision,
        install_hint=INSTALL_HINT,
        device_module=device_module,
    )
)
register_compiler(
    CompilerPlugin(
        "openxla",
        package_dist="torch-xla",
        # no packages/extra: on the xla device the device plugin has imported torch_xla (or said
        # how to install it); on any other, openxla_options refuses the spec
        compile_options=openxla_options,
        fallback_tracker=XLAFallbacks,
    )
)
