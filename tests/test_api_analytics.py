"""The analytics API (coverage by group and over time, op gaps, failures, regressions, reports),
API keys, rate limit, ETags and CSV, on SQLite and PostgreSQL, over a small hand-made history
whose every expected number is worked out below."""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest
from fastapi.testclient import TestClient

from db import queries, repository
from db.repository import CatalogEntry
from db.session import session_scope
from tests.test_storage import _result

W47 = dt.datetime(2026, 11, 17, tzinfo=dt.timezone.utc)  # 2026-W47
W48 = dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)  # 2026-W48


def _err(etype: str, msg: str) -> dict:
    return {"type": etype, "message": msg, "signature": f"{etype}: {msg}", "traceback": ""}


def seed_history() -> None:
    """org/m0..m9 with downloads 1000, 900, … 100; tasks alternate fill-mask / text-generation."""
    with session_scope() as s:
        repository.store_snapshot(
            s,
            iter(
                [
                    CatalogEntry(
                        f"org/m{i}",
                        downloads=1000 - 100 * i,
                        library="transformers",
                        task="fill-mask" if i % 2 == 0 else "text-generation",
                    )
                    for i in range(10)
                ]
            ),
            "file:x",
        )
        old = {"torch": "2.12.0", "torch-neuronx": "2.12.0.1"}
        new = {"torch": "2.13.0", "torch-neuronx": "2.13.0.1"}
        for i, st, fb in [
            (0, "pass", []),
            (1, "pass", []),
            (2, "pass_with_fallback", ["aten::cumsum"]),
            (3, "pass", []),
        ]:
            repository.store_result(
                s,
                _result(
                    f"org/m{i}",
                    st,
                    week_day=W47,
                    fallback_ops=fb,
                    versions=old,
                    task="fill-mask" if i % 2 == 0 else "text-generation",
                ),
            )
        rows = [
            (0, "pass", [], None),
            (
                1,
                "compile_error",
                [],
                _err("BackendCompilerFailed", "backend='neuron' raised: lowering aten::_fft_r2c is not supported"),
            ),
            (2, "pass_with_fallback", ["aten::cumsum"], None),
            (3, "pass_with_fallback", ["aten::cumsum", "aten::sort"], None),
            (4, "runtime_error", [], _err("RuntimeError", "aten::roll failed after aten::cumsum")),
            (5, "runtime_error", [], _err("RuntimeError", "Expected all tensors to be on the same device")),
            (6, "reference_error", [], _err("ValueError", "no input generator")),
            (7, "pass_with_fallback", ["aten::cumsum.out"], None),
            (8, "timeout", [], None),
        ]
        for i, st, fb, err in rows:
            repository.store_result(
                s,
                _result(
                    f"org/m{i}",
                    st,
                    week_day=W48,
                    fallback_ops=fb,
                    error=err,
                    versions=new,
                    task="fill-mask" if i % 2 == 0 else "text-generation",
                ),
            )
        repository.store_result(s, _result("org/m0", "pass", backend="cuda+inductor", week_day=W48))


@pytest.fixture
def client(database_url, monkeypatch):
    monkeypatch.setenv("ZOO_API_KEYS", "alpha-key, beta-key")
    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    queries.clear_cache()
    seed_history()
    from api.app import create_app

    return TestClient(create_app())


SCOPE = {"backend": "neuron", "tier": "tiny", "week": "2026-W48"}


