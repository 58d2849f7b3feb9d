"""Predict which ATen ops would fall back to CPU on a device, from its dispatch registrations."""

from __future__ import annotations

import torch

# torch device type → the dispatch key whose kernels run on it
DISPATCH_KEYS = {"cuda": "CUDA", "xpu": "XPU", "mps": "MPS", "neuron": "PrivateUse1", "meta": "Meta", "cpu": "CPU"}


GENERIC_KEYS = ("CompositeImplicitAutograd", "CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


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
    # A device-specific kernel, or a composite one that runs on every device (decompositions,
    # views and generic kernels registered as CompositeImplicit/ExplicitAutograd).
    keys = [dk] + [getattr(torch._C.DispatchKey, k) for k in GENERIC_KEYS if hasattr(torch._C.DispatchKey, k)]
    missing = []
    for name in op_census:
        try:
            has = any(torch._C._dispatch_has_kernel_for_dispatch_key(name, k) for k in keys)
        except RuntimeError:
            continue
        if not has:
            missing.append(name)
    return sorted(missing)
