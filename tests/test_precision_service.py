"""Precision on the service side: the 0004 migration, one row per precision a backend was judged
at, coverage at the declared precision or at the one asked for, fingerprint sharing only within a
precision, --precision / "precision" through the CLI, the API and Celery, and the precision every
backend was judged at on the dashboard and in the report. SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import datetime as dt
import json

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, Table, inspect, select, text

from db import queries, repository
from db.models import Result, Run
from db.repository import CatalogEntry
from db.session import alembic_config, get_engine, session_scope
from tests.test_storage import _result
from zoo_runner.request import HARNESS_VERSION, ValidationRequest
from zoo_runner.result import ValidationResult

W48 = dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)  # 2026-W48
SCOPE = {"backend": "neuron", "tier": "tiny", "week": "2026-W48"}


def _judged(
    model_id: str, status: str, precision: str | None, source: str | None, strict_fp32: bool | None = None, **kw
) -> dict:
    details = {"harness_version": "1"}
    if source is not None:
        details["precision_source"] = source
    if strict_fp32 is not None:
        details["strict_fp32"] = strict_fp32
    return _result(model_id, status, precision=precision, details=details, **kw)


def seed_precisions() -> None:
    """neuron (declares bf16): org/a pass at bf16 and mismatch at --precision fp32; org/b pass at
    bf16 only; org/c refused before any precision applied (no verdict precision)."""
    with session_scope() as s:
        repository.store_snapshot(
            s, iter([CatalogEntry("org/a", 1000), CatalogEntry("org/b", 500), CatalogEntry("org/c", 100)]), "file:x"
        )
        repository.store_result(s, _judged("org/a", "pass", "bf16", "plugin", strict_fp32=False))
        repository.store_result(s, _judged("org/a", "mismatch", "fp32", "flag", strict_fp32=False))
        repository.store_result(s, _judged("org/b", "pass", "bf16", "plugin", strict_fp32=True))
        repository.store_result(s, _judged("org/c", "unsupported", None, None, reason="remote_code"))


# ---------------------------------------------------------------- the migration


def _old_row(conn) -> None:
    results = Table("results", MetaData(), autoload_with=conn)
    conn.execute(
        results.insert().values(
            model_id="org/old",
            revision="",
            tier="tiny",
            backend="neuron",
            status="pass",
            metrics={},
            fallback_ops=[],
            op_census={},
            versions={},
            details={"harness_version": "1"},
            started_at=W48,
            week="2026-W48",
            harness_version="1",
            attempts=1,
        )
    )


def test_migration_0004_backfills_and_keys_results_by_precision(database_url):
    from alembic import command

    cfg = alembic_config(database_url)
    with get_engine(database_url).connect() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0003")
        conn.commit()
        assert "precision" not in {c["name"] for c in inspect(conn).get_columns("results")}
        _old_row(conn)
        conn.commit()
        command.upgrade(cfg, "head")
        conn.commit()
        assert conn.execute(text("SELECT precision, precision_source FROM results")).all() == [("fp32", "default")]
        assert "precision" in {c["name"] for c in inspect(conn).get_columns("runs")}
        keys = {u["name"]: u["column_names"] for u in inspect(conn).get_unique_constraints("results")}
        assert keys["uq_result_key"] == [
            "model_id",
            "revision",
            "backend",
            "tier",
            "harness_version",
            "week",
            "precision",
            "env",  # 0006: an env's rows stand beside Zoo's own
        ]
    with session_scope() as s:  # an old row reads as judged at fp32 by default
        old = queries.result_dict(s.scalars(select(Result)).one())
        assert old["precision"] == "fp32"
        repository.store_result(s, _judged("org/old", "mismatch", "bf16", "flag"))  # beside it, not over it
    with session_scope() as s:
        assert sorted(s.execute(select(Result.precision, Result.precision_source, Result.status)).all()) == [
            ("bf16", "flag", "mismatch"),
            ("fp32", "default", "pass"),
        ]
    with get_engine(database_url).connect() as conn:  # and back: the flag row goes, the old key returns
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0003")
        conn.commit()
        assert conn.execute(text("SELECT status FROM results")).scalars().all() == ["pass"]
        assert "precision" not in {c["name"] for c in inspect(conn).get_columns("results")}


# ---------------------------------------------------------------- storage


def test_declared_and_flag_precisions_are_two_rows_that_round_trip(database_url):
    seed_precisions()
    with session_scope() as s:
        repository.store_result(
            s, _judged("org/a", "pass", "bf16", "plugin", strict_fp32=True)
        )  # same precision: replaces
    with session_scope() as s:
        rows = s.scalars(select(Result).where(Result.model_id == "org/a").order_by(Result.precision)).all()
        assert [(r.precision, r.precision_source, r.status, r.attempts) for r in rows] == [
            ("bf16", "plugin", "pass", 2),
            ("fp32", "flag", "mismatch", 1),
        ]
        out = {d["precision"]: d for d in map(queries.result_dict, rows)}
        assert out["bf16"]["details"]["precision_source"] == "plugin" and out["bf16"]["details"]["strict_fp32"] is True
        assert out["fp32"]["details"]["precision_source"] == "flag" and out["fp32"]["details"]["strict_fp32"] is False
        refused = s.scalars(select(Result).where(Result.model_id == "org/c")).one()
        assert (refused.precision, refused.precision_source) == ("fp32", None)  # keyed, but no verdict precision
        assert queries.result_dict(refused)["precision"] is None
        # the model page shows the declared verdict and the --precision one
        assert sorted((r.precision, r.precision_source) for r in queries.latest_results(s, "org/a")) == [
            ("bf16", "plugin"),
            ("fp32", "flag"),
        ]


def test_a_flag_naming_the_declared_precision_keeps_the_row_declared(database_url):
    with session_scope() as s:
        repository.store_snapshot(s, iter([CatalogEntry("org/a", 1000)]), "file:x")
        repository.store_result(s, _judged("org/a", "pass", "fp32", "default", backend="cpu"))
        repository.store_result(
            s, _judged("org/a", "mismatch", "fp32", "flag", backend="cpu")
        )  # `--precision fp32` on cpu
    with session_scope() as s:
        row = s.scalars(select(Result)).one()
        assert (row.status, row.precision_source, row.details["precision_source"]) == ("mismatch", "default", "flag")
        assert queries.coverage(s, backend="cpu", tier="tiny", week="2026-W48").attempted == 1


def test_a_row_without_precision_from_a_flag_run_is_not_the_declared_one(database_url):
    seed_precisions()
    from zoo_runner.result import empty_result

    # the model process died at --precision fp16: the parent's row carries the precision asked for
    crashed = empty_result(ValidationRequest("org/b", backend="neuron", precision="fp16"))
    assert (crashed["precision"], crashed["details"]["precision_source"]) == ("fp16", "flag")
    crashed.update(status="crash", started_at=_judged("org/b", "crash", None, None)["started_at"])
    crashed["details"]["harness_version"] = "1"
    refused = empty_result(ValidationRequest("org/c", backend="neuron"))  # left to the backend: no precision
    assert refused["precision"] is None and "precision_source" not in refused["details"]
    refused.update(status="unsupported", reason="remote_code", started_at=crashed["started_at"])
    refused["details"]["harness_version"] = "1"
    with session_scope() as s:
        repository.store_result(s, crashed)
        repository.store_result(s, refused)
    with session_scope() as s:
        rows = s.execute(
            select(Result.model_id, Result.precision, Result.precision_source, Result.status)
            .where(Result.model_id.in_(["org/b", "org/c"]))
            .order_by(Result.model_id, Result.precision)
        ).all()
        assert rows == [
            ("org/b", "bf16", "plugin", "pass"),
            ("org/b", "fp16", "flag", "crash"),
            ("org/c", "fp32", None, "unsupported"),
        ]
        assert queries.coverage(s, **SCOPE).status_counts["crash"] == 0
        assert queries.coverage(s, **SCOPE, precision="fp16").status_counts["crash"] == 1


def test_coverage_default_is_the_declared_precision_and_precision_filters(database_url):
    seed_precisions()
    with session_scope() as s:
        declared = queries.coverage(s, **SCOPE)
        fp32 = queries.coverage(s, **SCOPE, precision="fp32")
        bf16 = queries.coverage(s, **SCOPE, precision="bf16")
        fp16 = queries.coverage(s, **SCOPE, precision="fp16")
        history = queries.coverage_history(
            s, backend="neuron", tier="tiny", until="2026-W48", weeks=1, precision="fp32"
        )
        grouped = queries.coverage_grouped(s, "task", precision="fp32", **SCOPE)
        gaps = queries.op_gaps(s, **SCOPE, precision="fp32")
        failures = queries.failure_clusters(s, **SCOPE, precision="fp32")
    # declared: a and b pass at bf16, c refused; the fp32 mismatch of a is not counted
    assert (declared.precision, declared.attempted, declared.passing, declared.status_counts["mismatch"]) == (
        "declared",
        3,
        2,
        0,
    )
    assert (declared.passing_downloads, declared.valid_reference_downloads) == (1500, 1500)
    # fp32: only a's --precision fp32 row, and c (refused at every precision)
    assert (
        fp32.precision,
        fp32.attempted,
        fp32.passing,
        fp32.status_counts["mismatch"],
        fp32.status_counts["unsupported"],
    ) == ("fp32", 2, 0, 1, 1)
    assert (bf16.attempted, bf16.passing) == (3, 2)
    assert (fp16.attempted, fp16.passing) == (1, 0)
    assert [(h.precision, h.attempted, h.passing) for h in history] == [("fp32", 2, 0)]
    assert [(g, c.precision, c.attempted) for g, c in grouped] == [("fill-mask", "fp32", 2)]
    assert gaps["precision"] == "fp32" and gaps["valid_reference"] == 1
    assert failures["precision"] == "fp32" and (failures["failing_models"], failures["zoo_models"]) == (1, 1)


def test_precision_summary_says_what_each_backend_was_judged_at(database_url):
    seed_precisions()
    with session_scope() as s:
        repository.store_result(s, _judged("org/a", "pass", "tf32", "plugin", backend="cuda", strict_fp32=True))
        items = queries.precision_summary(s, "2026-W48")
    assert [(i["backend"], i["precision"], i["source"], i["rows"], i["strict_fp32"]) for i in items] == [
        ("cuda", "tf32", "plugin", 1, 1),
        ("neuron", "bf16", "plugin", 2, 1),
        ("neuron", "fp32", "flag", 1, 0),
    ]
    lines = [queries.precision_line(i) for i in items]
    assert lines[1] == "neuron · tiny: judged at bf16 (declared by the plugin); 2 rows, 1 strict fp32"
    assert lines[2] == "neuron · tiny: also judged at fp32 (asked for with --precision); 1 row"


def test_fingerprint_sharing_stays_within_a_precision(database_url):
    now = dt.datetime.now(dt.timezone.utc)  # sharing looks at this week's rows only

    def row(mid: str, status: str, precision: str, source: str) -> dict:
        r = _judged(mid, status, precision, source, week_day=now, fingerprint="fx")
        r["details"]["harness_version"] = HARNESS_VERSION
        return r

    with session_scope() as s:
        repository.store_result(s, row("org/a", "pass", "bf16", "plugin"))
    with session_scope() as s:
        auto = repository.shared_result(s, "fx", ValidationRequest("org/b", backend="neuron", tier="tiny"))
        asked = repository.shared_result(
            s, "fx", ValidationRequest("org/b", backend="neuron", tier="tiny", precision="fp32")
        )
    assert auto is not None and (auto["model_id"], auto["precision"], auto["details"]["deduplicated_from"]) == (
        "org/b",
        "bf16",
        "org/a",
    )
    assert asked is None, "a bf16 verdict must not stand for a --precision fp32 request"
    with session_scope() as s:
        repository.store_result(s, row("org/c", "mismatch", "fp32", "flag"))
    with session_scope() as s:
        asked = repository.shared_result(
            s, "fx", ValidationRequest("org/b", backend="neuron", tier="tiny", precision="fp32")
        )
        auto = repository.shared_result(s, "fx", ValidationRequest("org/b", backend="neuron", tier="tiny"))
        bf16 = repository.shared_result(
            s, "fx", ValidationRequest("org/b", backend="neuron", tier="tiny", precision="bf16")
        )
    assert (
        asked["status"] == "mismatch"
        and asked["details"]["deduplicated_from"] == "org/c"
        and asked["details"]["precision_source"] == "flag"
    )
    assert auto["status"] == "pass" and auto["details"]["deduplicated_from"] == "org/a"
    assert bf16 is None, "the declared bf16 row was not asked for with --precision bf16"


def test_a_declared_row_of_another_precision_is_not_shared(database_url):
    """OpenVINO declares bf16 on a CPU with bf16 units and fp32 on one without: a machine judging at
    bf16 must not take another machine's declared fp32 verdict for a model of the same graph."""
    now = dt.datetime.now(dt.timezone.utc)
    fp32 = _judged("org/a", "mismatch", "fp32", "plugin", backend="cpu+openvino", week_day=now, fingerprint="fx")
    fp32["details"]["harness_version"] = HARNESS_VERSION
    with session_scope() as s:
        repository.store_result(s, fp32)
    req = ValidationRequest("org/b", backend="cpu+openvino", tier="tiny")
    with session_scope() as s:
        assert repository.shared_result(s, "fx", req, judged="bf16") is None
        here = repository.shared_result(s, "fx", req, judged="fp32")
    assert here["status"] == "mismatch" and here["details"]["deduplicated_from"] == "org/a"
    failed = _result("org/c", "compile_error", backend="cpu+openvino", week_day=now, fingerprint="fy")
    failed["details"] = {"harness_version": HARNESS_VERSION}  # no precision applied: the same at each one
    with session_scope() as s:
        repository.store_result(s, failed)
    with session_scope() as s:
        shared = repository.shared_result(s, "fy", req, judged="bf16")
    assert shared["status"] == "compile_error" and shared["details"]["deduplicated_from"] == "org/c"
    refused = _result("org/d", "unsupported", backend="cpu+openvino", week_day=now, fingerprint="fz")
    refused["details"] = {"harness_version": HARNESS_VERSION}
    with session_scope() as s:
        repository.store_result(s, refused)
    with session_scope() as s:  # unsupported says something of org/d's own files: never org/b's verdict
        assert repository.shared_result(s, "fz", req, judged="bf16") is None


