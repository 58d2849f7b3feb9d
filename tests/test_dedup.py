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
    _use_hub(base, tmp_path, monkeypatch)
    yield base
    stop()


def _use_hub(base: str, tmp_path, monkeypatch) -> None:
    """The real huggingface_hub client pointed at the stand-in ``base``, with a cache of the test's own."""
    import huggingface_hub.constants as c

    monkeypatch.setenv("HF_ENDPOINT", base)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(c, "ENDPOINT", base)
    # computed from ENDPOINT when huggingface_hub was first imported (maybe by an earlier test)
    monkeypatch.setattr(c, "HUGGINGFACE_CO_URL_TEMPLATE", base + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(c, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(c, "HF_HUB_CACHE", str(tmp_path / "hf"))


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


def test_token_ids_are_in_the_fingerprint():
    """pad_token_id moves RoBERTa's position ids and eos_token_id decides where BART pools: configs that
    differ in them compute differently, so they never share a fingerprint; what cannot change the
    computation (a name, the writer's transformers version) still does not count."""
    from zoo_runner.fingerprint import IGNORED_KEYS, fingerprint

    base = {"model_type": "roberta", "hidden_size": 32, "pad_token_id": 1, "eos_token_id": 2, "bos_token_id": 0}
    fp = fingerprint("transformers", "RobertaModel", base, "tiny", [])
    for key, value in (("pad_token_id", 500), ("eos_token_id", 999999), ("bos_token_id", 7), ("sep_token_id", 3)):
        assert fingerprint("transformers", "RobertaModel", {**base, key: value}, "tiny", []) != fp, key
    nested = {**base, "text_config": {"pad_token_id": 1}}
    assert fingerprint("transformers", "X", nested, "tiny", []) != fingerprint(
        "transformers", "X", {**base, "text_config": {"pad_token_id": 9}}, "tiny", []
    )
    renamed = {**base, "_name_or_path": "evil/copy", "transformers_version": "9.9.9"}
    assert fingerprint("transformers", "RobertaModel", renamed, "tiny", []) == fp
    assert not {k for k in IGNORED_KEYS if k.endswith("token_id")}
    assert all(isinstance(why, str) and why for why in IGNORED_KEYS.values())  # each says why it cannot matter


def test_a_copy_of_a_popular_config_with_one_token_id_changed_never_decides_the_originals_verdict(
    sqlite_url, tmp_path, monkeypatch
):
    """The dedup attack: a stranger's copy of a popular RoBERTa config with pad_token_id 500, validated
    first in the week, fails its own reference; the original, validated after it, keeps its own verdict."""
    import json

    from huggingface_hub import hf_hub_download

    from services.validation import validate_and_store

    evil = tmp_path / "repos" / "evil" / "roberta-copy"
    evil.mkdir(parents=True)
    csv_path = tmp_path / "original.csv"
    csv_path.write_text(
        "model_id,downloads,tasks,parameters,tags\n"
        "org-r/roberta-one,100,fill-mask,,\"['transformers', 'safetensors', 'roberta', 'fill-mask']\"\n"
    )
    base, stop = start_standin(str(csv_path), {"evil/roberta-copy": str(evil)})
    _use_hub(base, tmp_path, monkeypatch)
    try:
        original = json.loads(open(hf_hub_download("org-r/roberta-one", "config.json")).read())
        (evil / "config.json").write_text(json.dumps({**original, "pad_token_id": 500}))
        copy = validate_and_store(ValidationRequest("evil/roberta-copy", backend="cpu")).to_dict()
        own = validate_and_store(ValidationRequest("org-r/roberta-one", backend="cpu")).to_dict()
    finally:
        stop()
    assert copy["status"] == "reference_error", (copy["status"], copy["error"])
    assert "deduplicated_from" not in own["details"], own["details"]
    assert own["status"] == "pass" and own["fingerprint"] != copy["fingerprint"] and own["duration_s"] > 0


def test_a_copy_comes_from_the_most_downloaded_twin_and_never_from_a_row_of_a_repos_own_files(sqlite_url):
    """Fingerprint dedup with the fingerprints equal: the parent picks the source, never the order of
    validation. A row of a less-downloaded model never speaks for a more-downloaded one, and a
    reference_error or unsupported row (a fact of that repo's own config or code) is never copied."""
    from db import repository
    from db.models import Model
    from db.session import session_scope
    from zoo_runner.result import ValidationResult

    def row(model_id: str, status: str) -> dict:
        r = ValidationResult.empty(ValidationRequest(model_id, backend="cpu", tier="tiny")).to_dict()
        return {**r, "status": status, "fingerprint": "d" * 16}

    with session_scope() as s:
        s.add_all([Model(id="big/original", downloads=1000), Model(id="small/copy", downloads=3)])
    with session_scope() as s:
        repository.store_result(s, row("small/copy", "pass"))
    with session_scope() as s:  # the original is more downloaded than the only row there is: it runs itself
        assert repository.shared_result(s, "d" * 16, ValidationRequest("big/original", backend="cpu")) is None
    with session_scope() as s:
        repository.store_result(s, row("big/original", "reference_error"))
    with session_scope() as s:  # a repo's own reference_error is never another's verdict
        assert repository.shared_result(s, "d" * 16, ValidationRequest("other/one", backend="cpu")) is not None
        got = repository.shared_result(s, "d" * 16, ValidationRequest("other/one", backend="cpu"))
        assert got["details"]["deduplicated_from"] == "small/copy" and got["status"] == "pass"
