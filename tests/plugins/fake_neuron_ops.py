"""The ATen ops the fake ``neuron`` device (tests/plugins/fake_neuron.py) has "kernels" for.

Pure data, importable without registering anything: the tests use it to compute, independently
of the device, which ops must have fallen back. Any other ATen op executed on a neuron tensor
falls back to CPU and is recorded, as TorchNeuron does.

``ZOO_FAKE_NEURON_EXTRA_OPS`` (comma-separated ATen names, or ``*`` for every op) widens the set,
e.g. to get a model whose every op is supported.
"""

from __future__ import annotations

import os

EXTRA_OPS_ENV = "ZOO_FAKE_NEURON_EXTRA_OPS"

# A realistic first-wave accelerator op set: GEMMs, pointwise math, the common activations and
# norms, embedding, and the view / copy / allocation plumbing every backend must have.
SUPPORTED_OPS: frozenset[str] = frozenset(
    "aten::" + name
    for name in """
    mm bmm addmm matmul baddbmm linear
    add sub mul div neg rsub add_ sub_ mul_ div_ neg_
    softmax _softmax log_softmax _log_softmax
    layer_norm native_layer_norm
    gelu tanh relu silu sigmoid
    embedding
    view _unsafe_view reshape permute transpose t expand clone copy_ _to_copy contiguous
    detach alias slice select unsqueeze squeeze split split_with_sizes unbind
    empty empty_strided empty_like zeros ones full zeros_like ones_like full_like fill_ zero_
    arange scalar_tensor _local_scalar_dense lift_fresh _copy_from _copy_from_and_resize
    """.split()
)


def supported_ops() -> frozenset[str] | None:
    """The supported set in effect (``None``: every op is supported)."""
    extra = os.environ.get(EXTRA_OPS_ENV, "").strip()
    if extra == "*":
        return None
    return SUPPORTED_OPS | {op.strip() for op in extra.split(",") if op.strip()}