# ---------------------------------------------------------------- the API


@pytest.fixture
def client(database_url, monkeypatch):
    monkeypatch.setenv("ZOO_API_KEYS", "alpha-key")
    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    queries.clear_cache()
    seed_precisions()
    from api.app import create_app

    return TestClient(create_app())


def test_api_coverage_precision_dimension(client):
    declared = client.get("/api/v1/coverage", params=SCOPE).json()
    assert (declared["precision"], declared["attempted"], declared["passing"]) == ("declared", 3, 2)
    bf16 = client.get("/api/v1/coverage", params={**SCOPE, "precision": "bf16"}).json()
    assert (bf16["precision"], bf16["attempted"], bf16["passing"]) == ("bf16", 3, 2)
    fp32 = client.get("/api/v1/coverage", params={**SCOPE, "precision": "fp32", "group_by": "task"}).json()
    assert (fp32["precision"], fp32["status_counts"]["mismatch"], fp32["groups"][0]["precision"]) == ("fp32", 1, "fp32")
    hist = client.get("/api/v1/coverage/history", params={"backend": "neuron", "precision": "fp32"}).json()["items"]
    assert [(h["precision"], h["passing"]) for h in hist] == [("fp32", 0)]
    assert client.get("/api/v1/ops/gaps", params={**SCOPE, "precision": "fp32"}).json()["precision"] == "fp32"
    fp32_failures = client.get("/api/v1/failures", params={**SCOPE, "precision": "fp32"}).json()
    assert (fp32_failures["failing_models"], fp32_failures["zoo_models"]) == (1, 1)  # the mismatch; c is Zoo's
    for path in (
        "/api/v1/coverage",
        "/api/v1/coverage/history",
        "/api/v1/ops/gaps",
        "/api/v1/failures",
        "/api/v1/regressions",
    ):
        assert client.get(path, params={"precision": "xx"}).status_code == 422, path
        assert client.get(path, params={"precision": "auto"}).status_code == 422, (
            path
        )  # a filter names what rows were judged at