def test_coverage_by_task_has_denominators_per_group(client):
    body = client.get("/api/v1/coverage", params={**SCOPE, "group_by": "task"}).json()
    # scope: 9 attempted, m6 reference_error → 8 valid; passing m0 m2 m3 m7; strict m0
    assert (body["attempted"], body["valid_reference"], body["passing"], body["strict"]) == (9, 8, 4, 1)
    assert body["functional_weighted"] == round((1000 + 800 + 700 + 300) / (5400 - 400), 6)
    groups = {g["group"]: g for g in body["groups"]}
    fm, tg = groups["fill-mask"], groups["text-generation"]  # even ids / odd ids
    assert (fm["attempted"], fm["valid_reference"], fm["passing"], fm["strict"]) == (5, 4, 2, 1)  # m0 m2 m4 m6 m8
    assert (fm["passing_downloads"], fm["valid_reference_downloads"]) == (1800, 1000 + 800 + 600 + 200)
    assert (tg["attempted"], tg["valid_reference"], tg["passing"]) == (4, 4, 2)  # m1 m3 m5 m7
    assert sum(g["attempted"] for g in body["groups"]) == body["attempted"]
    rows = list(
        csv.DictReader(
            io.StringIO(client.get("/api/v1/coverage", params={**SCOPE, "group_by": "task", "format": "csv"}).text)
        )
    )
    assert {r["group"] for r in rows} == {"fill-mask", "text-generation"} and all(r["group_by"] == "task" for r in rows)
    assert client.get("/api/v1/coverage", params={"group_by": "colour"}).status_code == 422


def test_coverage_history_per_week_and_backend(client):
    body = client.get("/api/v1/coverage/history", params={"tier": "tiny", "until": "2026-W48", "weeks": 4}).json()
    points = {(p["backend"], p["week"]): p for p in body["items"]}
    assert set(points) == {("neuron", "2026-W47"), ("neuron", "2026-W48"), ("cuda+inductor", "2026-W48")}
    assert points[("neuron", "2026-W47")]["passing"] == 4 and points[("neuron", "2026-W47")]["strict"] == 3
    assert points[("neuron", "2026-W48")]["passing"] == client.get("/api/v1/coverage", params=SCOPE).json()["passing"]
    assert [p["week"] for p in body["items"]] == sorted(p["week"] for p in body["items"])
    one = client.get("/api/v1/coverage/history", params={"backend": "cuda+inductor"}).json()["items"]
    assert [(p["backend"], p["week"], p["functional"]) for p in one] == [("cuda+inductor", "2026-W48", 1.0)]
    assert client.get("/api/v1/coverage/history", params={"until": "2026-W99"}).status_code == 422


def test_op_gaps_rank_single_blockers_by_downloads(client):
    body = client.get("/api/v1/ops/gaps", params=SCOPE).json()
    ops = [g["op"] for g in body["items"]]
    assert ops == ["aten::cumsum", "aten::_fft_r2c", "aten::sort", "aten::roll"]
    cumsum, fft = body["items"][0], body["items"][1]
    # m2 (800) and m7 (300, "aten::cumsum.out") fall back on cumsum alone; m3 also on sort; m4's error names two ops
    assert (cumsum["strict_models"], cumsum["strict_downloads"], cumsum["functional_models"]) == (2, 1100, 0)
    assert (cumsum["unlocked_downloads"], cumsum["affected_models"], cumsum["affected_downloads"]) == (
        1100,
        4,
        800 + 700 + 600 + 300,
    )
    assert [e["model_id"] for e in cumsum["example_models"]] == ["org/m2", "org/m7"]
    assert (fft["functional_models"], fft["functional_downloads"], fft["unlocked_downloads"]) == (1, 900, 900)
    assert body["items"][2]["unlocked_downloads"] == 0 and body["items"][3]["unlocked_downloads"] == 0
    assert cumsum["unlocked_share"] == round(1100 / body["valid_reference_downloads"], 6)
    assert "only blocker" in client.get("/openapi.json").json()["paths"]["/api/v1/ops/gaps"]["get"]["description"]
    rows = list(csv.DictReader(io.StringIO(client.get("/api/v1/ops/gaps", params={**SCOPE, "format": "csv"}).text)))
    assert (
        rows[0]["op"] == "aten::cumsum"
        and rows[0]["unlocked_downloads"] == "1100"
        and rows[0]["example_models"] == "org/m2 org/m7"
    )


def test_blocking_op_rule():
    assert queries.blocking_op("pass_with_fallback", ["aten::add.Tensor"], None) == ("aten::add", "strict")
    assert queries.blocking_op("pass_with_fallback", ["aten::a", "aten::b"], None) is None
    assert queries.blocking_op("compile_error", [], {"message": "no lowering for aten.index_put.default"}) == (
        "aten::index_put",
        "functional",
    )
    assert queries.blocking_op("runtime_error", [], {"message": "aten::x then aten::y"}) is None
    assert queries.blocking_op("mismatch", [], {"message": "aten::x"}) is None


