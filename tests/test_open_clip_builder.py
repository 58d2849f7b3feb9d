"""OpenCLIP models (the open_clip extra): built by OpenCLIP from the repo's open_clip_config.json,
with OpenCLIP's own towers shrunk and their layout kept; through the Hub stand-in as users run it."""

from __future__ import annotations

import importlib.util
import json

import pytest

from tests.conftest import validate_through
from tests.hub_standin import RECORDED_DIR, fake_sha
from zoo_runner.builders.open_clip_builder import OpenClipBuilder, shrink_model_cfg
from zoo_runner.engine import validate_here
from zoo_runner.exceptions import NotSupported
from zoo_runner.request import ValidationRequest


def _config(repo: str) -> dict:
    with open(f"{RECORDED_DIR}/{repo}/open_clip_config.json") as f:
        return json.load(f)


VIT_B_32 = "laion/CLIP-ViT-B-32-laion2B-s34B-b79K"


def test_shrinking_keeps_the_layout():  # pure Python: runs without the extra
    full = _config("laion/CLIP-ViT-bigG-14-laion2B-39B-b160k")["model_cfg"]
    tiny = shrink_model_cfg(full)
    v, t = tiny["vision_cfg"], tiny["text_cfg"]
    assert v["patch_size"] == full["vision_cfg"]["patch_size"] and v["image_size"] % v["patch_size"] == 0
    assert v["layers"] <= 2 and v["width"] <= 64 and v["width"] % v["head_width"] == 0
    assert t["context_length"] == full["text_cfg"]["context_length"] and t["width"] % t["heads"] == 0
    assert tiny["embed_dim"] <= 64
    timm_tower = shrink_model_cfg(_config("laion/CLIP-convnext_base_w-laion2B-s13B-b82K-augreg")["model_cfg"])
    assert timm_tower["vision_cfg"]["timm_model_name"] == "convnext_base"  # shrunk by timm_shrink, not here


needs_open_clip = pytest.mark.skipif(
    importlib.util.find_spec("open_clip") is None,
    reason="the open_clip extra is not installed (bash scripts/setup.sh dev open_clip)",
)


def _req(repo: str, backend: str = "cpu", **kw) -> ValidationRequest:
    return ValidationRequest(
        repo, backend=backend, library="open_clip", config=_config(repo), config_source="test", reference_cache="", **kw
    )


@needs_open_clip
@pytest.mark.parametrize("repo", [VIT_B_32, "timm/ViT-B-16-SigLIP-i18n-256"])
def test_open_clip_models_validate(repo):
    r = validate_here(_req(repo))
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "open_clip" and r["architecture"].startswith("CLIP")
    assert {"image", "text"} <= set(r["details"]["input_shapes"][0])


