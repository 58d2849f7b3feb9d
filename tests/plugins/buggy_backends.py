"""Compile backends with the silent numerical bugs real backends ship: they run, they return
outputs of the right shape, and the numbers are wrong.

Each is registered with torch.compile's registry, as a real backend plugin would be (load this
module through ``ZOO_PLUGINS``), and is cheap: dynamo hands it the captured FX graph and it
returns a callable that runs that graph eagerly, with the bug. No AOT, no inductor.

- ``zoo_bug_<op>_1pct``: one op kind's outputs are 1% too large (``softmax``, ``layer_norm``,
  ``gelu``, ``linear``), as a kernel with a wrong normalisation or scale would give.
- ``zoo_bug_single_nan``: exactly one element of the graph's first floating output is NaN.
- ``zoo_bug_drop_bias``: linear layers computed without their bias.
- ``zoo_bug_swap_columns``: two columns (last dim) of the first floating output are swapped.
- ``zoo_clean``: the graph, unchanged: a correct backend, the control.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch._dynamo import register_backend
from torch.overrides import TorchFunctionMode

SCALE = 1.01  # a 1% error


class ScaleOutputs(TorchFunctionMode):
    """Multiplies the outputs of the given torch functions by ``scale``, as they run.

    A TorchFunctionMode sees every call the FX graph makes (functions and Tensor methods alike);
    while a handler runs the mode is off, so the ops it calls itself are not intercepted.
    """

    def __init__(self, funcs: Iterable[Callable], scale: float = SCALE) -> None:
        super().__init__()
        self.funcs = frozenset(funcs)
        self.scale = scale

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self.funcs and isinstance(out, torch.Tensor) and out.is_floating_point():
            out = out * self.scale
        return out


# Softmax as a standalone op (eager attention), and inside fused attention: with no dropout
# (eval), SDPA's output is softmax(QK^T) @ V, linear in the softmax, so a softmax 1% too large
# is exactly an SDPA output 1% too large. Either way every attention layer's softmax is off.
OP_KINDS: dict[str, tuple[Callable, ...]] = {
    "softmax": (F.softmax, torch.softmax, torch.Tensor.softmax, torch.special.softmax, F.scaled_dot_product_attention),
    "layer_norm": (F.layer_norm, torch.layer_norm),
    "gelu": (F.gelu,),
    "linear": (F.linear,),
}


def _wrap(gm: torch.fx.GraphModule, mode_factory: Callable[[], TorchFunctionMode]) -> Callable:
    def run(*args: Any) -> Any:
        with mode_factory():
            return gm.forward(*args)

    return run


def _scaled_op_backend(kind: str) -> Callable:
    funcs = OP_KINDS[kind]

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
        return _wrap(gm, lambda: ScaleOutputs(funcs))

    backend.__name__ = f"zoo_bug_{kind}_1pct"
    return register_backend(backend, name=backend.__name__)


zoo_bug_softmax_1pct = _scaled_op_backend("softmax")
zoo_bug_layer_norm_1pct = _scaled_op_backend("layer_norm")
zoo_bug_gelu_1pct = _scaled_op_backend("gelu")
zoo_bug_linear_1pct = _scaled_op_backend("linear")


class DropBias(TorchFunctionMode):
    """Linear layers without their bias: ``F.linear(x, w, b)`` as ``x @ w.T``, ``addmm(b, x, w)``
    (transformers' Conv1D, e.g. GPT-2) as ``x @ w``."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if func is F.linear:
            if len(args) > 2:
                args = args[:2]
            kwargs.pop("bias", None)
        elif func in (torch.addmm, torch.Tensor.addmm):
            named = dict(zip(("input", "mat1", "mat2"), args), **kwargs)
            out = torch.mm(named["mat1"], named["mat2"])
            alpha = named.get("alpha", 1)
            return out * alpha if alpha != 1 else out
        return func(*args, **kwargs)


@register_backend
def zoo_bug_drop_bias(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return _wrap(gm, DropBias)


def _first_float(outs: Any, min_last_dim: int = 1) -> tuple[Any, torch.Tensor] | None:
    """(position or key, tensor) of the first floating output of a tensor, sequence or plain dict."""
    items = outs.items() if isinstance(outs, dict) else enumerate(outs if isinstance(outs, (list, tuple)) else [outs])
    for i, t in items:
        if (
            isinstance(t, torch.Tensor)
            and t.is_floating_point()
            and t.numel()
            and t.ndim
            and t.shape[-1] >= min_last_dim
        ):
            return i, t
    return None


def _replace(outs: Any, i: Any, t: torch.Tensor) -> Any:
    if isinstance(outs, torch.Tensor):
        return t
    if isinstance(outs, dict):
        return {**outs, i: t}
    seq = list(outs)
    seq[i] = t
    return type(outs)(seq) if isinstance(outs, tuple) else seq


def with_single_nan(outs: Any) -> Any:
    """``outs`` (a tensor or a sequence of them) with one NaN in its first floating output."""
    found = _first_float(outs)
    if found is None:
        return outs
    i, t = found
    t = t.clone()
    t[(0,) * t.ndim] = float("nan")
    return _replace(outs, i, t)


def with_swapped_columns(outs: Any) -> Any:
    """``outs`` with two columns (last dim) of its first floating output swapped."""
    found = _first_float(outs, min_last_dim=2)
    if found is None:
        return outs
    i, t = found
    t = t.clone()
    t[..., [0, 1]] = t[..., [1, 0]]
    return _replace(outs, i, t)


@register_backend
def zoo_bug_single_nan(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return lambda *args: with_single_nan(gm.forward(*args))


@register_backend
def zoo_bug_swap_columns(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return lambda *args: with_swapped_columns(gm.forward(*args))


@register_backend
def zoo_clean(gm: torch.fx.GraphModule, example_inputs: list) -> Callable:
    return gm.forward