def test_api_results_carry_precision_and_details(client):
    body = client.get("/api/v1/models/org/a").json()
    latest = {r["precision"]: r for r in body["latest"]}
    assert set(latest) == {"bf16", "fp32"}
    assert (
        latest["bf16"]["details"]["precision_source"] == "plugin"
        and latest["fp32"]["details"]["precision_source"] == "flag"
    )
    assert body["latest_status"] == {"neuron/tiny": "pass"}, "the declared verdict, not the --precision one"
    hist = client.get("/api/v1/models/org/a/results").json()["items"]
    assert sorted(r["precision"] for r in hist) == ["bf16", "fp32"]
    assert client.get("/api/v1/models/org/c").json()["latest"][0]["precision"] is None
    assert client.get("/api/v1/models", params={"search": "org/a"}).json()["items"][0]["latest_status"] == {
        "neuron/tiny": "pass"
    }
    backends = client.get("/api/v1/backends").json()
    assert [
        (p["backend"], p["precision"], p["source"], p["declared"], p["rows"], p["strict_fp32"])
        for p in backends["precisions"]
    ] == [
        ("neuron", "bf16", "plugin", True, 2, 1),
        ("neuron", "fp32", "flag", False, 1, 0),
    ]


def test_api_validations_take_a_precision(client, monkeypatch):
    headers = {"X-API-Key": "alpha-key"}
    body = {"model_ids": ["org/a"], "backend": "neuron", "tier": "tiny"}
    r = client.post("/api/v1/validations", json=body, headers=headers)
    assert r.status_code == 202 and r.json()["precision"] == "auto"
    r = client.post("/api/v1/validations", json={**body, "precision": "bf16"}, headers=headers)
    assert r.status_code == 202 and r.json()["precision"] == "bf16"
    with session_scope() as s:
        assert s.get(Run, r.json()["run_id"]).precision == "bf16"
    assert client.post("/api/v1/validations", json={**body, "precision": "fp64"}, headers=headers).status_code == 422
    calls = []
    from workers import publish

    monkeypatch.setattr(
        publish,
        "enqueue_models",
        lambda ids, backend, tier, run_id=None, timeout=600.0, precision="auto", env=None: (
            calls.append(precision) or ["t0"]
        ),
    )
    monkeypatch.setenv("ZOO_BROKER_URL", "redis://127.0.0.1:1/0")
    r = client.post("/api/v1/validations", json={**body, "precision": "fp16"}, headers=headers)
    assert r.status_code == 202 and r.json()["status"] == "queued" and calls == ["fp16"]


