"""Snapshots and results in SQLite and PostgreSQL; coverage exactly as the SPEC defines it."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import func, select

from db import queries, repository
from db.models import Model, Result, Snapshot, SnapshotEntry
from db.repository import CatalogEntry
from db.session import session_scope, table_names


def _result(model_id: str, status: str, backend: str = "neuron", week_day: dt.datetime | None = None, **kw):
    when = (week_day or dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)).isoformat()
    r = {
        "model_id": model_id,
        "revision": None,
        "tier": "tiny",
        "backend": backend,
        "device": backend.split("+")[0],
        "dtype": "float32",
        "status": status,
        "reason": None,
        "fingerprint": "f" + model_id[-1],
        "library": "transformers",
        "architecture": "X",
        "task": "fill-mask",
        "metrics": {"max_abs_diff": 0.0},
        "fallback_ops": [],
        "op_census": {},
        "error": None,
        "versions": {"torch": "2"},
        "repro": "zoo validate",
        "started_at": when,
        "duration_s": 1.0,
        "details": {"harness_version": "1"},
    }
    r.update(kw)
    return r


def test_migrations_create_the_schema(database_url):
    with session_scope():
        pass
    assert {"models", "snapshots", "snapshot_entries", "runs", "results", "reports", "alembic_version"} <= set(
        table_names()
    )


def test_snapshots_are_dated_and_models_not_duplicated(database_url):
    entries = [
        CatalogEntry("org/a", 300),
        CatalogEntry("org/b", 200),
        CatalogEntry("org/a", 300),
        CatalogEntry("org/c", 100),
    ]
    with session_scope() as s:
        first = repository.store_snapshot(s, iter(entries), "file:x")
    with session_scope() as s:
        second = repository.store_snapshot(s, iter([CatalogEntry("org/a", 350), CatalogEntry("org/b", 180)]), "file:y")
    with session_scope() as s:
        assert s.scalar(select(func.count()).select_from(Model)) == 3
        assert s.scalar(select(func.count()).select_from(Snapshot)) == 2
        assert first.n_models == 3 and second.n_models == 2
        assert s.get(Model, "org/a").downloads == 350  # latest snapshot's downloads
        hist = s.scalars(
            select(SnapshotEntry.downloads).where(SnapshotEntry.model_id == "org/a").order_by(SnapshotEntry.snapshot_id)
        ).all()
        assert hist == [300, 350]


def test_result_upsert_one_row_per_key_and_week(database_url):
    with session_scope() as s:
        repository.store_result(s, _result("org/a", "mismatch"))
        repository.store_result(s, _result("org/a", "pass"))  # same week: replaces
        repository.store_result(
            s, _result("org/a", "pass", week_day=dt.datetime(2026, 11, 30, tzinfo=dt.timezone.utc))
        )  # next week: history
    with session_scope() as s:
        rows = s.scalars(select(Result).order_by(Result.week)).all()
        assert [(r.week, r.status, r.attempts) for r in rows] == [("2026-W48", "pass", 2), ("2026-W49", "pass", 1)]
        latest = queries.latest_results(s, "org/a")
        assert len(latest) == 1 and latest[0].week == "2026-W49"


def test_coverage_counts_weights_and_denominators(database_url):
    with session_scope() as s:
        repository.store_snapshot(
            s,
            iter(
                [
                    CatalogEntry("org/a", 1000),
                    CatalogEntry("org/b", 500),
                    CatalogEntry("org/c", 300),
                    CatalogEntry("org/d", 150),
                    CatalogEntry("org/e", 50),
                ]
            ),
            "file:x",
        )
        for mid, status in [
            ("org/a", "pass"),
            ("org/b", "pass_with_fallback"),
            ("org/c", "compile_error"),
            ("org/d", "reference_error"),
        ]:
            repository.store_result(s, _result(mid, status))
        repository.store_result(s, _result("org/e", "pass", backend="cuda"))  # other backend: out of scope
    with session_scope() as s:
        cov = queries.coverage(s, backend="neuron", tier="tiny", week="2026-W48")
    assert (cov.catalog_models, cov.attempted, cov.valid_reference, cov.passing, cov.strict) == (5, 4, 3, 2, 1)
    assert (cov.attempted_downloads, cov.valid_reference_downloads, cov.passing_downloads, cov.strict_downloads) == (
        1950,
        1800,
        1500,
        1000,
    )
    r = cov.rates
    assert r["functional"] == round(2 / 3, 6) and r["functional_weighted"] == round(1500 / 1800, 6)
    assert (
        r["strict_rate"] == round(1 / 3, 6) and r["harness"] == 0.75 and r["harness_weighted"] == round(1800 / 1950, 6)
    )
    assert cov.status_counts["compile_error"] == 1 and cov.status_counts["pass"] == 1

    # a slice (the backends benchmark's top N): every figure over those models' results only
    slice_ = ("org/a", "org/c")
    with session_scope() as s:
        cov = queries.coverage(s, backend="neuron", tier="tiny", week="2026-W48", models=slice_)
        fails = queries.failure_clusters(s, backend="neuron", tier="tiny", week="2026-W48", models=slice_)
        gaps = queries.op_gaps(s, backend="neuron", tier="tiny", week="2026-W48", models=("org/b",))
    assert (cov.attempted, cov.valid_reference, cov.passing, cov.catalog_models) == (2, 2, 1, 5)
    assert (fails["failing_models"], fails["failing_downloads"]) == (1, 300)
    assert gaps["valid_reference"] == 1
