"""Compile backends that compute matmuls in bf16, as TorchNeuron's compiler and OpenVINO's CPU
plugin do by default, with and without a real bug on top.

Loaded through ``ZOO_PLUGINS`` like any backend plugin. Each returns a callable that runs dynamo's
FX graph eagerly under :class:`Bf16Matmuls` (:mod:`tests.plugins.bf16_matmul`): the fp32 operands
of every matmul-class ATen op are rounded to bf16, the product accumulates and returns in fp32 —
the Neuron compiler's ``--auto-cast=matmult`` in software. That is the backends' *only*
deviation from fp32, so at ``--precision bf16`` it must pass and at ``fp32`` it must be a
``mismatch``. Each also declares bf16 through a
:class:`zoo_runner.backends.CompilerPlugin`, as a vendor plugin would.

- ``zoo_bf16_matmul``: bf16 matmuls, nothing else.
- ``zoo_bf16_swap_columns``, ``zoo_bf16_drop_bias``, ``zoo_bf16_single_nan``,
  ``zoo_bf16_attention_25pct``: the same plus one bug (two output columns swapped, linear layers
  without bias, one NaN, attention output 25 % too large).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import torch
from torch._dynamo import register_backend
from torch.utils._python_dispatch import TorchDispatchMode

from tests.plugins.bf16_matmul import round_operands
from tests.plugins.buggy_backends import OP_KINDS, DropBias, ScaleOutputs, with_single_nan, with_swapped_columns
from zoo_runner.backends import CompilerPlugin, register_compiler


class Bf16Matmuls(TorchDispatchMode):
    """Rounds the fp32 operands of matmul-class ops to bf16; the op itself runs in fp32."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*round_operands(func, args), **(kwargs or {}))


def attention_scaled(scale: float) -> ScaleOutputs:
    """Attention output ``scale`` times what it should be: softmax (eager attention) and SDPA
    outputs scaled, as a kernel with a wrong normalisation gives."""
    return ScaleOutputs(OP_KINDS["softmax"], scale)


# bug name -> (modes to run the graph under, a transform of the graph's outputs)
BUGS: dict[str, tuple[Callable[[], list], Callable[[Any], Any]]] = {
    "matmul": (lambda: [], lambda outs: outs),
    "swap_columns": (lambda: [], with_swapped_columns),
    "drop_bias": (lambda: [DropBias()], lambda outs: outs),
    "single_nan": (lambda: [], with_single_nan),
    "attention_25pct": (lambda: [attention_scaled(1.25)], lambda outs: outs),
}


def run_with(bug: str, fn: Callable[..., Any], *args: Any, bf16: bool = True, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` as the ``zoo_bf16_<bug>`` backend computes it (``bf16=False``: the
    bug alone, matmuls in fp32)."""
    modes, transform = BUGS[bug]
    with ExitStack() as stack:
        if bf16:
            stack.enter_context(Bf16Matmuls())
        for mode in modes():
            stack.enter_context(mode)
        return transform(fn(*args, **kwargs))


def _register(bug: str) -> Callable:
    name = "zoo_bf16_matmul" if bug == "matmul" else f"zoo_bf16_{bug}"

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return lambda *args: run_with(bug, gm.forward, *args)

    backend.__name__ = name
    register_compiler(CompilerPlugin(name, precision=lambda spec: "bf16"))
    return register_backend(backend, name=name)


BACKENDS = {bug: _register(bug) for bug in BUGS}
