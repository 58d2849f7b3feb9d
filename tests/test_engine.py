"""The engine builds, references, runs and compares for real (in this process, CPU backends)."""

from __future__ import annotations

import pytest

from zoo_runner.engine import validate_here
from zoo_runner.exceptions import UnknownModel
from zoo_runner.request import ValidationRequest

SPEC_KEYS = {
    "model_id",
    "revision",
    "tier",
    "backend",
    "device",
    "dtype",
    "status",
    "reason",
    "fingerprint",
    "library",
    "architecture",
    "task",
    "metrics",
    "fallback_ops",
    "op_census",
    "error",
    "versions",
    "repro",
    "started_at",
    "duration_s",
}
METRIC_KEYS = {
    "max_abs_diff",
    "max_rel_diff",
    "rmse_ratio",
    "cosine",
    "compile_s",
    "reference_ms",
    "target_ms",
    "peak_mem_bytes",
    "graph_breaks",
}


@pytest.mark.parametrize(
    "arch",
    [
        "BertModel",
        "GPT2LMHeadModel",
        "T5ForConditionalGeneration",
        "ViTForImageClassification",
        "WhisperForConditionalGeneration",
        "CLIPModel",
        "Wav2Vec2ForCTC",
        "LlamaForCausalLM",
    ],
)
def test_popular_architectures_pass_on_aot_eager(arch):
    r = validate_here(ValidationRequest(f"arch:{arch}", backend="cpu+aot_eager"))
    assert r["status"] == "pass", r["error"]
    assert set(r) >= SPEC_KEYS and set(r["metrics"]) == METRIC_KEYS
    assert r["metrics"]["compile_s"] is not None and r["metrics"]["graph_breaks"] is not None
    assert r["op_census"] and all(k.startswith(("aten::", "prims::")) for k in r["op_census"])
    assert len(r["details"]["input_shapes"]) == 2 and r["details"]["input_shapes"][0] != r["details"]["input_shapes"][1]


def test_result_carries_fingerprint_versions_and_repro():
    r = validate_here(ValidationRequest("arch:BertModel", backend="cpu"))
    assert r["status"] == "pass"
    assert len(r["fingerprint"]) == 24
    assert {"torch", "transformers", "zoo"} <= set(r["versions"])
    assert r["repro"] == "zoo validate arch:BertModel --backend cpu --tier tiny --json"


def test_every_row_says_where_its_time_went():
    heard = []
    r = validate_here(ValidationRequest("arch:BertModel", backend="cpu"), stage=heard.append)
    stages = r["details"]["stage_s"]
    assert heard == ["build", "reference", "target", "compare"]  # the callback still hears every stage
    assert list(stages) == ["setup", *heard] and all(v >= 0 for v in stages.values())
    assert stages["reference"] > 0 and sum(stages.values()) <= r["duration_s"] + 1e-3
    census = validate_here(ValidationRequest("arch:BertModel", backend="cpu", tier="census"))["details"]["stage_s"]
    assert list(census) == ["setup", "build", "reference"]  # no target run at the census tier
    failed = validate_here(ValidationRequest("arch:BertModel", backend="cpu", library="no-such-library"))
    assert failed["status"] == "unsupported"
    assert list(failed["details"]["stage_s"]) == ["setup", "build"]  # a row that stopped early says where


def test_fingerprint_is_deterministic_and_graph_specific():
    a = validate_here(ValidationRequest("arch:BertModel", backend="cpu"))["fingerprint"]
    b = validate_here(ValidationRequest("arch:BertModel", backend="cpu"))["fingerprint"]
    c = validate_here(ValidationRequest("arch:BertForMaskedLM", backend="cpu"))["fingerprint"]
    assert a == b != c


def test_weights_are_seeded_non_trivial_and_exercise_biases():
    from zoo_runner.builders import get_builder

    built = get_builder("transformers").build(ValidationRequest("arch:BertModel"))
    biases = [p for n, p in built.model.named_parameters() if n.endswith("bias")]
    assert biases and all(float(b.abs().max()) > 0 for b in biases)
    again = get_builder("transformers").build(ValidationRequest("arch:BertModel"))
    for (n1, p1), (n2, p2) in zip(built.model.named_parameters(), again.model.named_parameters()):
        assert n1 == n2 and bool((p1 == p2).all())


