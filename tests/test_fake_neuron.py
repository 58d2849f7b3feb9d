"""The neuron path end to end, on a fake TorchNeuron (tests/plugins/fake_neuron.py).

The fake registers a PrivateUse1 ``neuron`` device whose tensors hold CPU tensors, runs ops it
has no kernel for on CPU and records them through ``torch_neuronx.get_fallback_ops()``, as
TorchNeuron documents. Zoo must report ``pass_with_fallback`` with exactly those ops.

The plugin is only ever imported in child processes: importing it here would give this pytest
process a ``neuron`` device for good (tests/test_backends.py checks that there is none).
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT
from tests.plugins.fake_neuron_ops import EXTRA_OPS_ENV, SUPPORTED_OPS
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest

PLUGIN = "tests.plugins.fake_neuron"


@pytest.fixture(autouse=True)
def fake_neuron(monkeypatch):
    monkeypatch.setenv("ZOO_PLUGINS", PLUGIN)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv(EXTRA_OPS_ENV, raising=False)


def _validate(arch: str) -> dict:
    r = run_isolated(ValidationRequest(f"arch:{arch}", backend="neuron", timeout_s=300))
    assert r["device"] == "neuron" and r["backend"] == "neuron"
    return r


def _ops_run_on_neuron(arch: str) -> set[str]:
    """A second, independent count: every ATen op that touches a neuron tensor (or allocates on
    neuron) while the same model runs the same inputs on the fake device, seen by a dispatch mode
    rather than by the device's own tracking."""
    code = f"from tests.test_fake_neuron import _probe; _probe({arch!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


def _probe(arch: str) -> None:  # runs in a child process
    import importlib

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    importlib.import_module(PLUGIN)
    from zoo_runner.builders import get_builder

    req = ValidationRequest(f"arch:{arch}", backend="neuron")
    built = get_builder("transformers").build(req)
    inputs = [built.make_inputs(shape, req.seed + i) for i, shape in enumerate(built.shapes)]
    model = built.model.to(device=torch.device("neuron"), dtype=torch.float32)
    seen: set[str] = set()

    def on_neuron(x) -> bool:
        return (isinstance(x, torch.Tensor) and x.device.type == "neuron") or (isinstance(x, torch.device) and x.type == "neuron")

    class OnNeuron(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if any(on_neuron(x) for x in tree_leaves((args, kwargs))):
                seen.add(func._schema.name)
            return func(*args, **kwargs)

    with torch.no_grad():
        for x in inputs:
            xt = {k: v.to(device="neuron") for k, v in x.items()}
            with OnNeuron():
                model(**xt)
    print(json.dumps(sorted(seen)))


@pytest.mark.parametrize("arch", ["BertForMaskedLM", "GPT2LMHeadModel", "LlamaForCausalLM"])
def test_fake_neuron_reports_exactly_the_ops_that_fell_back(arch):
    r = _validate(arch)
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    fallback = set(r["fallback_ops"])
    assert r["fallback_ops"] == sorted(fallback) and fallback

    # exactly the ops outside the device's kernel set that ran on the device
    assert fallback == _ops_run_on_neuron(arch) - SUPPORTED_OPS

    # and consistent with the CPU op census: every op the reference ran that the device lacks
    # fell back, except CPU-only fused kernels (SDPA picks another path on other devices)
    cpu_only = {op for op in r["op_census"] if op.endswith("_for_cpu")}
    assert set(r["op_census"]) - SUPPORTED_OPS - cpu_only <= fallback
    assert r["metrics"]["target_ms"] is not None and r["metrics"]["cosine"] > 0.999


def test_fake_neuron_with_every_op_supported_passes_clean(monkeypatch):
    """Give the device kernels for exactly the ops it reported: nothing falls back any more,
    which also proves the report was complete."""
    first = _validate("GPT2LMHeadModel")
    assert first["status"] == "pass_with_fallback", (first["status"], first["error"])
    monkeypatch.setenv(EXTRA_OPS_ENV, ",".join(first["fallback_ops"]))
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "pass", (r["status"], r["error"], r["fallback_ops"])
    assert r["fallback_ops"] == []
    assert r["fingerprint"] == first["fingerprint"]