def test_failures_grouped_by_signature(client):
    body = client.get("/api/v1/failures", params=SCOPE).json()
    # m6's reference_error is Zoo's gap: listed apart, after the backend's clusters, never counted as failing
    assert (body["failing_models"], body["zoo_models"], body["backend_clusters"]) == (4, 1, 4)
    assert body["failing_downloads"] + body["zoo_downloads"] == 900 + 600 + 500 + 400 + 200
    assert body["new_models"] == 4
    assert [f["owner"] for f in body["items"]] == ["backend"] * 4 + ["zoo"]
    assert body["items"][-1]["signature"].startswith("ValueError") and body["items"][-1]["statuses"] == {
        "reference_error": 1
    }
    sigs = [f["signature"] for f in body["items"]]
    assert sigs[0].startswith("BackendCompilerFailed: ") and "timeout" in sigs  # no error: grouped under its status
    first = body["items"][0]
    assert (first["models"], first["downloads"], first["statuses"], first["example_models"][0]["model_id"]) == (
        1,
        900,
        {"compile_error": 1},
        "org/m1",
    )
    only = client.get("/api/v1/failures", params={**SCOPE, "status": "runtime_error"}).json()
    assert only["failing_models"] == 2 and {f["error_type"] for f in only["items"]} == {"RuntimeError"}
    assert client.get("/api/v1/failures", params={"status": "pass"}).status_code == 422
    assert client.get("/api/v1/failures", params={**SCOPE, "format": "csv"}).text.startswith(
        "backend,tier,week,signature"
    )


def test_regressions_with_first_failing_versions(client):
    body = client.get("/api/v1/regressions", params=SCOPE).json()
    assert body["since"] == "2026-W47" and body["total"] == 1
    r = body["items"][0]
    assert (r["model_id"], r["status_before"], r["status_now"], r["downloads"]) == (
        "org/m1",
        "pass",
        "compile_error",
        900,
    )
    assert r["first_versions"]["torch"] == "2.13.0" and r["changed_versions"]["torch"] == ["2.12.0", "2.13.0"]
    assert "aten::_fft_r2c" in r["error_signature"]
    fixed = client.get("/api/v1/regressions", params={**SCOPE, "direction": "fixed"}).json()
    assert fixed["total"] == 0  # m3 went pass → pass_with_fallback: still passing, no transition


def test_backends_side_by_side(client):
    body = client.get("/api/v1/backends", params={"week": "2026-W48"}).json()
    assert [(i["backend"], i["tier"], i["attempted"]) for i in body["items"]] == [
        ("cuda+inductor", "tiny", 1),
        ("neuron", "tiny", 9),
    ]
    # side by side on the same models only: org/m0 is the one model both have a result for
    (common,) = body["common"]
    assert (common["tier"], common["common_models"], common["attempted"]) == (
        "tiny",
        1,
        {"cuda+inductor": 1, "neuron": 9},
    )
    assert [(c["backend"], c["attempted"], c["passing"]) for c in common["items"]] == [
        ("cuda+inductor", 1, 1),
        ("neuron", 1, 1),
    ]


