"""bf16 matmuls in software, for the test backends: the fp32 operands of every matmul-class ATen op
rounded to bf16, the product accumulated and returned in fp32 — what the Neuron compiler's default
``--auto-cast=matmult`` (``--auto-cast-type=bf16``) does on Trainium's matrix engine.

Written apart from Zoo's own CPU reference at bf16 (:mod:`zoo_runner.precision`, which also rounds
each matmul's result to bf16, as autocast returns it) on purpose: the backends under test must not
share the reference's code.
"""

from __future__ import annotations

from typing import Any

import torch

# ATen matmul-class op -> positions of the operands a bf16 matmul rounds (never the accumulated
# term or the bias, which are added in fp32).
OPERANDS: dict[str, tuple[int, ...]] = {
    "aten::mm": (0, 1),
    "aten::bmm": (0, 1),
    "aten::mv": (0, 1),
    "aten::dot": (0, 1),
    "aten::addmm": (1, 2),
    "aten::baddbmm": (1, 2),
    "aten::addbmm": (1, 2),
    "aten::addmv": (1, 2),
    "aten::convolution": (0, 1),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (0, 1, 2),
}


def _bf16(x: Any) -> Any:
    return x.to(torch.bfloat16).to(torch.float32) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x


def round_operands(func: Any, args: tuple) -> tuple:
    """``args`` of ATen op ``func`` with its matmul operands rounded to bf16 (unchanged for other ops)."""
    rounded = OPERANDS.get(func._schema.name)
    if not rounded:
        return args
    return tuple(_bf16(a) if i in rounded else a for i, a in enumerate(args))
