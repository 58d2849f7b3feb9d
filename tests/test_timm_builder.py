"""The timm builder (the ``timm`` extra): plans from a timm config.json, builds with timm.

timm needs torchvision, which here exists only as a 5.5 GB CUDA build of torch; CI does not
install the extra, so the tests that build models run where it is installed
(``bash scripts/setup.sh dev timm``) and the others check the plan and the missing-extra path.
"""

from __future__ import annotations

import importlib.util

import pytest

from zoo_runner.builders import get_builder
from zoo_runner.engine import validate_here
from zoo_runner.request import ValidationRequest

HAVE_TIMM = importlib.util.find_spec("timm") is not None
needs_timm = pytest.mark.skipif(
    not HAVE_TIMM, reason="the timm extra is not installed (bash scripts/setup.sh dev timm)"
)


def _req(arch: str, **cfg) -> ValidationRequest:
    return ValidationRequest(
        f"timm/{arch}.test",
        backend="cpu",
        library="timm",
        config={"architecture": arch, "num_classes": 1000, **cfg},
        config_source="test",
        reference_cache="",
    )


def test_plan_reads_the_architecture_classes_and_input_size_from_the_config():
    plan = get_builder("timm").plan(
        _req(
            "vit_base_patch16_224",
            pretrained_cfg={"input_size": [3, 224, 224], "fixed_input_size": True},
            num_classes=10,
        )
    )
    assert (plan.architecture, plan.num_classes, plan.in_chans, plan.fixed_input_size) == (
        "vit_base_patch16_224",
        10,
        3,
        True,
    )
    assert plan.shapes == [{"batch": 1, "size": 64}, {"batch": 2, "size": 64}]
    conv = get_builder("timm").plan(_req("resnet50"))
    assert conv.shapes[0] != conv.shapes[1] and conv.fingerprint("timm", "tiny") != plan.fingerprint("timm", "tiny")
    assert get_builder("timm").plan(_req("resnet50")).fingerprint("timm", "tiny") == conv.fingerprint("timm", "tiny")


def test_a_config_without_an_architecture_is_unsupported():
    r = validate_here(
        ValidationRequest("org/odd", backend="cpu", library="timm", config={"num_classes": 3}, reference_cache="")
    )
    assert r["status"] == "unsupported" and r["reason"] == "library_unsupported"


@pytest.mark.skipif(HAVE_TIMM, reason="checks the path where the timm extra is missing")
def test_without_the_extra_timm_models_are_unsupported_with_the_install_hint():
    r = validate_here(_req("resnet18"))
    assert r["status"] == "unsupported" and r["reason"] == "library_unsupported"
    assert "zoo[timm]" in r["error"]["message"]


@needs_timm
@pytest.mark.parametrize(
    ("arch", "built"),
    [
        ("resnet18", "shrunk"),
        ("mobilenetv3_small_100", "whole"),  # its widths come from block_args, which its entrypoint computes
        ("efficientnet_b0", "whole"),
        ("convnext_atto", "shrunk"),
        ("vit_tiny_patch16_224", "shrunk"),
        ("deit_tiny_patch16_224", "shrunk"),
    ],
)
def test_timm_architectures_validate_on_cpu(arch, built):
    r = validate_here(_req(arch))
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "timm" and r["architecture"] == arch and r["task"] == "image-classification"
    assert r["details"]["timm_shrink"]["built"] == built, r["details"]["timm_shrink"]
    assert len(r["details"]["input_shapes"]) == 2 and r["details"]["input_shapes"][0] != r["details"]["input_shapes"][1]
    assert (
        r["op_census"].get("aten::convolution", 0)
        + r["op_census"].get("aten::addmm", 0)
        + r["op_census"].get("aten::linear", 0)
        > 0
    )


