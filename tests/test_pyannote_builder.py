"""pyannote.audio models (the pyannote extra): the class config.yaml names, its output layer from
the training task; seeded weights only (pyannote checkpoints are pickles); through the Hub stand-in."""

from __future__ import annotations

import importlib.util

import pytest
import yaml

from tests.conftest import validate_through
from tests.hub_standin import RECORDED_DIR
from zoo_runner.builders.pyannote_builder import PyannoteBuilder, pipeline_model_repos, specifications_kwargs
from zoo_runner.engine import validate_here
from zoo_runner.exceptions import NotSupported
from zoo_runner.request import ValidationRequest

SEGMENTATION = "pyannote/segmentation-3.0"
PIPELINE = "pyannote/speaker-diarization-3.1"
EMBEDDING = "pyannote/wespeaker-voxceleb-resnet34-LM"


def _config(repo: str) -> dict:
    with open(f"{RECORDED_DIR}/{repo}/config.yaml") as f:
        return yaml.safe_load(f)


def _req(repo: str, backend: str = "cpu", **kw) -> ValidationRequest:
    return ValidationRequest(
        repo,
        backend=backend,
        library="pyannote-audio",
        config=_config(repo),
        config_source="test",
        reference_cache="",
        **kw,
    )


def test_the_training_task_decides_the_output_layer():  # pure Python: runs without the extra
    powerset = specifications_kwargs(_config(SEGMENTATION)["task"])
    assert powerset["problem"] == "MONO_LABEL_CLASSIFICATION" and powerset["powerset_max_classes"] == 2
    assert powerset["classes"] == ["speaker#1", "speaker#2", "speaker#3"] and powerset["duration"] == 10.0
    multilabel = specifications_kwargs(_config("pyannote/segmentation")["task"])
    assert multilabel["problem"] == "MULTI_LABEL_CLASSIFICATION" and "powerset_max_classes" not in multilabel
    assert specifications_kwargs(_config(EMBEDDING).get("task")) is None  # an embedding model has no task head


def test_only_pyannote_models_are_imported_and_never_from_pickles():
    builder = PyannoteBuilder()
    foreign = ValidationRequest(
        "org/x",
        backend="cpu",
        library="pyannote-audio",
        config={"model": {"_target_": "os.system"}},
        reference_cache="",
    )
    with pytest.raises(NotSupported) as info:
        builder.plan(foreign)
    assert info.value.reason == "library_unsupported" and "os.system" in str(info.value)
    with pytest.raises(NotSupported) as info:
        builder.plan(_req(SEGMENTATION, tier="full"))
    assert info.value.reason == "pickle_only"
    plan = builder.plan(_req(SEGMENTATION))
    part = plan.parts["model"]
    assert part.model_config["lstm"]["hidden_size"] <= 32 and part.model_config["lstm"]["bidirectional"] is True
    assert part.model_config["sincnet"] == {"stride": 10}  # the front end is kept


def test_a_pipeline_names_its_model_repos_and_needs_their_configs():
    cfg = _config(PIPELINE)
    assert pipeline_model_repos(cfg) == {"segmentation": (SEGMENTATION, None), "embedding": (EMBEDDING, None)}
    assert PyannoteBuilder().extra_repo_files(cfg) == [
        (SEGMENTATION, None, "config.yaml"),
        (EMBEDDING, None, "config.yaml"),
        (EMBEDDING, None, "hyperparams.yaml"),  # an embedding may be a SpeechBrain model
    ]
    assert pipeline_model_repos({"pipeline": {"params": {"segmentation": "pyannote/segmentation@2022.07"}}}) == {
        "segmentation": ("pyannote/segmentation", "2022.07")
    }
    # an embedding with neither a pyannote config.yaml nor SpeechBrain's hyperparams.yaml: named, not guessed
    req = ValidationRequest(
        "org/p",
        backend="cpu",
        library="pyannote-audio",
        config=cfg,
        extras={f"{SEGMENTATION}/config.yaml": _config(SEGMENTATION)},
        reference_cache="",
    )
    with pytest.raises(NotSupported) as info:
        PyannoteBuilder().plan(req)
    assert EMBEDDING in str(info.value)
    full = PyannoteBuilder().plan(
        ValidationRequest(
            "org/p",
            backend="cpu",
            library="pyannote-audio",
            config=cfg,
            extras={f"{r}/config.yaml": _config(r) for r in (SEGMENTATION, EMBEDDING)},
            reference_cache="",
        )
    )
    assert full.architecture == "SpeakerDiarization[PyanNet+WeSpeakerResNet34]" and set(full.parts) == {
        "segmentation",
        "embedding",
    }


needs_pyannote = pytest.mark.skipif(
    importlib.util.find_spec("pyannote") is None,
    reason="the pyannote extra is not installed (bash scripts/setup.sh dev pyannote)",
)


@needs_pyannote
@pytest.mark.parametrize(
    ("repo", "architecture"),
    [(SEGMENTATION, "PyanNet"), ("pyannote/segmentation", "PyanNet"), (EMBEDDING, "WeSpeakerResNet34")],
)
def test_pyannote_models_validate(repo, architecture):
    r = validate_here(_req(repo))
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "pyannote-audio" and r["architecture"] == architecture
    shapes = r["details"]["input_shapes"]
    assert shapes[0]["waveforms"] == [1, 1, 16000] and shapes[1]["waveforms"] == [2, 1, 24000]


@needs_pyannote
def test_a_backend_bug_in_a_segmentation_model_is_a_mismatch_and_the_lstm_break_is_counted(monkeypatch):
    """Dynamo does not trace PyanNet's LSTM: the graph breaks there and the rest runs eagerly, so
    a bug in the backend reaches only the SincNet front end, which it compiles; a NaN there is caught."""
    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = validate_here(_req(SEGMENTATION, backend="cpu+zoo_bug_single_nan", plugins="tests.plugins.buggy_backends"))
    assert r["status"] == "mismatch", r
    r = validate_here(_req(SEGMENTATION, backend="cpu+aot_eager"))
    assert r["status"] == "pass", r["error"]
    assert r["metrics"]["graph_breaks"] >= 1
    assert any("LSTM" in reason for reason in r["details"]["graph_break_reasons"])


needs_speechbrain = pytest.mark.skipif(
    importlib.util.find_spec("speechbrain") is None,
    reason="the speechbrain extra is not installed (bash scripts/setup.sh dev speechbrain)",
)


@needs_pyannote
@pytest.mark.parametrize(
    ("repo", "architecture"),
    [
        (SEGMENTATION, "PyanNet"),
        (PIPELINE, "SpeakerDiarization[PyanNet+WeSpeakerResNet34]"),
        ("pyannote/embedding", "XVectorSincNet"),  # an embedding task: no task-dependent output layer
        ("pyannote/voice-activity-detection", "VoiceActivityDetection[PyanNet]"),  # segmentation pinned to a git tag
        # 2.1: its segmentation pinned to a tag, its embedding SpeechBrain's ECAPA-TDNN (hyperparams.yaml)
        pytest.param("pyannote/speaker-diarization", "SpeakerDiarization[PyanNet+ECAPA_TDNN]", marks=needs_speechbrain),
    ],
)
def test_pyannote_repos_through_the_stand_in(zoo, snapshot_hub, tmp_path, repo, architecture):
    r = validate_through(zoo, snapshot_hub, tmp_path, repo)
    assert r["status"] == "pass" and r["library"] == "pyannote-audio", r["error"]
    assert r["architecture"] == architecture
