"""The diffusers builder: a pipeline's denoiser and VAE decoder, from model_index.json and the
components' configs, shrunk with their block layout kept; through the Hub stand-in as users run it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import validate_through
from tests.hub_standin import DIFFUSERS_PIPELINES
from zoo_runner.builders.diffusers_builder import shrink_component
from zoo_runner.engine import validate_here
from zoo_runner.request import ValidationRequest

pytest.importorskip("diffusers", reason="diffusers is in the dev extra")


def _req(pipeline: str, backend: str = "cpu", **kw) -> ValidationRequest:
    comps = DIFFUSERS_PIPELINES[pipeline]
    index = {"_class_name": pipeline, **{n: ["diffusers", c["_class_name"]] for n, c in comps.items()}}
    extras = {f"{n}/config.json": c for n, c in comps.items()}
    return ValidationRequest(
        f"test/{pipeline}",
        backend=backend,
        library="diffusers",
        config=index,
        extras=extras,
        config_source="test",
        reference_cache="",
        **kw,
    )


def test_shrinking_keeps_the_block_layout_and_the_couplings():
    sdxl = shrink_component(DIFFUSERS_PIPELINES["StableDiffusionXLPipeline"]["unet"])
    assert sdxl["down_block_types"] == DIFFUSERS_PIPELINES["StableDiffusionXLPipeline"]["unet"]["down_block_types"]
    assert len(sdxl["block_out_channels"]) == 3 and max(sdxl["block_out_channels"]) <= 64
    assert (
        sdxl["projection_class_embeddings_input_dim"]
        == 6 * sdxl["addition_time_embed_dim"] + sdxl["cross_attention_dim"]
    )
    flux = shrink_component(DIFFUSERS_PIPELINES["FluxPipeline"]["transformer"])
    assert (
        sum(flux["axes_dims_rope"]) == flux["attention_head_dim"]
        and flux["num_layers"] == flux["num_single_layers"] == 1
    )
    assert shrink_component(DIFFUSERS_PIPELINES["StableDiffusionInpaintPipeline"]["unet"])["in_channels"] == 9


@pytest.mark.parametrize(
    "pipeline",
    [
        "StableDiffusionPipeline",
        "StableDiffusionXLPipeline",
        "FluxPipeline",
        "StableDiffusion3Pipeline",
        "LatentConsistencyModelPipeline",
    ],
)
def test_pipelines_validate_denoiser_and_decoder(pipeline):
    r = validate_here(_req(pipeline))
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "diffusers" and r["architecture"].endswith("+AutoencoderKL")
    shapes = r["details"]["input_shapes"]
    assert len(shapes) == 2 and shapes[0] != shapes[1] and "latents" in shapes[0]
    assert r["details"]["parameters"] < 20_000_000  # shrunk, not the real multi-billion denoiser


def test_image_conditioned_and_video_pipelines_validate():
    """Zero-1-to-3 (an SD UNet taking the noisy and the conditioning latents) and Stable Video
    Diffusion (a spatio-temporal UNet over frames with its added time ids, and a VAE decoding frames
    together)."""
    r = validate_here(_req("Zero123Pipeline"))
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == "UNet2DConditionModel+AutoencoderKL"
    assert r["details"]["input_shapes"][0]["sample"][1] == 8
    r = validate_here(_req("StableVideoDiffusionPipeline"))
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == "UNetSpatioTemporalConditionModel+AutoencoderKLTemporalDecoder"
    shapes = r["details"]["input_shapes"]
    assert shapes[0]["sample"][:3] == [1, 2, 8] and shapes[1]["sample"][:3] == [2, 2, 8]  # batch, frames, channels
    assert shapes[0]["added_time_ids"] == [1, 3] and shapes[0]["encoder_hidden_states"][1] == 1
    assert r["details"]["parameters"] < 20_000_000


def test_a_dit_over_two_text_encoders_with_rotary_positions_validates():
    """HunyuanDiT: CLIP and mT5 text of the fixed lengths its padding parameter has, its size and
    style conditioning, and its 2-D rotary image positions (as the pipeline computes them)."""
    r = validate_here(_req("HunyuanDiTPipeline"))
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == "HunyuanDiT2DModel+AutoencoderKL"
    shapes = r["details"]["input_shapes"]
    assert shapes[0]["encoder_hidden_states_t5"][1] == shapes[1]["encoder_hidden_states_t5"][1]  # its fixed length
    assert shapes[0]["image_rotary_cos"][0] == (16 // 2) ** 2 and shapes[1]["image_rotary_cos"][0] == (24 // 2) ** 2
    assert shapes[1]["image_meta_size"] == [2, 6] and shapes[1]["style"] == [2]
    assert r["details"]["parameters"] < 20_000_000


def test_a_backend_bug_in_a_denoiser_is_a_mismatch(monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = validate_here(
        _req("StableDiffusionPipeline", backend="cpu+zoo_bug_drop_bias", plugins="tests.plugins.buggy_backends")
    )
    assert r["status"] == "mismatch", r


def test_a_component_outside_diffusers_is_refused():
    req = ValidationRequest(
        "org/custom", backend="cpu", library="diffusers", config={"unet": ["my_package", "MyUNet"]}, reference_cache=""
    )
    r = validate_here(req)
    assert r["status"] == "unsupported" and r["reason"] == "remote_code"


def test_a_hub_pipeline_through_the_stand_in(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, "stable-diffusion-v1-5/stable-diffusion-v1-5")
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == "UNet2DConditionModel+AutoencoderKL" and r["task"] == "text-to-image"


def _component(repo: str) -> dict:
    from tests.hub_standin import RECORDED_DIR

    with open(f"{RECORDED_DIR}/{repo}/config.json") as f:
        return json.load(f)


@pytest.mark.parametrize(
    ("repo", "architecture", "inputs"),
    [
        ("stabilityai/sdxl-vae", "AutoencoderKL", {"latents"}),
        (
            "lllyasviel/sd-controlnet-canny",
            "ControlNetModel",
            {"sample", "timestep", "controlnet_cond", "encoder_hidden_states"},
        ),
    ],
)
def test_a_repo_holding_one_component_validates_it(repo, architecture, inputs):
    req = ValidationRequest(
        repo, backend="cpu", library="diffusers", config=_component(repo), config_source="test", reference_cache=""
    )
    r = validate_here(req)
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == architecture
    assert set(r["details"]["input_shapes"][0]) == inputs
    assert r["details"]["parameters"] < 20_000_000


def test_a_backend_bug_in_a_controlnet_is_a_mismatch(monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    repo = "lllyasviel/sd-controlnet-canny"
    req = ValidationRequest(
        repo,
        backend="cpu+zoo_bug_drop_bias",
        library="diffusers",
        config=_component(repo),
        config_source="test",
        reference_cache="",
        plugins="tests.plugins.buggy_backends",
    )
    assert validate_here(req)["status"] == "mismatch"


def test_a_single_vae_repo_through_the_stand_in(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, "stabilityai/sd-vae-ft-mse")
    assert r["status"] == "pass" and r["architecture"] == "AutoencoderKL", r["error"]