@needs_timm
def test_a_dropped_bias_on_a_timm_model_is_a_mismatch(monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = validate_here(
        ValidationRequest(
            "timm/resnet18.test",
            backend="cpu+zoo_bug_drop_bias",
            library="timm",
            config={"architecture": "resnet18", "num_classes": 1000},
            plugins="tests.plugins.buggy_backends",
            reference_cache="",
        )
    )
    assert r["status"] == "mismatch", r


def _whole_parameters(arch: str) -> int:
    import timm
    import torch

    with torch.device("meta"):  # counted without allocating the whole model
        return sum(p.numel() for p in timm.create_model(arch, num_classes=1000).parameters())


@needs_timm
@pytest.mark.parametrize("arch", ["vit_large_patch14_clip_224", "convnext_base", "swin_tiny_patch4_window7_224"])
def test_census_shrinks_a_timm_model_and_it_passes_on_cpu(arch):
    req = _req(arch, pretrained_cfg={"input_size": [3, 224, 224]})
    req.tier = "census"
    r = validate_here(req)
    assert r["status"] == "pass", r["error"]
    shrink = r["details"]["timm_shrink"]
    assert shrink["built"] == "shrunk" and (shrink["overrides"].get("depth") == 2 or "depths" in shrink["overrides"])
    assert r["details"]["parameters"] * 10 < _whole_parameters(arch)
    tiny = _req(arch)
    assert validate_here(tiny)["status"] == "pass"  # tiny runs the same shrunk model through the backend


@needs_timm
def test_the_shrink_keeps_heads_dividing_the_width_and_the_head_width():
    from zoo_runner.builders.timm_shrink import constructor_args, shrink_overrides

    whole = constructor_args("vit_so400m_patch14_siglip_384")[1]
    small = shrink_overrides("vit_so400m_patch14_siglip_384")
    assert small["depth"] == 2 and small["embed_dim"] % small["num_heads"] == 0 and small["num_heads"] >= 2
    assert small["embed_dim"] // small["num_heads"] == whole["embed_dim"] // whole["num_heads"]
    assert not {"mlp_ratio", "patch_size", "img_size", "num_classes", "in_chans"} & set(small)
    conv = shrink_overrides("convnext_base", num_classes=10)
    assert conv["depths"] == (1, 1, 1, 1) and min(conv["dims"]) >= 16 and "num_classes" not in conv


@needs_timm
def test_the_full_tier_builds_the_whole_timm_model(tmp_path):
    import timm
    from safetensors.torch import save_file

    whole = timm.create_model("resnet18", num_classes=1000)
    save_file(whole.state_dict(), str(tmp_path / "model.safetensors"))
    req = _req("resnet18", pretrained_cfg={"input_size": [3, 64, 64]})
    req.tier, req.files_dir = "full", str(tmp_path)
    plan = get_builder("timm").plan(req)
    assert plan.shrink is None
    r = validate_here(req)
    assert r["status"] == "pass", r["error"]
    assert (
        r["details"]["parameters"] == sum(p.numel() for p in whole.parameters()) and "timm_shrink" not in r["details"]
    )


@needs_timm
def test_the_shrunk_fingerprint_is_not_the_whole_ones():
    req = _req("convnext_atto")
    req.tier = "census"
    plan = get_builder("timm").plan(req)
    assert plan.shrink
    shrunk = plan.fingerprint("timm", "census")
    plan.shrink = None
    assert plan.fingerprint("timm", "census") != shrunk


@needs_timm
def test_a_shrunk_build_that_raises_falls_back_to_the_whole_model(monkeypatch):
    from zoo_runner.builders import timm_builder

    monkeypatch.setattr(timm_builder, "plan_shrink", lambda arch, **kw: {"no_such_argument": 1})
    r = validate_here(_req("resnet18"))
    assert r["status"] == "pass", r["error"]
    shrink = r["details"]["timm_shrink"]
    assert shrink["built"] == "whole" and "no_such_argument" in shrink["why"]
    assert r["details"]["parameters"] == _whole_parameters("resnet18")


def test_build_shrunk_says_which_way_it_went():  # pure Python
    from zoo_runner.builders.timm_shrink import build_shrunk

    def create(extra):
        if extra.get("depth") == -1:
            raise ValueError("no")
        return ("model", dict(extra))

    assert build_shrunk(create, {"depth": 2}) == (
        ("model", {"depth": 2}),
        {"built": "shrunk", "overrides": {"depth": 2}},
    )
    model, detail = build_shrunk(create, {"depth": -1})
    assert model == ("model", {}) and detail["built"] == "whole" and "ValueError: no" in detail["why"]
    assert build_shrunk(create, {})[1]["built"] == "whole"
