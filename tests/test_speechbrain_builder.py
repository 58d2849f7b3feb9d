"""SpeechBrain models (issue 30, the speechbrain extra): the modules a repo's hyperparams.yaml
declares, read as data (HyperPyYAML's tags never become objects in the parent), only SpeechBrain's own
classes instantiated, in the model process; seeded weights (the checkpoints are pickles); through the
real huggingface_hub client against the stand-in, whose hyperparams.yaml is synthesised from tags."""

from __future__ import annotations

import importlib.util

import pytest

from tests.conftest import validate_through
from tests.hub_standin import speechbrain_hyperparams
from zoo_runner.builders.speechbrain_builder import SpeechBrainBuilder
from zoo_runner.exceptions import NotSupported
from zoo_runner.request import ValidationRequest
from zoo_runner.untrusted import parse_yaml

ECAPA_TAGS = ["speechbrain", "embeddings", "Speaker", "Verification", "pytorch", "ECAPA", "TDNN"]


def _req(config: dict, tier: str = "tiny") -> ValidationRequest:
    return ValidationRequest(
        "org/sb", backend="cpu", tier=tier, library="speechbrain", config=config, config_source="test"
    )


def test_hyperpyyaml_tags_are_data_and_the_plan_keeps_what_inference_runs():  # pure Python: no extra needed
    cfg = parse_yaml(speechbrain_hyperparams(ECAPA_TAGS))
    assert cfg["embedding_model"]["!new"] == "speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN"
    assert cfg["embedding_model"]["kwargs"]["input_size"] == {"!ref": "<n_mels>"}
    plan = SpeechBrainBuilder().plan(_req(cfg))
    # an EncoderClassifier's modules, in order; neither the training-only normaliser nor the pretrainer
    assert list(plan.graph) == ["compute_features", "mean_var_norm", "embedding_model", "classifier"]
    emb = plan.graph["embedding_model"]["kwargs"]
    assert emb["input_size"] == 80 and emb["lin_neurons"] == 192  # references resolved; the embedding kept
    assert max(emb["channels"]) <= 32 and emb["attention_channels"] <= 16  # shrunk for tier tiny
    assert plan.graph["classifier"]["kwargs"] == {"input_size": 192, "out_neurons": 7205}  # the output layer kept
    assert plan.architecture == "ECAPA_TDNN"
    nested = parse_yaml("d:\n  n: 60\nembedding_model: !new:speechbrain.lobes.X\n  input_size: !ref <d[n]>\n")
    assert SpeechBrainBuilder().plan(_req(nested)).graph["embedding_model"]["kwargs"] == {"input_size": 60}
    with pytest.raises(NotSupported) as info:
        SpeechBrainBuilder().plan(_req(cfg, tier="full"))
    assert info.value.reason == "pickle_only"


@pytest.mark.parametrize(
    ("yaml_text", "says"),
    [
        ("modules:\n  embedding_model: !new:os.system\n    command: touch /tmp/pwned\n", "outside speechbrain"),
        # a SpeechBrain callable that is no model: utilities are never reachable (run_shell would run a command)
        ("embedding_model: !new:speechbrain.utils.superpowers.run_shell [touch /tmp/pwned]\n", "outside speechbrain"),
        ("embedding_model: !new:speechbrain.lobes._private.X\n", "outside speechbrain"),
        ("a: !ref <b>\nb: !ref <a>\nembedding_model: !new:speechbrain.lobes.X\n  n: !ref <a>\n", "loop"),
        # each level ten references to the one before: 10^12 values unless the expansion is bounded
        (
            "a0: [1]\n"
            + "".join(f"a{i}: [{', '.join([f'!ref <a{i - 1}>'] * 10)}]\n" for i in range(1, 13))
            + "embedding_model: !new:speechbrain.lobes.X\n  n: !ref <a12>\n",
            "expands to over",
        ),
        ("embedding_model: !new:speechbrain.lobes.X\n  lin_neurons: 100000000\n", "over Zoo's limit"),
        ("embedding_model: !new:speechbrain.lobes.X\n  n: !apply:os.system [ls]\n", "!apply"),
        ("n: 2\nembedding_model: !new:speechbrain.lobes.X\n  n: !ref <n> * 2\n", "does not evaluate"),
        ("n: 2\nembedding_model: !new:speechbrain.lobes.X\n  n: !ref <n.real>\n", "does not evaluate"),
        ("embedding_model: !new:speechbrain.lobes.X\n  n: !ref <missing>\n", "does not define"),
        ("compute_features: !new:speechbrain.lobes.features.Fbank\n", "no embedding_model"),
    ],
)
def test_what_zoo_will_not_instantiate_is_refused_with_its_reason(yaml_text, says):
    with pytest.raises(NotSupported) as info:
        SpeechBrainBuilder().plan(_req(parse_yaml(yaml_text)))
    assert info.value.reason == "library_unsupported" and says in str(info.value), str(info.value)


needs_speechbrain = pytest.mark.skipif(
    importlib.util.find_spec("speechbrain") is None,
    reason="the speechbrain extra is not installed (bash scripts/setup.sh dev speechbrain)",
)


@needs_speechbrain
@pytest.mark.parametrize(
    ("repo", "architecture"),
    [("speechbrain/spkrec-ecapa-voxceleb", "ECAPA_TDNN"), ("speechbrain/spkrec-resnet-voxceleb", "ResNet")],
)
def test_speechbrain_repos_validate_through_the_stand_in(zoo, snapshot_hub, tmp_path, repo, architecture):
    r = validate_through(zoo, snapshot_hub, tmp_path, repo)
    assert r["status"] == "pass" and (r["library"], r["architecture"]) == ("speechbrain", architecture), r["error"]
    assert r["details"]["input_shapes"][1]["waveforms"] == [2, 24000]
    assert r["details"]["parameters"] < 3_000_000  # the shrunk graph (the output layer, 7205 speakers, is kept)
