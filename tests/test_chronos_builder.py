"""Chronos-Bolt forecasters (chronos-forecasting), and repos whose Hub metadata names no library
Zoo builds: the repo's config.json says whose model it is. Through the Hub stand-in as users run it."""

from __future__ import annotations

import json

import pytest

from tests.conftest import validate_through
from tests.hub_standin import RECORDED_DIR
from zoo_runner.builders import library_for_config
from zoo_runner.engine import validate_here
from zoo_runner.request import ValidationRequest

pytest.importorskip("chronos", reason="chronos-forecasting is in the dev extra")

with open(f"{RECORDED_DIR}/amazon/chronos-bolt-base/config.json") as _f:
    BOLT = json.load(_f)


def _req(backend: str = "cpu", **kw) -> ValidationRequest:
    return ValidationRequest(
        "test/chronos-bolt",
        backend=backend,
        library="chronos-forecasting",
        config=BOLT,
        config_source="test",
        reference_cache="",
        **kw,
    )


def test_a_config_says_whose_model_it_is():
    assert library_for_config(BOLT) == "chronos-forecasting"  # a T5 config, but Chronos's
    assert library_for_config({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}) == "transformers"
    assert library_for_config({"model_type": "no-such-type"}) is None
    assert library_for_config({"architecture": "resnet50"}) is None


def test_chronos_bolt_validates_with_its_forecasting_head_kept():
    r = validate_here(_req())
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "chronos-forecasting" and r["architecture"] == "ChronosBoltModelForForecasting"
    shapes = r["details"]["input_shapes"]
    assert len(shapes) == 2 and shapes[0] != shapes[1] and "context" in shapes[0]
    assert r["details"]["parameters"] < 2_000_000  # the T5 stack shrunk, not the 205M base model


def test_a_backend_bug_in_a_forecaster_is_a_mismatch(monkeypatch):
    from tests.conftest import ROOT

    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    r = validate_here(_req(backend="cpu+zoo_bug_drop_bias", plugins="tests.plugins.buggy_backends"))
    assert r["status"] == "mismatch", r


def test_chronos_bolt_through_the_stand_in(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, "amazon/chronos-bolt-small")  # no library tag on the Hub
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "chronos-forecasting" and r["task"] == "time-series-forecasting"


def test_an_untagged_transformers_repo_is_recognised_by_its_config(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, "fiifinketia/akan-g2p")  # tags: tensorboard, safetensors, t5
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "transformers" and r["architecture"].startswith("T5")


def test_a_library_without_a_builder_is_unsupported_and_named(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, "speechbrain/spkrec-ecapa-voxceleb")  # no builder
    assert r["status"] == "unsupported" and r["reason"] == "library_unsupported"
    assert "speechbrain" in r["error"]["message"]
    # ultralytics has one, and says why the stand-in's synthetic repo (a pytorch_model.bin) gives it nothing to build
    r = validate_through(zoo, snapshot_hub, tmp_path, "lewiswatson/yolov8x-tuned-hand-gestures")
    assert r["status"] == "unsupported" and r["reason"] == "library_unsupported"
    assert "no ultralytics checkpoint named after a YOLO architecture" in r["error"]["message"]


def test_a_library_that_is_not_pytorch_says_so(zoo, snapshot_hub, tmp_path):
    r = validate_through(zoo, snapshot_hub, tmp_path, "Systran/faster-whisper-base")  # tagged ctranslate2
    assert (r["status"], r["reason"]) == ("unsupported", "no_pytorch_weights"), r
    assert "'ctranslate2': not PyTorch" in r["error"]["message"]
    r = validate_through(zoo, snapshot_hub, tmp_path, "flair/ner-english-fast")  # a library that cannot share the venv
    assert (r["status"], r["reason"]) == ("unsupported", "library_unsupported"), r
    assert "transformers 4" in r["error"]["message"]


def test_a_non_pytorch_library_is_decided_before_its_files_or_a_copied_config(zoo, tmp_path):
    """A CTranslate2 conversion ships a `model.bin` (no pickle) and often the original's config.json:
    neither makes it `pickle_only` at full or a transformers model at tiny."""
    import csv

    from tests.hub_standin import start_standin

    repo = tmp_path / "repos" / "test-org" / "ct2-whisper"
    repo.mkdir(parents=True)
    (repo / "model.bin").write_bytes(b"\x00" * 64)
    (repo / "config.json").write_text(
        json.dumps({"model_type": "whisper", "architectures": ["WhisperForConditionalGeneration"]})
    )
    catalog = tmp_path / "catalog.csv"
    with catalog.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        w.writerow(["test-org/ct2-whisper", 10, "automatic-speech-recognition", "", "['ctranslate2', 'audio']"])
    base, stop = start_standin(str(catalog), {"test-org/ct2-whisper": str(repo)})
    try:
        for tier in ("tiny", "full"):
            proc = zoo(
                ["validate", "test-org/ct2-whisper", "--backend", "cpu", "--tier", tier, "--json"],
                HF_ENDPOINT=base,
                HF_HUB_OFFLINE="0",
                HF_HUB_CACHE=str(tmp_path / "hf"),
            )
            r = json.loads(proc.stdout)
            assert (r["status"], r["reason"]) == ("unsupported", "no_pytorch_weights"), (tier, r)
            assert "'ctranslate2': not PyTorch" in r["error"]["message"]
    finally:
        stop()
