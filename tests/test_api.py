"""The REST API over real data, on SQLite and PostgreSQL."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi.testclient import TestClient

from db import repository
from db.repository import CatalogEntry
from db.session import session_scope
from tests.test_storage import _result


@pytest.fixture
def client(database_url):
    with session_scope() as s:
        repository.store_snapshot(
            s,
            iter(
                [
                    CatalogEntry(
                        f"org/m{i}",
                        downloads=1000 - i * 10,
                        library="transformers",
                        task="fill-mask" if i % 2 else "text-generation",
                    )
                    for i in range(30)
                ]
                + [CatalogEntry("arch:BertModel", 5, library="transformers")]
            ),
            "file:x",
        )
        repository.store_result(s, _result("org/m0", "pass"))
        repository.store_result(
            s,
            _result(
                "org/m1",
                "compile_error",
                error={
                    "type": "BackendCompilerFailed",
                    "message": "boom",
                    "signature": "BackendCompilerFailed: boom",
                    "traceback": "",
                },
            ),
        )
        repository.store_result(s, _result("arch:BertModel", "pass", backend="cpu+inductor"))
    from api.app import create_app

    return TestClient(create_app())


def test_healthz(client, database_url):
    body = client.get("/api/v1/healthz").json()
    assert body["status"] == "ok" and body["database"] == (
        "sqlite" if database_url.startswith("sqlite") else "postgresql"
    )


def test_models_sorted_paginated_with_total(client):
    page = client.get("/api/v1/models", params={"sort": "-downloads", "limit": 12}).json()
    assert page["total"] == 31 and len(page["items"]) == 12
    downloads = [m["downloads"] for m in page["items"]]
    assert downloads == sorted(downloads, reverse=True)
    seen = [m["model_id"] for m in page["items"]]
    while page["next_cursor"]:
        page = client.get(
            "/api/v1/models", params={"sort": "-downloads", "limit": 12, "cursor": page["next_cursor"]}
        ).json()
        seen += [m["model_id"] for m in page["items"]]
    assert len(seen) == len(set(seen)) == 31
    assert client.get("/api/v1/models", params={"cursor": "garbage!"}).status_code == 400


def test_models_filters_and_search(client):
    assert client.get("/api/v1/models", params={"search": "m1"}).json()["total"] == 11  # m1, m10..m19
    assert client.get("/api/v1/models", params={"task": "fill-mask"}).json()["total"] == 15
    body = client.get("/api/v1/models", params={"status": "compile_error", "backend": "neuron"}).json()
    assert [m["model_id"] for m in body["items"]] == ["org/m1"]
    assert body["items"][0]["latest_status"] == {"neuron/tiny": "compile_error"}


def test_model_detail_with_slash_and_arch_ids(client):
    body = client.get("/api/v1/models/org/m1").json()
    assert body["model_id"] == "org/m1" and body["latest"][0]["status"] == "compile_error"
    assert body["latest"][0]["error"]["signature"] == "BackendCompilerFailed: boom"
    arch = client.get("/api/v1/models/arch:BertModel").json()
    assert arch["latest"][0]["backend"] == "cpu+inductor" and arch["latest"][0]["status"] == "pass"
    assert client.get("/api/v1/models/nobody/nothing").status_code == 404


def test_model_results_history_and_csv(client):
    hist = client.get("/api/v1/models/org/m0/results").json()
    assert hist["total"] == 1 and hist["items"][0]["status"] == "pass"
    one = client.get(f"/api/v1/results/{hist['items'][0]['id']}").json()  # each item carries its result id
    assert (one["model_id"], one["id"]) == ("org/m0", hist["items"][0]["id"])
    latest = client.get("/api/v1/models/org/m0").json()["latest"]
    assert latest[0]["id"] == hist["items"][0]["id"]
    r = client.get("/api/v1/models/org/m0/results", params={"format": "csv"})
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert rows[0]["model_id"] == "org/m0" and rows[0]["status"] == "pass"


def test_coverage_endpoint_matches_definitions(client):
    cov = client.get("/api/v1/coverage", params={"backend": "neuron", "tier": "tiny", "week": "2026-W48"}).json()
    assert (cov["attempted"], cov["valid_reference"], cov["passing"]) == (2, 2, 1)
    assert cov["functional"] == 0.5 and cov["functional_weighted"] == round(1000 / 1990, 6)
    assert cov["catalog_models"] == 31
    bad = client.get("/api/v1/coverage", params={"week": "not-a-week"})
    assert bad.status_code == 422
    assert bad.json()["detail"][0]["msg"].startswith("'not-a-week' is not an ISO week YYYY-Www (e.g. ")  # words


def test_openapi_lists_the_endpoints(client):
    paths = client.get("/openapi.json").json()["paths"]
    for p in [
        "/api/v1/healthz",
        "/api/v1/models",
        "/api/v1/models/{model_id}",
        "/api/v1/models/{model_id}/results",
        "/api/v1/coverage",
    ]:
        assert p in paths
