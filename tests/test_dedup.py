"""Fingerprint dedup: models sharing a compute graph run once per backend and tier."""

from __future__ import annotations

import csv

import pytest

from tests.hub_standin import start_standin
from zoo_runner.request import ValidationRequest


@pytest.fixture
def twin_hub(tmp_path, monkeypatch):
    path = tmp_path / "twins.csv"
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        w.writerow(["org-a/bert-one", 100, "fill-mask", "", "['transformers', 'safetensors', 'bert', 'fill-mask']"])
        w.writerow(["org-b/bert-two", 90, "fill-mask", "", "['transformers', 'safetensors', 'bert', 'fill-mask']"])
        w.writerow(
            ["org-c/gpt-three", 80, "text-generation", "", "['transformers', 'safetensors', 'gpt2', 'text-generation']"]
        )
        phi3 = "['transformers', 'safetensors', 'phi3', 'text-generation'"
        w.writerow(["org-d/phi3-custom", 70, "text-generation", "", phi3 + ", 'custom_code']"])
        w.writerow(["org-e/phi3-plain", 60, "text-generation", "", phi3 + "]"])
    base, stop = start_standin(str(path))
    monkeypatch.setenv("HF_ENDPOINT", base)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    import huggingface_hub.constants as c

    monkeypatch.setattr(c, "ENDPOINT", base)
    # computed from ENDPOINT when huggingface_hub was first imported (maybe by an earlier test)
    monkeypatch.setattr(c, "HUGGINGFACE_CO_URL_TEMPLATE", base + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf"))
    yield base
    stop()


def test_same_graph_runs_once_and_fans_out(twin_hub, sqlite_url):
    from services.validation import validate_and_store

    one = validate_and_store(ValidationRequest("org-a/bert-one", backend="cpu")).to_dict()
    two = validate_and_store(ValidationRequest("org-b/bert-two", backend="cpu")).to_dict()
    three = validate_and_store(ValidationRequest("org-c/gpt-three", backend="cpu")).to_dict()
    assert one["status"] == two["status"] == three["status"] == "pass"
    assert one["fingerprint"] == two["fingerprint"] != three["fingerprint"]
    assert "deduplicated_from" not in one["details"]
    assert two["details"]["deduplicated_from"] == "org-a/bert-one" and two["model_id"] == "org-b/bert-two"
    assert two["duration_s"] == 0.0 and "org-b/bert-two" in two["repro"]
    assert "deduplicated_from" not in three["details"]


def test_what_the_parent_found_of_a_repo_is_never_copied_to_its_twin(twin_hub, sqlite_url):
    """A custom-code repo run on transformers' own classes shares its graph with a plain repo of the
    same config; the plain twin's copied row does not say its code was left out, and the other way round."""
    from services.validation import validate_and_store

    custom = validate_and_store(ValidationRequest("org-d/phi3-custom", backend="cpu")).to_dict()
    plain = validate_and_store(ValidationRequest("org-e/phi3-plain", backend="cpu")).to_dict()
    assert custom["status"] == plain["status"] == "pass" and custom["fingerprint"] == plain["fingerprint"]
    assert "custom_code_native" in custom["details"] and "deduplicated_from" not in custom["details"]
    assert plain["details"]["deduplicated_from"] == "org-d/phi3-custom"
    assert "custom_code_native" not in plain["details"]


def test_parent_fingerprint_equals_the_engines():
    from zoo_runner.engine import validate_here
    from zoo_runner.hub import prepare
    from zoo_runner.planning import plan_fingerprint

    req = prepare(ValidationRequest("arch:DistilBertForSequenceClassification", backend="cpu"))
    assert plan_fingerprint(req) == validate_here(req)["fingerprint"]


def test_a_row_judged_at_another_precision_is_not_shared(twin_hub, sqlite_url):
    """A declared row from a machine where the backend declares another precision (OpenVINO: bf16
    with bf16 units) is not this machine's verdict: the twin runs itself instead of copying it."""
    from sqlalchemy import update

    from db.models import Result
    from db.session import session_scope
    from services.validation import validate_and_store

    one = validate_and_store(ValidationRequest("org-a/bert-one", backend="cpu")).to_dict()
    with session_scope() as s:  # as if another machine had judged it at bf16, its declared precision there
        s.execute(update(Result).where(Result.model_id == "org-a/bert-one").values(precision="bf16"))
    two = validate_and_store(ValidationRequest("org-b/bert-two", backend="cpu")).to_dict()
    assert one["fingerprint"] == two["fingerprint"]
    assert "deduplicated_from" not in two["details"] and two["precision"] == "fp32"
    assert two["duration_s"] > 0