def test_census_tier_records_ops_without_a_target_run():
    r = validate_here(ValidationRequest("arch:GPT2LMHeadModel", backend="cpu", tier="census"))
    assert r["details"]["reference64"].startswith("not computed at the census tier")  # nothing to budget
    assert r["status"] == "pass"
    assert r["op_census"].get("aten::addmm", 0) > 0
    assert r["metrics"]["target_ms"] is None


def test_unknown_architecture_is_bad_input():
    with pytest.raises(UnknownModel):
        validate_here(ValidationRequest("arch:NoSuchModelAnywhere", backend="cpu"))


def test_a_model_that_draws_random_numbers_gets_the_same_draws_as_its_reference(monkeypatch):
    """ViLT samples image patches at random unless its quirk turns that off: with the row removed,
    the forward is random, and the seeded reference and target runs still agree on CPU."""
    from zoo_runner import quirks

    monkeypatch.setitem(quirks.QUIRKS, "vilt", quirks.Quirk("test: sampling left on", extra_inputs=("pixel_values",)))
    r = validate_here(ValidationRequest("arch:ViltModel", backend="cpu", reference_cache=""))
    assert r["status"] == "pass", r["error"]


def test_an_fp64_reference_with_nan_where_fp32_is_finite_is_not_used():
    import torch

    from zoo_runner.engine import _reference64

    class Fp64Bug(torch.nn.Module):  # like a mask built from float32's min, which overflows in fp64 code paths
        def forward(self, x):
            return {"y": x * float("nan") if x.dtype == torch.float64 else x * 2}

    inputs = [{"x": torch.ones(3)}]
    ref32 = [{"y": torch.full((3,), 2.0)}]
    details: dict = {}
    assert _reference64(Fp64Bug(), inputs, ref32, details) is ref32
    assert "unusable" in details["reference64"]


@pytest.mark.parametrize("arch", ["LlavaForConditionalGeneration", "Qwen2VLForConditionalGeneration"])
def test_vision_language_models_get_one_image_token_per_image_embedding(arch):
    """The text holds as many image placeholders as the vision tower makes embeddings (576 for
    LLaVA's 336 px CLIP tower, 4 for a 4x4-patch Qwen2-VL grid after its 2x2 merge)."""
    r = validate_here(ValidationRequest(f"arch:{arch}", backend="cpu", reference_cache=""))
    assert r["status"] == "pass", r["error"]
    first = r["details"]["input_shapes"][0]
    assert first["input_ids"][1] > 16 and first["attention_mask"] == first["input_ids"]


@pytest.mark.parametrize(
    "arch",
    [
        "OneFormerForUniversalSegmentation",
        "MusicgenForConditionalGeneration",
        "EncodecModel",
        "Owlv2ForObjectDetection",
        "SamModel",
        "RTDetrForObjectDetection",
        "DepthAnythingForDepthEstimation",
        "Mask2FormerForUniversalSegmentation",
        "Zamba2ForCausalLM",
        "DeepseekV3ForCausalLM",
    ],
)
def test_architectures_with_coupled_sizes_or_unusual_inputs_build_and_pass(arch):
    """Rows of the quirks table and generic shrink rules at work: list main inputs (OneFormer),
    per-codebook decoder ids (MusicGen), (batch, channels, samples) audio (EnCodec), widths a
    head compares (OWLv2, SAM), backbone outputs a neck expects (RT-DETR, Depth Anything, Swin in
    Mask2Former), Mamba-2 heads (Zamba2), latent attention (DeepSeek-V3)."""
    r = validate_here(ValidationRequest(f"arch:{arch}", backend="cpu", reference_cache=""))
    assert r["status"] == "pass", r["error"]


