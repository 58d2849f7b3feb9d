"""Makes every model non-deterministic on purpose: each linear layer's output drifts by a tiny amount
that grows with every call, as a model that carries state across calls would (a buffer updated in
``forward``, a cache never reset). Load it through ``ZOO_PLUGINS`` in a model process only: the hook
is global to the process.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch

_calls = itertools.count(1)


def _drift(module: torch.nn.Module, args: Any, output: Any) -> Any:
    if isinstance(module, torch.nn.Linear) and isinstance(output, torch.Tensor) and output.is_floating_point():
        return output + next(_calls) * 1e-6
    return output


torch.nn.modules.module.register_module_forward_hook(_drift)
