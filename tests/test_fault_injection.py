"""Fault injection: backends with realistic silent bugs give `mismatch`; a correct one gives `pass`.

The backends (tests/plugins/buggy_backends.py) are registered as torch.compile backends and
loaded the way users load theirs, through ZOO_PLUGINS. Each validation runs in this process
(validate_here), CPU, tiny tier: build, fp32 and fp64 references, compile, compare.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from zoo_runner.engine import validate_here
from zoo_runner.request import ValidationRequest

PLUGIN = "tests.plugins.buggy_backends"
BUILTIN_CATALOG = Path(__file__).resolve().parent.parent / "zoo_runner" / "data" / "builtin_catalog.csv"

# Every bug must be caught on each of these (>= 5 architectures per bug): encoders, decoders,
# encoder-decoders, vision, speech, multimodal.
BUG_ARCHS = [
    "BertModel",
    "GPT2LMHeadModel",
    "LlamaForCausalLM",
    "T5ForConditionalGeneration",
    "ViTForImageClassification",
    "Wav2Vec2ForCTC",
]
# Dropping biases can only show where linear layers have biases: Llama's and T5's have none (by
# design of those architectures, not of Zoo), so that bug runs on architectures that do.
BIAS_ARCHS = [
    "BertModel",
    "GPT2LMHeadModel",
    "ViTForImageClassification",
    "WhisperForConditionalGeneration",
    "CLIPModel",
    "Wav2Vec2ForCTC",
]


def _catalog_head(n: int) -> list[str]:
    with BUILTIN_CATALOG.open(newline="") as f:
        return [row["model_id"].removeprefix("arch:") for row in csv.DictReader(f)][:n]


CLEAN_ARCHS = _catalog_head(22)


@pytest.fixture(autouse=True)
def buggy_plugins(monkeypatch):
    monkeypatch.setenv("ZOO_PLUGINS", PLUGIN)


def _validate(arch: str, backend: str) -> dict:
    return validate_here(ValidationRequest(f"arch:{arch}", backend=f"cpu+{backend}"))


def _explain(r: dict) -> str:
    return f"{r['model_id']} on {r['backend']}: {r['status']}, metrics {r['metrics']}, error {r['error']}"


def test_enough_architectures_per_claim():
    assert len(set(BUG_ARCHS)) >= 5 and len(set(BIAS_ARCHS)) >= 5
    assert len(set(CLEAN_ARCHS)) >= 20


@pytest.mark.parametrize("arch", BUG_ARCHS)
def test_one_percent_error_in_softmax_is_a_mismatch(arch):
    r = _validate(arch, "zoo_bug_softmax_1pct")
    assert r["status"] == "mismatch", _explain(r)
    assert "exceeds the fp32 budget" in r["error"]["message"]
    assert r["metrics"]["rmse_ratio"] > 10  # well beyond the budget, not at its edge


@pytest.mark.parametrize("arch", BUG_ARCHS)
def test_a_single_nan_is_a_mismatch(arch):
    r = _validate(arch, "zoo_bug_single_nan")
    assert r["status"] == "mismatch", _explain(r)
    assert "NaN where the reference has none (1 values)" in r["error"]["message"]


@pytest.mark.parametrize("arch", BIAS_ARCHS)
def test_dropped_biases_are_a_mismatch(arch):
    r = _validate(arch, "zoo_bug_drop_bias")
    assert r["status"] == "mismatch", _explain(r)
    assert "exceeds the fp32 budget" in r["error"]["message"]


@pytest.mark.parametrize("arch", BUG_ARCHS)
def test_swapped_output_columns_are_a_mismatch(arch):
    r = _validate(arch, "zoo_bug_swap_columns")
    assert r["status"] == "mismatch", _explain(r)
    assert "exceeds the fp32 budget" in r["error"]["message"]


@pytest.mark.parametrize("backend", ["zoo_bug_layer_norm_1pct", "zoo_bug_gelu_1pct", "zoo_bug_linear_1pct"])
def test_one_percent_error_in_other_op_kinds_is_a_mismatch(backend):
    r = _validate("ViTForImageClassification", backend)  # ViT has layer norms, GELUs and linears
    assert r["status"] == "mismatch", _explain(r)


@pytest.mark.parametrize("arch", CLEAN_ARCHS)
def test_a_correct_backend_passes_without_false_alarms(arch):
    r = _validate(arch, "zoo_clean")
    assert r["status"] == "pass", _explain(r)
    assert r["error"] is None and r["fallback_ops"] == []