@pytest.mark.parametrize(
    ("arch", "pixel_dims", "extra"),
    [
        ("LlavaNextForConditionalGeneration", 5, "image_sizes"),  # any-resolution tiles: (batch, tiles, C, H, W)
        ("LlavaOnevisionForConditionalGeneration", 5, "image_sizes"),
        (
            "MllamaForConditionalGeneration",
            6,
            "cross_attention_mask",
        ),  # (batch, images, tiles, C, H, W), cross-attended
        ("SmolVLMForConditionalGeneration", 5, None),  # (batch, images, C, H, W)
        ("Gemma3ForConditionalGeneration", 4, None),
        ("Blip2ForConditionalGeneration", 4, None),
    ],
)
def test_vision_language_models_get_the_pixel_layout_their_processor_makes(arch, pixel_dims, extra):
    r = validate_here(ValidationRequest(f"arch:{arch}", backend="cpu", reference_cache=""))
    assert r["status"] == "pass", r["error"]
    first = r["details"]["input_shapes"][0]
    assert len(first["pixel_values"]) == pixel_dims
    if extra:
        assert extra in first
    else:  # image placeholders, one per image embedding, were put in the text
        assert first["input_ids"][1] > 16


def test_pose_estimators_get_non_square_images():
    r = validate_here(ValidationRequest("arch:VitPoseForPoseEstimation", backend="cpu", reference_cache=""))
    assert r["status"] == "pass", r["error"]
    _, _, h, w = r["details"]["input_shapes"][0]["pixel_values"]
    assert (h, w) == (64, 48)


def test_a_config_no_auto_class_maps_finds_its_model_class():
    """VitMatte has no Auto class: a Hub config naming no architecture still builds the model."""
    req = ValidationRequest(
        "org/vitmatte", backend="cpu", config={"model_type": "vitmatte"}, config_source="test", reference_cache=""
    )
    r = validate_here(req)
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == "VitMatteForImageMatting"


def test_graph_breaks_dynamo_files_as_unimplemented_are_counted_with_their_reason():
    import torch
    from torch import _dynamo

    from zoo_runner.engine import _graph_breaks

    class Recurrent(torch.nn.Module):  # dynamo will not trace an LSTM: it breaks the graph there
        def __init__(self) -> None:
            super().__init__()
            self.lstm = torch.nn.LSTM(4, 4, batch_first=True)
            self.head = torch.nn.Linear(4, 2)

        def forward(self, x):
            return self.head(self.lstm(x.relu())[0])

    _dynamo.reset()
    _dynamo.utils.counters.clear()
    with torch.no_grad():
        torch.compile(Recurrent(), backend="eager")(torch.randn(1, 3, 4))
    count, reasons = _graph_breaks()
    assert count >= 1 and any("LSTM" in r for r in reasons)


@pytest.mark.parametrize(
    ("arch", "input_name", "dims"),
    [
        ("VJEPA2Model", "pixel_values_videos", 5),  # a video clip
        ("VideoMAEForVideoClassification", "pixel_values", 5),
        ("XCLIPModel", "pixel_values", 5),
        ("Siglip2Model", "spatial_shapes", 2),  # NaFlex: flattened patches with their grid
        ("TimesFmModelForPrediction", "past_values", 2),  # one context series a row
        ("ParakeetForCTC", "input_features", 3),  # (batch, frames, mel bins)
    ],
)
def test_video_naflex_series_and_conformer_inputs(arch, input_name, dims):
    r = validate_here(ValidationRequest(f"arch:{arch}", backend="cpu", reference_cache=""))
    assert r["status"] == "pass", r["error"]
    assert len(r["details"]["input_shapes"][0][input_name]) == dims


def test_the_backend_gets_its_own_copy_of_the_model_unless_there_is_no_room(monkeypatch):
    import zoo_runner.engine as engine

    seen: dict[str, object] = {}
    run_target, run_references = engine._run_target, engine._run_references
    monkeypatch.setattr(
        engine,
        "_run_references",
        lambda req, spec, model, *a: seen.update(ref=model) or run_references(req, spec, model, *a),
    )
    monkeypatch.setattr(
        engine,
        "_run_target",
        lambda req, spec, model, *a: seen.update(target=model) or run_target(req, spec, model, *a),
    )
    r = validate_here(ValidationRequest("arch:BertModel", backend="cpu"))
    assert r["status"] == "pass" and "target_model" not in r["details"]
    assert seen["target"] is not seen["ref"]
    # a budget too small for a second copy: the backend runs the reference's model, and the row says so
    r = validate_here(ValidationRequest("arch:BertModel", backend="cpu", memory_gb=1e-4))
    assert r["status"] == "pass" and r["details"]["target_model"] == "the reference's (no room for a copy)"
    assert seen["target"] is seen["ref"]
