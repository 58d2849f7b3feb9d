"""Seeded weights that exercise every parameter.

HF's own initialisation zeroes biases and keeps activations tiny, which lets a backend that drops
biases or perturbs a kernel slightly pass. Here every matrix is scaled by its fan-in so
activations stay of order one through depth, every bias and norm affine is non-zero.
"""

from __future__ import annotations

import math

import torch
from torch import nn

NORM_HINTS = ("norm", "ln", "layernorm", "rmsnorm", "groupnorm", "batchnorm")


def _is_norm(module: nn.Module) -> bool:
    name = type(module).__name__.lower()
    return any(h in name for h in NORM_HINTS)


@torch.no_grad()
def init_weights(model: nn.Module, seed: int = 0) -> None:
    gen = torch.Generator().manual_seed(seed)
    seen: set[int] = set()
    for module in model.modules():
        norm = _is_norm(module)
        embedding = isinstance(module, nn.Embedding)
        for pname, param in module.named_parameters(recurse=False):
            if id(param) in seen or not param.is_floating_point():
                continue
            seen.add(id(param))
            t = torch.empty(param.shape, dtype=torch.float32)
            if param.ndim >= 2:
                if embedding:
                    t.normal_(0.0, 1.0, generator=gen)
                else:
                    fan_in = max(1, math.prod(param.shape[1:]))
                    t.normal_(0.0, 1.0 / math.sqrt(fan_in), generator=gen)
            elif norm and pname == "weight":
                t.uniform_(0.8, 1.2, generator=gen)
            elif pname.endswith("bias") or norm:
                t.uniform_(-0.2, 0.2, generator=gen)
            else:
                continue  # scalars and special 1-D parameters keep their architecture-specific init
            param.copy_(t.to(param.dtype))
    for module in model.modules():  # batch norm running stats: non-trivial but stable
        if isinstance(module, nn.modules.batchnorm._BatchNorm) and module.running_mean is not None:
            module.running_mean.copy_(torch.empty_like(module.running_mean).uniform_(-0.1, 0.1, generator=gen))
            module.running_var.copy_(torch.empty_like(module.running_var).uniform_(0.8, 1.2, generator=gen))