@needs_open_clip
def test_a_backend_bug_in_a_clip_tower_is_a_mismatch(monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = validate_here(_req(VIT_B_32, backend="cpu+zoo_bug_drop_bias", plugins="tests.plugins.buggy_backends"))
    assert r["status"] == "mismatch", r


@needs_open_clip
def test_an_open_clip_repo_through_the_stand_in(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, VIT_B_32)
    assert r["status"] == "pass" and r["library"] == "open_clip", r["error"]


CONVNEXT_W = "laion/CLIP-convnext_base_w-laion2B-s13B-b82K-augreg"


@needs_open_clip
@pytest.mark.parametrize("tier", ["tiny", "census"])
def test_a_timm_vision_tower_is_shrunk_and_passes_on_cpu(tier):
    import timm
    import torch

    with torch.device("meta"):
        whole_tower = sum(p.numel() for p in timm.create_model("convnext_base").parameters())
    r = validate_here(_req(CONVNEXT_W, tier=tier))
    assert r["status"] == "pass", r["error"]
    assert r["architecture"] == "CLIP[convnext_base]"
    shrink = r["details"]["timm_shrink"]
    assert shrink["built"] == "shrunk" and shrink["overrides"]["depths"] == [1, 1, 1, 1], shrink
    assert r["details"]["parameters"] * 50 < whole_tower


@needs_open_clip
def test_the_timm_tower_shrink_is_in_the_fingerprint_and_not_at_full():
    from zoo_runner.builders import get_builder

    plan = get_builder("open_clip").plan(_req(CONVNEXT_W, tier="census"))
    assert plan.timm_shrink
    shrunk = plan.fingerprint("open_clip", "census")
    plan.timm_shrink = None
    assert plan.fingerprint("open_clip", "census") != shrunk
    assert get_builder("open_clip").plan(_req(CONVNEXT_W, tier="full")).timm_shrink is None
    assert get_builder("open_clip").plan(_req(VIT_B_32, tier="census")).timm_shrink is None  # OpenCLIP's own tower


@needs_open_clip
def test_a_timm_tower_whose_shrunk_build_raises_is_built_whole(monkeypatch):
    from zoo_runner.builders import open_clip_builder

    monkeypatch.setattr(open_clip_builder, "plan_shrink", lambda name, **kw: {"depths": (1, 1)})  # 4 stages: raises
    r = validate_here(_req("timm/ViT-B-16-SigLIP-i18n-256", tier="census"))
    assert r["status"] == "pass", r["error"]
    assert r["details"]["timm_shrink"]["built"] == "whole" and "raised" in r["details"]["timm_shrink"]["why"]


ROBERTA_TEXT = "laion/CLIP-ViT-B-32-roberta-base-laion2B-s12B-b32k"  # text_cfg.hf_model_name: "roberta-base"


def test_a_transformers_text_tower_config_is_fetched_from_the_repo_it_moved_to_and_shrunk():  # pure Python
    cfg = _config(ROBERTA_TEXT)
    # the legacy id transformers moved: the parent fetches the repo's config.json where it lives now
    assert OpenClipBuilder().extra_repo_files(cfg) == [("FacebookAI/roberta-base", None, "config.json")]
    assert OpenClipBuilder().extra_repo_files(_config(VIT_B_32)) == []  # OpenCLIP's own text tower
    extras = {"FacebookAI/roberta-base/config.json": {"model_type": "roberta", "architectures": ["RobertaForMaskedLM"]}}
    plan = OpenClipBuilder().plan(ValidationRequest(ROBERTA_TEXT, tier="tiny", config=cfg, extras=extras))
    text = plan.text_config  # transformers' defaults for roberta, shrunk as any transformers config is
    assert text["model_type"] == "roberta" and text["hidden_size"] <= 64 and text["num_hidden_layers"] <= 2
    assert text["hidden_size"] % text["num_attention_heads"] == 0 and plan.config["model_cfg"]["embed_dim"] <= 64
    assert plan.config["model_cfg"]["text_cfg"]["hf_model_name"] == "roberta-base"  # the repo's own config
    assert plan.architecture == "CLIP+roberta"
    full = OpenClipBuilder().plan(ValidationRequest(ROBERTA_TEXT, tier="full", config=cfg, extras=extras))
    assert full.text_config["hidden_size"] == 768  # the full tier: the tower as its repo publishes it
    tiny = plan.fingerprint("open_clip", "tiny")
    plan.text_config = {**plan.text_config, "num_hidden_layers": 1}
    assert plan.fingerprint("open_clip", "tiny") != tiny  # the tower's config is in the fingerprint
    with pytest.raises(NotSupported, match="no config.json of FacebookAI/roberta-base was fetched"):
        OpenClipBuilder().plan(ValidationRequest(ROBERTA_TEXT, tier="tiny", config=cfg))


@needs_open_clip
def test_an_open_clip_repo_with_a_transformers_text_tower_through_the_stand_in(zoo, snapshot_hub, tmp_path):
    """The parent fetches roberta-base's config.json (FacebookAI/roberta-base) with the real client;
    the model process builds the shrunk tower from it, offline."""
    r = validate_through(zoo, snapshot_hub, tmp_path, ROBERTA_TEXT)
    assert r["status"] == "pass" and r["library"] == "open_clip", r["error"]
    assert r["architecture"] == "CLIP+roberta"
    sha = fake_sha("FacebookAI/roberta-base")  # the commit the stand-in serves the repo at
    assert r["details"]["parameters"] < 5_000_000  # roberta-base alone is 125M: the tower was shrunk
    # which repo and commit the tower's config came from: the parent's own record of what it fetched
    assert r["details"]["other_repo_files"] == {"FacebookAI/roberta-base/config.json": sha}