def test_reports_built_then_stored(client):
    built = client.get("/api/v1/reports/2026-W48", params={"backend": "neuron", "tier": "tiny"}).json()
    assert built["stored"] is False and built["coverage"]["passing"] == 4
    assert [i["model_id"] for i in built["newly_failing"]["items"]] == ["org/m1"]
    assert built["op_gaps"]["items"][0]["op"] == "aten::cumsum"
    assert built["queries"]["headline"] == "/api/v1/coverage?backend=neuron&tier=tiny&week=2026-W48"
    from dashboards.report import store_weekly_report

    assert store_weekly_report("2026-W48") == "2026-W48"  # every backend and tier of the week
    stored = client.get("/api/v1/reports/2026-W48", params={"backend": "neuron"}).json()
    assert stored["stored"] is True and stored["coverage"] == built["coverage"]
    assert {(i["backend"], i["tier"]) for i in client.get("/api/v1/reports").json()["items"]} == {
        ("neuron", "tiny"),
        ("cuda+inductor", "tiny"),
    }
    md = client.get("/api/v1/reports/2026-W48", params={"backend": "neuron", "format": "md"})
    assert (
        md.headers["content-type"].startswith("text/markdown")
        and "## Newly failing (1 models, 900 downloads)" in md.text
    )
    assert "## Top op gaps" in md.text and "`aten::cumsum` | 1,100" in md.text
    assert client.get("/api/v1/reports/2026-W30").status_code == 404
    assert client.get("/api/v1/reports/2026-W60").status_code == 422


def test_validations_need_a_valid_key(client, monkeypatch):
    body = {"model_ids": ["org/m0", "arch:BertModel"], "backend": "neuron", "tier": "tiny"}
    assert client.post("/api/v1/validations", json=body).status_code == 401
    assert client.post("/api/v1/validations", json=body, headers={"X-API-Key": "wrong"}).status_code == 403
    r = client.post("/api/v1/validations", json=body, headers={"X-API-Key": "beta-key"})
    assert r.status_code == 202 and r.json()["status"] == "recorded" and r.json()["run_id"] >= 1
    r = client.post("/api/v1/validations", json=body, headers={"Authorization": "Bearer alpha-key"})
    assert r.status_code == 202
    assert (
        client.post(
            "/api/v1/validations", json={**body, "backend": "bad spec!"}, headers={"X-API-Key": "beta-key"}
        ).status_code
        == 422
    )
    calls = []
    from workers import publish

    monkeypatch.setattr(
        publish,
        "enqueue_models",
        lambda ids, backend, tier, run_id=None, timeout=600.0, precision="auto", env=None: (
            calls.append((ids, backend, tier, run_id, timeout, precision)) or [f"t{i}" for i in range(len(ids))]
        ),
    )
    monkeypatch.setenv("ZOO_BROKER_URL", "redis://127.0.0.1:1/0")
    r = client.post("/api/v1/validations", json={**body, "timeout": 30}, headers={"X-API-Key": "alpha-key"})
    assert r.status_code == 202 and r.json()["status"] == "queued" and r.json()["task_ids"] == ["t0", "t1"]
    assert calls == [(["org/m0", "arch:BertModel"], "neuron", "tiny", r.json()["run_id"], 30.0, "auto")]


