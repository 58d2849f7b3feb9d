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
    "arch",
    [
        "resnet18",
        "mobilenetv3_small_100",
        "efficientnet_b0",
        "convnext_atto",
        "vit_tiny_patch16_224",
        "deit_tiny_patch16_224",
    ],
)
def test_timm_architectures_validate_on_cpu(arch):
    r = validate_here(_req(arch))
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "timm" and r["architecture"] == arch and r["task"] == "image-classification"
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
