"""Verdicts at the precision a backend promises (SPEC "Precision — what a backend is judged against").

A backend whose only deviation is bf16 matmuls (tests/plugins/precision_backends.py, loaded through
ZOO_PLUGINS like a vendor plugin) must pass when judged at bf16 and be a mismatch at fp32; the same
backend with one real bug on top must still be a mismatch at bf16. The CPU fp32 reference runs
twice: a model whose runs differ is ``reference_error`` / ``nondeterministic``. Each validation runs
in this process on CPU at tier tiny (validate_here), except where a plugin must stay in a child.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.conftest import ROOT
from zoo_runner.backends import BackendSpec, declared_precision
from zoo_runner.compare import compare
from zoo_runner.engine import validate_here
from zoo_runner.exceptions import UnknownBackend
from zoo_runner.launcher import run_isolated
from zoo_runner.plugins.neuron import neuron_precision
from zoo_runner.precision import computing_at, resolve, round_to_tf32
from zoo_runner.request import ValidationRequest

PLUGIN = "tests.plugins.precision_backends"

# encoders, decoders, encoder-decoders, vision, audio, multimodal
ARCHS = [
    "BertModel",
    "DistilBertForSequenceClassification",
    "GPT2LMHeadModel",
    "LlamaForCausalLM",
    "Qwen2ForCausalLM",
    "T5ForConditionalGeneration",
    "BartForConditionalGeneration",
    "ViTForImageClassification",
    "Wav2Vec2ForCTC",
    "WhisperForConditionalGeneration",
    "CLIPModel",
]
BUG_ARCHS = [
    "BertModel",
    "GPT2LMHeadModel",
    "LlamaForCausalLM",
    "T5ForConditionalGeneration",
    "ViTForImageClassification",
    "WhisperForConditionalGeneration",
]
# Llama's and T5's linear layers have no biases: dropping them changes nothing there.
BIAS_ARCHS = [
    "BertModel",
    "GPT2LMHeadModel",
    "ViTForImageClassification",
    "WhisperForConditionalGeneration",
    "CLIPModel",
    "Wav2Vec2ForCTC",
]


@pytest.fixture(autouse=True)
def precision_plugins(monkeypatch):
    monkeypatch.setenv("ZOO_PLUGINS", PLUGIN)


def _validate(arch: str, backend: str, precision: str) -> dict:
    return validate_here(ValidationRequest(f"arch:{arch}", backend=f"cpu+{backend}", precision=precision))


def _explain(r: dict) -> str:
    return (
        f"{r['model_id']} on {r['backend']} at {r['precision']}: "
        f"{r['status']}, metrics {r['metrics']}, error {r['error']}"
    )


def test_enough_architectures_per_claim():
    assert len(set(ARCHS)) >= 10 and len(set(BUG_ARCHS)) >= 5 and len(set(BIAS_ARCHS)) >= 5


@pytest.mark.parametrize("arch", ARCHS)
def test_bf16_matmuls_pass_at_bf16_and_are_a_mismatch_at_fp32(arch):
    r = _validate(arch, "zoo_bf16_matmul", "bf16")
    assert r["status"] == "pass", _explain(r)
    assert r["precision"] == "bf16" and r["details"]["precision_source"] == "flag"
    assert r["details"]["strict_fp32"] is False  # the same output misses the fp32 budget

    r = _validate(arch, "zoo_bf16_matmul", "fp32")
    assert r["status"] == "mismatch", _explain(r)
    assert r["precision"] == "fp32" and "exceeds the fp32 budget" in r["error"]["message"]


def test_a_plugin_declared_precision_is_used_by_default():
    r = _validate("GPT2LMHeadModel", "zoo_bf16_matmul", "auto")
    assert r["status"] == "pass", _explain(r)
    assert (r["precision"], r["details"]["precision_source"]) == ("bf16", "plugin")
    assert "--precision" not in r["repro"]


@pytest.mark.parametrize("arch", BUG_ARCHS)
@pytest.mark.parametrize("bug", ["swap_columns", "attention_25pct"])
def test_a_real_bug_on_top_of_bf16_is_a_mismatch_at_bf16(arch, bug):
    r = _validate(arch, f"zoo_bf16_{bug}", "bf16")
    assert r["status"] == "mismatch", _explain(r)
    message = r["error"]["message"]
    assert "the bf16 budget" in message and "x over" in message  # which output, its error, the budget, how far over
    assert "--precision bf16" in r["repro"]


@pytest.mark.parametrize("arch", BIAS_ARCHS)
def test_dropped_biases_on_top_of_bf16_are_a_mismatch_at_bf16(arch):
    r = _validate(arch, "zoo_bf16_drop_bias", "bf16")
    assert r["status"] == "mismatch", _explain(r)
    assert "exceeds the bf16 budget" in r["error"]["message"]


@pytest.mark.parametrize("arch", BUG_ARCHS)
def test_a_single_nan_on_top_of_bf16_is_a_mismatch_at_bf16(arch):
    r = _validate(arch, "zoo_bf16_single_nan", "bf16")
    assert r["status"] == "mismatch", _explain(r)
    assert "NaN where the reference has none (1 values)" in r["error"]["message"]


def test_a_nondeterministic_model_is_a_reference_error(monkeypatch):
    """A model whose output drifts from call to call (state carried across calls): the CPU fp32
    reference cannot be trusted, so the verdict is Zoo's, never the backend's."""
    monkeypatch.setenv("ZOO_PLUGINS", "tests.plugins.nondeterministic")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=300, reference_cache=""))
    assert (r["status"], r["reason"]) == ("reference_error", "nondeterministic"), _explain(r)
    assert "two CPU fp32 runs on the same inputs differ" in r["error"]["message"]


def test_a_model_that_samples_is_not_blamed_on_a_backend_with_its_own_generator(monkeypatch):
    """SpeechT5's decoder prenet keeps dropout on at inference (``aten::bernoulli`` in its census). A
    backend that computes exactly as the CPU but draws its own random numbers (as a device does)
    gives other outputs: the CPU reference re-run at another seed moves too, so the verdict is the
    model's (``reference_error`` / ``nondeterministic``), never the backend's ``mismatch``."""
    monkeypatch.setenv("ZOO_PLUGINS", "tests.plugins.own_generator")
    r = validate_here(ValidationRequest("arch:SpeechT5ForTextToSpeech", backend="cpu+zoo_own_generator"))
    assert (r["status"], r["reason"]) == ("reference_error", "nondeterministic"), _explain(r)
    assert "the forward draws random numbers (aten::bernoulli)" in r["error"]["message"]
    assert r["details"]["random_ops"] == {"ops": ["aten::bernoulli"], "seed_check": "output moves with the seed"}
    assert r["metrics"]["max_abs_diff"] > 0  # the mismatch's own figures stay on the row
    same = validate_here(ValidationRequest("arch:SpeechT5ForTextToSpeech", backend="cpu+aot_eager"))
    assert same["status"] == "pass", _explain(same)  # a backend that draws the CPU's numbers is judged as usual


def test_a_backend_with_its_own_generator_passes_a_model_that_does_not_sample(monkeypatch):
    monkeypatch.setenv("ZOO_PLUGINS", "tests.plugins.own_generator")
    r = validate_here(ValidationRequest("arch:BertModel", backend="cpu+zoo_own_generator"))
    assert r["status"] == "pass" and "random_ops" not in r["details"], _explain(r)


def test_a_mismatch_of_a_model_that_samples_stands_when_the_backend_ran_the_cpus_model(monkeypatch):
    """No room for the backend's own copy: the reference's module went to the backend, so the CPU
    cannot re-run it at another seed; the mismatch is kept and the row says the check did not run."""
    monkeypatch.setenv("ZOO_PLUGINS", "tests.plugins.own_generator")
    monkeypatch.setattr("zoo_runner.engine.COPY_ROOM", 10**9)
    r = validate_here(ValidationRequest("arch:SpeechT5ForTextToSpeech", backend="cpu+zoo_own_generator"))
    assert r["status"] == "mismatch", _explain(r)
    assert r["details"]["random_ops"]["seed_check"] == "not run: the backend ran the CPU's model"


def test_every_random_op_is_one_the_op_census_can_record():
    """The census sees ops at the dispatcher: a composite op (every overload CompositeImplicitAutograd,
    like ``dropout``) reaches it as the ops it is made of, so listing it would be a dead entry."""
    from torch._C import DispatchKey

    from zoo_runner.engine import RANDOM_OPS

    composite = []
    for op in sorted(RANDOM_OPS):
        packet = getattr(torch.ops.aten, op.split("::", 1)[1])
        overloads = [getattr(packet, name) for name in packet.overloads()]
        if all(o.has_kernel_for_dispatch_key(DispatchKey.CompositeImplicitAutograd) for o in overloads):
            composite.append(op)
    assert composite == []


def test_a_deterministic_model_passes_the_determinism_check():
    r = validate_here(ValidationRequest("arch:BertModel", backend="cpu", reference_cache=""))
    assert r["status"] == "pass" and r["reason"] is None, _explain(r)
    assert (r["precision"], r["details"]["precision_source"], r["details"]["strict_fp32"]) == ("fp32", "default", True)


def test_the_precision_reference_is_cached_under_its_own_key(tmp_path):
    req = ValidationRequest(
        "arch:GPT2Model", backend="cpu+zoo_bf16_matmul", precision="bf16", reference_cache=str(tmp_path)
    )
    first, second = validate_here(req), validate_here(req)
    assert (
        first["details"]["reference_precision_cache"] == "stored"
        and second["details"]["reference_precision_cache"] == "hit"
    )
    assert first["details"]["reference_cache"] == "stored" and second["details"]["reference_cache"] == "hit"
    assert second["status"] == first["status"] == "pass"
    assert second["metrics"]["rmse_ratio"] == first["metrics"]["rmse_ratio"]
    assert len(list(tmp_path.glob("*.safetensors"))) == 2  # fp32/fp64 and bf16: two entries


# -- declarations ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "flags, expected",
    [
        ("", "fp32"),  # --auto-cast defaults to none since Neuron 2.27 (AWS release-notes/components/compiler)
        ("-O1", "fp32"),
        ("--auto-cast=none", "fp32"),
        ("--auto-cast none -O1", "fp32"),
        ("--auto-cast=matmult", "bf16"),  # --auto-cast-type defaults to bf16
        ("--auto-cast matmult --auto-cast-type tf32", "tf32"),
        ("--auto-cast=matmult --auto-cast-type=fp16", "fp16"),
        ("--auto-cast=all", "bf16"),
        ("--auto-cast=matmult --auto-cast=none", "fp32"),  # the last one given counts
    ],
)
def test_neuron_declares_fp32_unless_auto_cast_asks_for_a_cast(monkeypatch, flags, expected):
    monkeypatch.setenv("NEURON_CC_FLAGS", flags)
    assert neuron_precision(BackendSpec("neuron", "neuron")) == expected
    assert declared_precision(BackendSpec("neuron")) == expected


def test_resolution_order_and_bad_values():
    plain = BackendSpec("cpu", "inductor")
    assert resolve("auto", plain) == ("fp32", "default")
    assert resolve("tf32", plain) == ("tf32", "flag")
    assert resolve(None, BackendSpec("cpu", None, "bfloat16")) == ("bf16", "default")
    with pytest.raises(UnknownBackend, match="unknown precision"):
        resolve("fp8", plain)
    with pytest.raises(UnknownBackend, match="computes in bfloat16 throughout"):
        resolve("fp32", BackendSpec("cpu", None, "bfloat16"))


def test_tf32_rounding_keeps_ten_mantissa_bits_to_nearest_even():
    one = torch.tensor([1.0])
    ulp = 2.0**-10  # TF32's spacing at 1.0
    x = torch.tensor(
        [
            1.0 + ulp * 0.49,
            1.0 + ulp * 0.51,
            1.0 + ulp * 1.5,
            1.0 + ulp * 2.5,
            -(1.0 + ulp * 0.51),
            float("inf"),
            float("nan"),
        ]
    )
    y = round_to_tf32(x)
    assert y[:5].tolist() == [1.0, 1.0 + ulp, 1.0 + 2 * ulp, 1.0 + 2 * ulp, -(1.0 + ulp)]  # ties go to even
    assert torch.isinf(y[5]) and torch.isnan(y[6])
    assert torch.equal(round_to_tf32(one), one)


def test_the_tf32_reference_rounds_matmul_inputs_only():
    a, b, bias = torch.randn(8, 16), torch.randn(16, 4), torch.randn(4) * 1e-4
    with computing_at("tf32"):
        got = torch.addmm(bias, a, b)
    assert torch.equal(got, torch.addmm(bias, round_to_tf32(a), round_to_tf32(b)))
    assert not torch.equal(got, torch.addmm(bias, a, b))


def test_a_mismatch_names_the_output_the_budget_its_precision_and_how_far_over():
    ref64 = {"logits": torch.linspace(-1, 1, 64, dtype=torch.float64)}
    ref16 = {"logits": ref64["logits"].to(torch.bfloat16).float()}
    good = {"logits": ref64["logits"].float()}
    assert compare(good, ref16, ref64, precision="bf16").ok
    bad = compare({"logits": good["logits"] * 1.25}, ref16, ref64, precision="bf16")
    assert not bad.ok
    assert (
        bad.problems[0].startswith("logits: RMSE")
        and "exceeds the bf16 budget" in bad.problems[0]
        and "x over" in bad.problems[0]
    )


def test_cli_reports_precision_and_its_source(zoo):
    proc = zoo(["validate", "arch:GPT2Model", "--backend", "cpu+aot_eager", "--tier", "tiny", "--json"])
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["precision"] == "fp32" and result["details"]["precision_source"] == "default"
    assert result["status"] == "pass"
