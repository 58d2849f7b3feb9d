"""ValidationResult is the SPEC's result shape, defined once: its dict, the checker, the API's schema."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from zoo_runner.request import HARNESS_VERSION, ValidationRequest
from zoo_runner.result import METRIC_KEYS, RESULT_KEYS, ValidationResult, empty_result, failure_result
from zoo_runner.result_schema import BadResult, check, trusted_result
from zoo_runner.statuses import ALL_REASONS, Reason, Status

SPEC = Path(__file__).resolve().parent.parent / "docs" / "SPEC.md"
# The SPEC's result, in its order; ``details`` is where the engine records everything else.
SPEC_KEYS = (
    "model_id",
    "revision",
    "tier",
    "backend",
    "device",
    "dtype",
    "status",
    "reason",
    "fingerprint",
    "library",
    "architecture",
    "task",
    "precision",
    "metrics",
    "fallback_ops",
    "op_census",
    "error",
    "versions",
    "repro",
    "started_at",
    "duration_s",
    "details",
)


def _spec_section(title: str) -> str:
    text = SPEC.read_text(encoding="utf-8")
    start = text.index(f"## {title}")
    return text[start : text.index("\n## ", start + 1)]


def test_the_keys_are_the_specs_in_its_order():
    assert RESULT_KEYS == SPEC_KEYS
    names = re.findall(r"`([a-z_0-9]+)`", _spec_section("A result"))
    top = [n for n in names if n in RESULT_KEYS]
    assert top == list(SPEC_KEYS)  # the SPEC names every key, in this order
    assert [n for n in names if n in METRIC_KEYS] == list(METRIC_KEYS)


def test_the_reasons_are_the_specs():
    statuses = _spec_section("Statuses")
    assert set(ALL_REASONS) == set(re.findall(r"`([a-z_]+)`", statuses.split("| status | meaning |")[1])) - {
        s.value for s in Status
    } - {"fallback_ops", "reason"}


def test_to_dict_has_exactly_the_spec_keys_and_plain_strings():
    req = ValidationRequest("org/m", backend="cpu+inductor", precision="bf16", seed=3)
    r = failure_result(req, ValueError("broken at 0x1f"), Status.UNSUPPORTED, Reason.NO_INPUTS)
    d = r.to_dict()
    assert list(d) == list(SPEC_KEYS) and list(d["metrics"]) == list(METRIC_KEYS)
    assert type(d["status"]) is str and type(d["reason"]) is str
    assert (d["status"], d["reason"], d["duration_s"]) == ("unsupported", "no_inputs", 0.0)
    assert d["error"]["type"] == "ValueError" and d["error"]["signature"] == "ValueError: broken at N"
    assert d["details"] == {"seed": 3, "harness_version": HARNESS_VERSION, "precision_source": "flag"}
    assert (d["device"], d["dtype"], d["precision"]) == ("cpu", "float32", "bf16")
    assert json.loads(json.dumps(d, allow_nan=False)) == d


def test_the_parent_computes_the_error_signature_from_the_type_and_message():
    # the signature decides which cluster (and which finding) a row joins: a model process that writes its
    # own cannot join another cluster while its message says something else
    req = ValidationRequest("org/m", backend="cpu+inductor")
    r = failure_result(req, RuntimeError("shape '[2, 3]' is invalid for input of size 7"), Status.RUNTIME_ERROR)
    honest = json.loads(json.dumps(r.to_dict()))
    assert trusted_result(req, honest)["error"] == honest["error"]  # an honest row keeps what it said
    lie = {"signature": "AssertionError: Guard failed", "signature_hash": "0"}
    forged = {**honest, "error": {**honest["error"], **lie}}
    kept = trusted_result(req, forged)["error"]
    assert kept["signature"] == "RuntimeError: shape '…' is invalid for input of size N"
    assert kept["signature_hash"] == honest["error"]["signature_hash"]


def test_a_result_round_trips_through_the_checker_and_from_dict():
    req = ValidationRequest("org/m", backend="cpu+inductor")
    r = ValidationResult.empty(req)
    r.status, r.fingerprint, r.architecture = Status.PASS_WITH_FALLBACK, "ab12", "BertModel"
    r.metrics.update(max_abs_diff=1e-6, cosine=1.0, graph_breaks=0)
    r.fallback_ops, r.op_census, r.duration_s = ["aten::erf"], {"aten::mm": 4}, 1.5
    d = json.loads(json.dumps(r.to_dict()))
    assert check(d) == d
    assert trusted_result(req, d) == d
    back = ValidationResult.from_dict(d)
    assert back == r and back.status is Status.PASS_WITH_FALLBACK
    assert ValidationResult.from_dict({**d, "week": "2026-W48"}).to_dict() == d


def test_the_checker_refuses_what_is_not_the_shape():
    d = empty_result(ValidationRequest("org/m"))
    with pytest.raises(BadResult, match="unknown keys"):
        check({**d, "status": "pass", "verdict": "pass"})
    with pytest.raises(BadResult, match="not one of the SPEC's statuses"):
        check({**d, "status": "passed"})
    with pytest.raises(BadResult, match="not one of the SPEC's reasons"):
        check({**d, "status": "unsupported", "reason": "too_big"})
    assert check({**d, "status": "reference_error", "reason": "prepare_failed"})["reason"] == "prepare_failed"


def test_codes_format_as_their_strings():
    assert f"{Status.REFERENCE_ERROR}" == str(Status.REFERENCE_ERROR) == "reference_error"
    assert Reason.GATED == "gated" and Reason.GATED in {"gated"} and json.dumps(Reason.GATED) == '"gated"'


def test_the_api_schema_is_the_result_shape():
    from api.schemas import Metrics, ResultOut

    # besides the result's keys: the stored row's id and week, which only a stored result has
    assert [k for k in ResultOut.model_fields if k not in ("id", "week")] == list(RESULT_KEYS)
    assert list(Metrics.model_fields) == list(METRIC_KEYS)
    d = failure_result(ValidationRequest("org/m"), RuntimeError("x")).to_dict()
    assert ResultOut.model_validate(d).model_dump(include=set(RESULT_KEYS) - {"error", "metrics"}) == {
        k: v for k, v in d.items() if k not in ("error", "metrics")
    }


def test_a_stored_result_reads_back_as_the_same_result(database_url):
    from db import queries, repository
    from db.models import Result
    from db.session import session_scope

    req = ValidationRequest("org/stored", backend="cpu+inductor", precision="bf16")
    r = failure_result(req, RuntimeError("boom"), Status.UNSUPPORTED, Reason.GATED)
    r.metrics["reference_ms"], r.op_census = 2.5, {"aten::mm": 1}
    with session_scope() as s:
        repository.store_result(s, r)  # a ValidationResult, as well as its dict
    with session_scope() as s:
        back = queries.result_dict(s.query(Result).filter_by(model_id="org/stored").one())
    week, started = back.pop("week"), back.pop("started_at")
    expected = json.loads(json.dumps(r.to_dict()))
    assert week and started[:19] == expected.pop("started_at")[:19]  # SQLite keeps no time zone
    assert back == expected and list(back) == [k for k in RESULT_KEYS if k != "started_at"]


def test_an_error_signature_groups_one_failure_across_models():
    from zoo_runner.request import error_info

    a = error_info(type_="RuntimeError", message="shape '[2, 640]' is invalid for input of size 0\nmore")
    b = error_info(type_="RuntimeError", message="shape '[8, 16]' is invalid for input of size 12")
    assert a["signature"] == b["signature"] == "RuntimeError: shape '…' is invalid for input of size N"
    assert a["signature_hash"] == b["signature_hash"]


def test_a_compiler_failure_is_signed_by_the_error_the_backend_raised():
    """dynamo's ``BackendCompilerFailed`` says ``backend='onnxrt' raised:`` on its first line: the
    signature takes the backend's own error from the next (its colour codes dropped), so two
    different failures of one backend are two clusters, not one."""
    from zoo_runner.request import error_info

    conv = "backend='onnxrt' raised:\nConversionError: Failed to convert. \x1b[96mThis is step 3/3\x1b[0m\n\nsummary"
    other = "backend='onnxrt' raised:\nDispatchError: no ONNX function for aten::special_zeta"
    sigs = {error_info(type_="BackendCompilerFailed", message=m)["signature"] for m in (conv, other)}
    assert sigs == {
        "BackendCompilerFailed: backend='…' raised: ConversionError: Failed to convert. This is step N/N",
        "BackendCompilerFailed: backend='…' raised: DispatchError: no ONNX function for aten::special_zeta",
    }


def test_every_parent_only_detail_is_the_requests_own_on_every_path(sqlite_url):
    """env, remote_code, custom_code_native, other_repo_files (PARENT_KEYS): a model process claiming
    each gets its request's own instead (dropped where the request has none), on the row the parent
    checks and on a dedup twin's copy of another model's row."""
    from db import repository
    from db.session import session_scope
    from zoo_runner.result import PARENT_KEYS, ValidationResult

    forged = {k: {"forged": True} for k in PARENT_KEYS} | {"deduplicated_from": "org/other"}
    bare = ValidationRequest("org/bare", backend="cpu", tier="tiny")
    raw = {**ValidationResult.empty(bare).to_dict(), "status": "pass", "details": dict(forged)}
    row = trusted_result(bare, raw)
    assert not {*PARENT_KEYS, "deduplicated_from"} & set(row["details"]), row["details"]  # no copy either

    own = ValidationRequest("org/own", backend="cpu", tier="tiny")
    own.remote_code = {"modeling.py": "ab" * 32}
    own.custom_code_native = "why"
    own.extras = {"other_repo_commits": {"org/text/config.json": "c" * 40}}
    row = trusted_result(own, {**raw, "details": dict(forged)})
    assert row["details"]["remote_code"] == own.remote_code
    assert row["details"]["custom_code_native"] == "why"
    assert row["details"]["other_repo_files"] == {"org/text/config.json": "c" * 40}
    assert "env" not in row["details"]

    # a twin's copy of that row says what the parent found of the twin's own repo, nothing of the other's
    twin = ValidationRequest("org/twin", backend="cpu", tier="tiny")
    with session_scope() as s:
        repository.store_result(s, {**row, "fingerprint": "f" * 16})
    with session_scope() as s:
        copy = repository.shared_result(s, "f" * 16, twin)
    assert copy is not None and copy["details"]["deduplicated_from"] == "org/own"
    assert not set(PARENT_KEYS) & set(copy["details"]), copy["details"]
