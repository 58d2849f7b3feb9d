"""The precision a backend is judged at, and the CPU reference computed at that precision.

Real accelerators do not compute fp32 matmuls in fp32: TorchNeuron's compiler casts them to bf16
unless told ``--auto-cast=none``, OpenVINO's CPU plugin runs bf16 on CPUs with bf16 units, CUDA
runs TF32 where torch allows it. Judged against an fp32 budget, every such backend would be a
``mismatch``. So each backend declares its **compute precision** (``fp32``, ``tf32``, ``bf16`` or
``fp16``: the lowest precision it may compute matmul-class ops in), and Zoo computes a CPU
reference at that precision; the backend's budget is relative to that reference's own error
against fp64, by the same rules as at fp32 (:mod:`zoo_runner.compare`).

- ``bf16`` / ``fp16``: matmul-class ATen ops take their fp32 inputs rounded to half precision,
  accumulate in fp32 and return their result rounded to half precision, as
  ``torch.autocast("cpu", dtype)`` defines them; everything else runs in fp32.
- ``tf32``: matmul-class ATen ops get their inputs rounded to TF32's 10 mantissa bits (round to
  nearest even), computed and returned in fp32, as TF32 tensor cores do.

Emulated, not run on the CPU's own half-precision kernels: those differ from CPU to CPU. Measured
on SegFormer-tiny, ``torch.autocast("cpu", torch.bfloat16)`` is 0.9 % off fp64 on a CPU without
bf16 units and 17 % off on a Xeon with AMX (oneDNN's bf16 convolutions), which made the budget
there too loose to catch a 25 % attention bug. A reference is cached and shared by every worker
of a fleet, so it must be the same number wherever it was computed: rounding in fp32 is exact and
the same on every CPU.

Where the precision comes from (``details.precision_source``): ``flag`` when the user asked for one
(``--precision``), ``plugin`` when the backend's plugin declares one
(:func:`zoo_runner.backends.declared_precision`), else ``default`` (fp32).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .exceptions import UnknownBackend

if TYPE_CHECKING:
    import torch

    from .backends import BackendSpec

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
CHOICES = ("auto",) + PRECISIONS
SOURCES = ("plugin", "flag", "default")

# What a target dtype other than float32 computes in throughout (``cpu@bfloat16``): that dtype's
# budgets apply against the fp32 reference, and the precision only names it.
DTYPE_PRECISION = {"float32": "fp32", "float64": "fp32", "bfloat16": "bf16", "float16": "fp16"}

# Budget factor over the precision reference's own error against fp64 (RMSE and max abs; its
# square on the cosine loss, see compare.py). fp32 keeps the engine's factor of 10: reordered fp32
# reductions differ from each other by far more than their tiny absolute error suggests. Below
# fp32 the reference's error is large and stable, so a backend whose only deviation is its
# precision lands near 1x of it. Measured (benchmarks/precision_latest.txt, 43 architectures with
# attention, tier tiny, the emulated reference and pooled errors of harness 4): a bf16-matmul
# backend at 0.28-1.38x, attention scaled by 25 % at 12.8x and more on all 43. 3 sits 2.2x above
# the first and 4.3x below the second. Never loosen it to turn a case green. (Harness 3's autocast
# reference on a Xeon with AMX put SegFormer-tiny's own error at 17 % and no factor separated it;
# emulated, the reference is 0.84 % off on every CPU.) tf32 and fp16 take the same factor; only
# bf16 was measured.
FACTORS = {"fp32": 10.0, "tf32": 3.0, "bf16": 3.0, "fp16": 3.0}

# Matmul-class ATen ops and the arguments whose values a reduced-precision matmul rounds. The
# accumulated term (``self`` of addmm, baddbmm, ...) and biases are added in fp32 and stay exact.
_ROUNDED_ARGS = frozenset(
    {
        "self",
        "other",
        "mat1",
        "mat2",
        "batch1",
        "batch2",
        "mat",
        "vec",
        "input",
        "weight",
        "query",
        "key",
        "value",
        "tensor",
    }
)
_ACCUMULATE_INTO_SELF = frozenset({"addmm", "baddbmm", "addbmm", "addmv", "addr"})
MATMUL_OPS = frozenset(
    {
        "mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot", "matmul", "linear", "einsum",
        "convolution", "_convolution", "conv1d", "conv2d", "conv3d",
        "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_attention_math",
        "scaled_dot_product_attention",
    }
)  # fmt: skip


def resolve(requested: str | None, spec: BackendSpec) -> tuple[str, str]:
    """(precision, source) a backend is judged at: the flag, else the plugin's declaration, else fp32."""
    from .backends import declared_precision

    requested = (requested or "auto").strip().lower()
    if requested not in CHOICES:
        raise UnknownBackend(f"unknown precision {requested!r}: expected one of {', '.join(CHOICES)}")
    if spec.dtype != "float32":  # the whole model runs in that dtype: nothing to declare
        own = DTYPE_PRECISION[spec.dtype]
        if requested not in ("auto", own):
            raise UnknownBackend(
                f"--precision {requested} does not apply to backend {spec}: it computes in {spec.dtype} throughout"
            )
        return own, "flag" if requested != "auto" else "default"
    if requested != "auto":
        return requested, "flag"
    declared = declared_precision(spec)
    if declared is not None:
        if declared not in PRECISIONS:
            raise UnknownBackend(f"backend {spec} declares precision {declared!r}, not one of {', '.join(PRECISIONS)}")
        return declared, "plugin"
    return "fp32", "default"


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 values rounded to nearest even at TF32's 10 mantissa bits (8-bit exponent kept)."""
    import torch

    bits = t.contiguous().view(torch.int32)
    lsb = (bits >> 13) & 1
    rounded = ((bits + 0xFFF + lsb) & ~0x1FFF).view(torch.float32)
    return torch.where(torch.isfinite(t), rounded, t)


