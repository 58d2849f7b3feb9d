"""The neuron path end to end, on a fake TorchNeuron (tests/plugins/fake_neuron.py).

The fake registers a PrivateUse1 ``neuron`` device whose tensors hold CPU tensors, runs ops it
has no kernel for on CPU and records them through ``torch_neuronx.get_fallback_ops()``, as
TorchNeuron documents. Zoo must report ``pass_with_fallback`` with exactly those ops.

The plugin is only ever imported in child processes: importing it here would give this pytest
process a ``neuron`` device for good (tests/test_backends.py checks that there is none).
"""

from __future__ import annotations

import json
import os
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


ARCHS = ("BertForMaskedLM", "GPT2LMHeadModel", "LlamaForCausalLM")


@pytest.fixture(scope="module")
def ops_run_on_neuron():
    """A second, independent count: every ATen op that touches a neuron tensor (or allocates on
    neuron) while the same models run the same inputs on the fake device, seen by a dispatch mode
    rather than by the device's own tracking. One child process for all of ARCHS, started now and
    running while the validations run; ``get(arch)`` waits for it."""
    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_PLUGINS", EXTRA_OPS_ENV)}
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    code = f"from tests.test_fake_neuron import _probe; _probe({list(ARCHS)!r})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    seen: dict[str, list[str]] = {}

    def get(arch: str) -> set[str]:
        if not seen:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
            seen.update(json.loads(out.strip().splitlines()[-1]))
        return set(seen[arch])

    yield get
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _probe(archs: list[str]) -> None:  # runs in a child process; prints {arch: [op, ...]}
    import importlib

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    importlib.import_module(PLUGIN)
    from zoo_runner.builders import get_builder

    def on_neuron(x) -> bool:
        return (isinstance(x, torch.Tensor) and x.device.type == "neuron") or (
            isinstance(x, torch.device) and x.type == "neuron"
        )

    class OnNeuron(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if any(on_neuron(x) for x in tree_leaves((args, kwargs))):
                self.seen.add(func._schema.name)
            return func(*args, **kwargs)

    seen = {}
    for arch in archs:  # the model and inputs the engine builds, moved the way the engine moves them
        req = ValidationRequest(f"arch:{arch}", backend="neuron")
        built = get_builder("transformers").build(req)
        inputs = [built.make_inputs(shape, req.seed + i) for i, shape in enumerate(built.shapes)]
        model = built.model.to(device=torch.device("neuron"), dtype=torch.float32)
        mode = OnNeuron()
        with torch.no_grad():
            for x in inputs:
                xt = {k: v.to(device=torch.device("neuron")) for k, v in x.items()}
                with mode:
                    model(**xt)
        seen[arch] = sorted(mode.seen)
    print(json.dumps(seen))


@pytest.mark.parametrize("arch", ARCHS)
def test_fake_neuron_reports_exactly_the_ops_that_fell_back(arch, ops_run_on_neuron):
    r = _validate(arch)
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    fallback = set(r["fallback_ops"])
    assert r["fallback_ops"] == sorted(fallback) and fallback

    # exactly the ops outside the device's kernel set that ran on the device
    assert fallback == ops_run_on_neuron(arch) - SUPPORTED_OPS

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


def test_fake_neuron_auto_casts_to_bf16_by_default_and_is_judged_at_bf16(monkeypatch):
    """TorchNeuron's compiler casts fp32 matmuls to bf16 unless told --auto-cast=none: Zoo takes the
    precision the neuron plugin declares, and the bf16 output passes at bf16, not at fp32."""
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    assert (r["precision"], r["details"]["precision_source"], r["details"]["strict_fp32"]) == ("bf16", "plugin", False)

    r = run_isolated(ValidationRequest("arch:GPT2LMHeadModel", backend="neuron", precision="fp32", timeout_s=300))
    assert r["status"] == "mismatch" and r["details"]["precision_source"] == "flag", (r["status"], r["error"])
    assert "exceeds the fp32 budget" in r["error"]["message"]


def test_fake_neuron_without_auto_cast_computes_and_is_judged_at_fp32(monkeypatch):
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast=none")
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    assert (r["precision"], r["details"]["precision_source"], r["details"]["strict_fp32"]) == ("fp32", "plugin", True)
