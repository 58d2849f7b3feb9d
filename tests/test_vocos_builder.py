"""Vocos vocoders (issue 30, the vocos extra): a repo with no library tag is recognised from its
config.yaml (read as data in the parent), only the vocos package's own feature, model and head classes
are instantiated, in the model process; what a TTS pipeline runs (``Vocos.decode``: backbone, then the
inverse-STFT head) is validated with seeded weights (the weights are a pickle); through the real
huggingface_hub client against the stand-in, which serves the repo's recorded config.yaml."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import validate_through
from tests.hub_standin import RECORDED_DIR
from zoo_runner.builders import library_for_config
from zoo_runner.builders.vocos_builder import VocosBuilder
from zoo_runner.exceptions import NotSupported
from zoo_runner.request import ValidationRequest
from zoo_runner.untrusted import parse_yaml

REPO = "charactr/vocos-mel-24khz"


def _config() -> dict:
    with open(f"{RECORDED_DIR}/{REPO}/config.yaml") as f:
        return parse_yaml(f.read())


def _req(config: dict, tier: str = "tiny") -> ValidationRequest:
    return ValidationRequest("org/vocos", backend="cpu", tier=tier, library="vocos", config=config, config_source="t")


def test_a_vocos_config_is_recognised_and_the_plan_shrinks_the_backbone_only():  # pure Python: no extra needed
    cfg = _config()
    assert library_for_config(cfg, "config.yaml") == "vocos"
    assert library_for_config(cfg) is None  # a config.json is never taken for one
    assert library_for_config({"model": {"class_path": "pyannote.audio.models.X"}}, "config.yaml") is None
    plan = VocosBuilder().plan(_req(cfg))
    assert plan.architecture == "VocosBackbone+ISTFTHead"
    backbone, head = plan.graph["backbone"]["init_args"], plan.graph["head"]["init_args"]
    assert (backbone["dim"], backbone["intermediate_dim"], backbone["num_layers"]) == (32, 64, 1)  # shrunk
    assert backbone["input_channels"] == 100 and head["dim"] == 32  # mel bands kept; the head as wide as the backbone
    assert (head["n_fft"], head["hop_length"]) == (1024, 256)  # the signal path kept
    assert [s["channels"] for s in plan.shapes] == [100, 100] and plan.shapes[0]["frames"] != plan.shapes[1]["frames"]
    with pytest.raises(NotSupported) as info:
        VocosBuilder().plan(_req(cfg, tier="full"))
    assert info.value.reason == "pickle_only"


@pytest.mark.parametrize(
    ("block", "value", "says"),
    [
        ("backbone", {"class_path": "os.system", "init_args": {}}, "not a class of"),
        ("head", {"class_path": "vocos.heads._Private", "init_args": {}}, "not a class of"),
        ("backbone", {"class_path": "vocos.models.VocosBackbone", "init_args": {"dim": [1, 2]}}, "not a plain value"),
        ("backbone", {"class_path": "vocos.models.VocosBackbone", "init_args": {"dim": 10**9}}, "size limit"),
        ("head", {"class_path": "vocos.heads.ISTFTHead", "init_args": "dim=3"}, "not a mapping"),
        ("head", {"class_path": "vocos.heads.ISTFTHead", "init_args": {"n_fft": float("inf")}}, "size limit"),
        ("head", {"class_path": "vocos.heads.ISTFTHead", "init_args": {"n_fft": 10**400}}, "size limit"),
        ("head", {"class_path": "vocos.heads.ISTFTHead", "init_args": {"n_fft": -4}}, "negative"),
        ("backbone", {"class_path": "vocos.models.VocosBackbone", "init_args": {"input_channels": "abc"}}, "channels"),
    ],
)
def test_what_zoo_will_not_instantiate_is_refused_with_its_reason(block, value, says):
    cfg = {**_config(), block: value}
    with pytest.raises(NotSupported) as info:
        VocosBuilder().plan(_req(cfg))
    assert info.value.reason == "library_unsupported" and says in str(info.value), str(info.value)


needs_vocos = pytest.mark.skipif(
    importlib.util.find_spec("vocos") is None,
    reason="the vocos extra is not installed (bash scripts/setup.sh dev vocos)",
)


@needs_vocos
@pytest.mark.parametrize(
    ("block", "value", "says"),
    [
        ("feature_extractor", {"class_path": "vocos.feature_extractors.EncodecModel"}, "not a torch module class of"),
        ("head", {"class_path": "vocos.heads.ISTFTHead", "init_args": {"dim": 32, "padding": "bogus"}}, "refuses"),
    ],
)
def test_a_class_from_elsewhere_or_arguments_its_constructor_refuses_are_unsupported(block, value, says):
    """In the model process: a class vocos imports from another package is not vocos's, and a
    constructor refusing the config's arguments is the config's failure (unsupported), not Zoo's."""
    from zoo_runner.engine import validate_here

    r = validate_here(_req({**_config(), block: value}))
    assert (r["status"], r["reason"]) == ("unsupported", "library_unsupported"), r
    assert says in r["error"]["message"], r["error"]


@needs_vocos
def test_the_vocos_repo_validates_through_the_stand_in(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, REPO)
    assert r["status"] == "pass", r["error"]
    assert (r["library"], r["architecture"]) == ("vocos", "VocosBackbone+ISTFTHead")
    assert r["details"]["input_shapes"][1]["features"] == [2, 100, 24]
    assert r["details"]["parameters"] < 200_000  # the shrunk backbone, not the real 13.5 M


@needs_vocos
def test_a_backend_bug_in_a_vocoder_is_a_mismatch(monkeypatch):
    from tests.conftest import ROOT
    from zoo_runner.engine import validate_here

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    req = _req(_config())
    req.backend, req.plugins, req.reference_cache = "cpu+zoo_bug_drop_bias", "tests.plugins.buggy_backends", ""
    assert validate_here(req)["status"] == "mismatch"