def _half(dtype: torch.dtype) -> Callable[[torch.Tensor], torch.Tensor]:
    import torch

    def round_to(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype).to(torch.float32)

    return round_to


def _rounding_mode(round_to: Callable[[torch.Tensor], torch.Tensor], round_result: bool) -> Any:
    """A dispatch mode that rounds the fp32 inputs of matmul-class ops with ``round_to`` as they
    run (never the accumulated term: see ``_ACCUMULATE_INTO_SELF``), and their fp32 results too
    when ``round_result``."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def _round(x: Any) -> Any:
        return round_to(x) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x

    def _round_args(func, args, kwargs, skip_self: bool):
        names = [a.name for a in func._schema.arguments]
        out_args = []
        for i, value in enumerate(args):
            name = names[i] if i < len(names) else ""
            keep = name not in _ROUNDED_ARGS or (skip_self and name == "self")
            out_args.append(value if keep else _round(value))
        out_kwargs = {
            k: (v if k not in _ROUNDED_ARGS or (skip_self and k == "self") else _round(v)) for k, v in kwargs.items()
        }
        return tuple(out_args), out_kwargs

    class RoundMatmuls(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = func._schema.name.split("::")[-1]
            if name not in MATMUL_OPS:
                return func(*args, **kwargs)
            args, kwargs = _round_args(func, args, kwargs, skip_self=name in _ACCUMULATE_INTO_SELF)
            out = func(*args, **kwargs)
            if not round_result:
                return out
            return torch.utils._pytree.tree_map(_round, out)

    return RoundMatmuls()


@contextlib.contextmanager
def computing_at(precision: str) -> Iterator[None]:
    """Run the model inside this to compute the CPU reference at ``precision``."""
    import torch

    if precision in ("bf16", "fp16"):
        with _rounding_mode(_half(torch.bfloat16 if precision == "bf16" else torch.float16), round_result=True):
            yield
    elif precision == "tf32":
        with _rounding_mode(round_to_tf32, round_result=False):
            yield
    elif precision == "fp32":
        yield
    else:
        raise UnknownBackend(f"unknown precision {precision!r}: expected one of {', '.join(PRECISIONS)}")


def factor(precision: str) -> float:
    return FACTORS.get(precision, FACTORS["fp32"])
