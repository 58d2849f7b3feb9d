"""Predict which ATen ops would fall back to CPU on a device, from its dispatch registrations."""
from __future__ import annotations

import torch

# torch device type → the dispatch key whose kernels run on it
DISPATCH_KEYS = {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "neuron": "PrivateUse1", "meta": "Meta", "cpu": "CPU"}


def predict_fallbacks(device: str, op_census: dict[str, int]) -> list[str]:
    """Ops in the census without a kernel for the device's dispatch key (none for CPU)."""
    if device == "cpu":
        return []
    key = DISPATCH_KEYS.get(device)
    if key is None:
        return []
    try:
        dk = getattr(torch._C.DispatchKey, key)
    except AttributeError:
        return []
    missing = []
    for name in op_census:
        try:
            has = torch._C._dispatch_has_kernel_for_dispatch_key(name, dk)
            if not has:
                has = torch._C._dispatch_has_kernel_for_dispatch_key(name, torch._C.DispatchKey.CompositeImplicitAutograd)
        except RuntimeError:
            continue
        if not has:
            missing.append(name)
    return sorted(missing)