# ---------------------------------------------------------------- CLI, in-process job, Celery


def test_cli_help_and_bad_precision(zoo):
    for cmd in ("validate", "run"):
        out = zoo([cmd, "--help"]).stdout
        assert "--precision {auto,fp32,tf32,bf16,fp16}" in out and "declared compute precision" in " ".join(
            out.split()
        ), cmd
    proc = zoo(["validate", "arch:BertModel", "--backend", "cpu", "--precision", "fp64"])
    err = proc.stderr.strip()
    assert proc.returncode == 2 and "Traceback" not in err and "invalid choice: 'fp64'" in err.splitlines()[-1]


def test_cli_validate_and_coverage_carry_the_precision(sqlite_url, monkeypatch, capsys):
    import services.validation
    from zoo import cli

    seen: list[ValidationRequest] = []

    def fake(req: ValidationRequest) -> ValidationResult:
        seen.append(req)
        return ValidationResult.from_dict(
            _judged(req.model_id, "pass", req.precision, "flag", backend=req.backend, week_day=W48)
        )

    monkeypatch.setattr(services.validation, "run_validation", fake)
    with session_scope() as s:
        repository.store_snapshot(s, iter([CatalogEntry("arch:BertModel", 10)]), "builtin")
    assert cli.main(["validate", "arch:BertModel", "--backend", "cpu", "--precision", "bf16", "--json"]) == 0
    assert seen[0].precision == "bf16" and json.loads(capsys.readouterr().out)["precision"] == "bf16"
    assert cli.main(["coverage", "--backend", "cpu", "--week", "2026-W48", "--precision", "bf16", "--json"]) == 0
    cov = json.loads(capsys.readouterr().out)
    assert (cov["precision"], cov["attempted"]) == ("bf16", 1)
    assert cli.main(["coverage", "--backend", "cpu", "--week", "2026-W48", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["attempted"] == 0  # a --precision run is not the declared coverage


def test_run_inprocess_carries_the_precision(sqlite_url, monkeypatch):
    import services.validation
    from zoo import jobs

    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen: list[str] = []

    def fake(req: ValidationRequest, run_id=None, task_id=None, dedup=True) -> ValidationResult:
        seen.append(req.precision)
        res = _judged(
            req.model_id, "pass", req.precision, "flag", backend=req.backend, week_day=dt.datetime.now(dt.timezone.utc)
        )
        with session_scope() as s:
            repository.store_result(s, res, run_id=run_id)
        return ValidationResult.from_dict(res)

    monkeypatch.setattr(services.validation, "validate_and_store", fake)
    out = jobs.main_job(top=2, backend="cpu", tier="tiny", timeout=5.0, precision="tf32")
    assert seen == ["tf32", "tf32"] and out["stored"] == 2
    assert (out["coverage"].precision, out["coverage"].attempted) == ("tf32", 2)


def test_celery_messages_and_tasks_carry_the_precision(sqlite_url, monkeypatch):
    import services.validation
    from services.planning import Candidate, Group
    from workers.celery_app import app
    from workers.publish import redis_messages, task_args
    from workers.tasks import validate_task

    group = Group(Candidate("org/a", 10, 0.5), [Candidate("org/b", 5, 0.25)])
    assert "precision" not in task_args(group, "cpu", "tiny", 1, 60.0)[0][0]  # auto: the default, left out
    args, kwargs = task_args(group, "cpu", "tiny", 1, 60.0, "bf16")
    ((_, raw),) = list(redis_messages(app, validate_task.name, "cpu", [("t-1", args, kwargs)]))
    body_args, body_kwargs, _ = json.loads(base64.b64decode(json.loads(raw)["body"]))
    assert body_args[0]["precision"] == "bf16" and body_kwargs == {"followers": ["org/b"]}
    seen: list[tuple[str, str]] = []

    def fake(req: ValidationRequest, run_id=None, task_id=None, dedup=True) -> ValidationResult:
        seen.append((req.model_id, req.precision))
        return ValidationResult.from_dict({"model_id": req.model_id, "tier": req.tier, "backend": req.backend,
                                           "status": "pass"})  # fmt: skip

    monkeypatch.setattr(services.validation, "validate_and_store", fake)
    assert validate_task.apply(args=body_args, kwargs=body_kwargs).get() == "pass"
    assert seen == [("org/a", "bf16"), ("org/b", "bf16")], "followers are judged at the leader's precision"


# ---------------------------------------------------------------- report and dashboard


def test_report_states_each_backends_precision(database_url):
    from dashboards.report import render_html, render_markdown
    from services.reports import build_report

    seed_precisions()
    queries.clear_cache()
    rep = build_report(week="2026-W48", backend="neuron", tier="tiny")
    assert rep["coverage"]["precision"] == "declared" and rep["coverage"]["attempted"] == 3
    assert [(p["precision"], p["source"]) for p in rep["precision"]] == [("bf16", "plugin"), ("fp32", "flag")]
    md = render_markdown(rep)
    assert "## Precision" in md
    assert "- neuron · tiny: judged at bf16 (declared by the plugin); 2 rows, 1 strict fp32" in md
    assert "- neuron · tiny: also judged at fp32 (asked for with --precision); 1 row" in md
    assert "judged at bf16 (declared by the plugin); 2 rows, 1 strict fp32" in render_html(rep)
    assert json.loads(json.dumps(rep, default=str))["precision_lines"][0].startswith("neuron · tiny: judged at bf16")


@pytest.mark.browser
def test_dashboard_shows_the_precision_of_backends_and_results(sqlite_url, tmp_path, browser):
    from tests.conftest import child_env, serving
    from tests.test_dashboard_pages import open_page

    seed_precisions()
    with session_scope() as s:
        repository.store_result(s, _judged("org/a", "pass", "tf32", "plugin", backend="cuda"))
    with serving(child_env(ZOO_DATABASE_URL=sqlite_url, ZOO_RATE_LIMIT="0"), tmp_path) as base:
        page, errors = open_page(browser, base + "/backends?week=2026-W48")
        head = page.locator("#backends thead th").all_inner_texts()[1:]
        cells = dict(zip(head, page.locator("#precision-row td.precision").all_inner_texts()))
        assert (
            "bf16" in cells["neuron · tiny"]
            and "+ fp32" in cells["neuron · tiny"]
            and "tf32" not in cells["neuron · tiny"]
        )
        assert "tf32" in cells["cuda · tiny"] and "bf16" not in cells["cuda · tiny"]
        assert page.locator("#precisions tbody tr").count() == 3
        assert page.locator("#precisions td.precision").all_inner_texts() == ["tf32", "bf16", "fp32"]
        assert not errors, errors
        page, errors = open_page(browser, base + "/models/org/a", charts=0)
        shown = sorted(page.locator("section.result h3 .precision").all_inner_texts())
        assert shown == [
            "bf16 (declared by the plugin)",
            "fp32 (asked for with --precision)",
            "tf32 (declared by the plugin)",
        ]
        assert "neuron/tiny@fp32" in page.locator("#status-history thead").inner_text()
        assert not errors, errors