def test_validations_refuse_an_unknown_backend_or_env(client, monkeypatch, tmp_path):
    from zoo_runner import envs

    body = {"model_ids": ["arch:BertModel"], "backend": "cpu+inductor", "tier": "tiny"}
    key = {"X-API-Key": "beta-key"}
    typo = client.post("/api/v1/validations", json={**body, "backend": "nueron"}, headers=key)
    assert typo.status_code == 422 and "did you mean" in typo.json()["detail"][0]["msg"]
    assert typo.json()["detail"][0]["loc"] == ["body", "backend"]
    monkeypatch.setenv("ZOO_ENV_HOME", str(tmp_path))
    missing = client.post("/api/v1/validations", json={**body, "env": "ov-nowhere"}, headers=key)
    assert missing.status_code == 422 and "unknown env 'ov-nowhere'" in missing.json()["detail"][0]["msg"]
    assert client.post("/api/v1/validations", json={**body, "env": "default"}, headers=key).status_code == 422
    (tmp_path / "ov-here").mkdir()
    (tmp_path / "ov-here" / envs.META).write_text("{}")  # an env this host has (`zoo env create`)
    here = client.post("/api/v1/validations", json={**body, "env": "ov-here"}, headers=key)
    assert here.status_code == 202 and here.json()["env"] == "ov-here"
    # a backend only the workers may know (their ZOO_PLUGINS, a package) is theirs to judge: not refused here
    assert client.post("/api/v1/validations", json={**body, "backend": "cpu+hidet"}, headers=key).status_code == 202
    # an env a fleet's worker consumes (zoo worker --env), with no rows yet and not on this host
    from workers import publish

    monkeypatch.setenv("ZOO_BROKER_URL", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(publish, "enqueue_models", lambda ids, *a, **k: ["t0"] * len(ids))
    monkeypatch.setattr(publish, "env_consumed", lambda env, timeout=1.0: env == "ov-fleet")
    fleet = client.post("/api/v1/validations", json={**body, "env": "ov-fleet"}, headers=key)
    assert fleet.status_code == 202 and fleet.json()["status"] == "queued", fleet.json()
    assert client.post("/api/v1/validations", json={**body, "env": "ov-nowhere"}, headers=key).status_code == 422
    monkeypatch.undo()  # the real one: a broker that does not answer knows no worker
    assert publish.env_consumed("ov-fleet", timeout=0.2) is False
    # the release comparison checks its backend the same way
    bad = client.get("/api/v1/compare", params={"env_a": "default", "env_b": "ov-here", "backend": "nueron"})
    assert bad.status_code == 422 and "did you mean" in bad.json()["detail"][0]["msg"]


def test_keys_are_kept_hashed(client):
    from api.security import hashed_keys, key_is_valid

    digests = client.app.state.api_key_digests
    assert len(digests) == 2 and all(isinstance(d, bytes) and len(d) == 32 for d in digests)
    assert b"alpha-key" not in b"".join(digests)
    assert key_is_valid("alpha-key", digests) and not key_is_valid("alpha-ke", digests)
    assert hashed_keys("") == ()


def test_etag_and_304(client):
    r = client.get("/api/v1/coverage", params=SCOPE)
    etag = r.headers["etag"]
    assert etag.startswith('W/"')
    again = client.get("/api/v1/coverage", params=SCOPE, headers={"If-None-Match": etag})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
    assert client.get("/api/v1/coverage", params=SCOPE, headers={"If-None-Match": 'W/"other"'}).status_code == 200
    assert client.get("/api/v1/ops/gaps", params=SCOPE).headers["etag"] != etag
    with session_scope() as s:  # new data: new body, new tag
        repository.store_result(s, _result("org/m9", "pass", week_day=W48 + dt.timedelta(hours=1)))
    assert client.get("/api/v1/coverage", params=SCOPE, headers={"If-None-Match": etag}).status_code == 200


def test_rate_limit_answers_429_with_retry_after(database_url, monkeypatch):
    monkeypatch.setenv("ZOO_RATE_LIMIT", "3")
    from api.app import create_app

    c = TestClient(create_app())
    codes = [c.get("/api/v1/healthz").status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    r = c.get("/api/v1/healthz")
    assert r.status_code == 429 and int(r.headers["retry-after"]) >= 1


def test_token_bucket_refills():
    from api.middleware import RateLimit

    rl = RateLimit(None, rate=60)  # one a second, bursts of 60
    assert all(rl.take("a", now=100.0) == 0 for _ in range(60))
    assert rl.take("a", now=100.0) == pytest.approx(1.0)
    assert rl.take("b", now=100.0) == 0  # per client
    assert rl.take("a", now=101.01) == 0


def test_openapi_lists_analytics_endpoints(client):
    paths = client.get("/openapi.json").json()["paths"]
    for p in [
        "/api/v1/coverage",
        "/api/v1/coverage/history",
        "/api/v1/ops/gaps",
        "/api/v1/failures",
        "/api/v1/regressions",
        "/api/v1/backends",
        "/api/v1/reports/{week}",
        "/api/v1/validations",
    ]:
        assert p in paths


def test_nul_bytes_find_nothing_instead_of_failing(client):
    assert client.get("/api/v1/models", params={"task": "\x00"}).json()["total"] == 0
    bad = client.get("/api/v1/failures", params={"backend": "\x00"})  # not a backend spec: 422, never a server error
    assert bad.status_code == 422 and "unknown backend" in bad.json()["detail"][0]["msg"]
    assert client.get("/api/v1/models", params={"search": "m\x001"}).json()["total"] == 0
    assert client.get("/api/v1/models/org%00m1").status_code == 404
