"""Reports that keep the backend's failures apart from Zoo's own gaps (issue 28, "Honest reports").

A backend whose only failing rows are Zoo's ``unsupported`` / ``reference_error`` has no new
failures; where it has some of its own, they lead the clusters, however many downloads Zoo's gaps
hold; an op-gap table whose ops unlock nothing alone says why and shows the op sets that would."""

from __future__ import annotations

import datetime as dt

from db import queries, repository
from db.repository import CatalogEntry
from db.session import session_scope
from services.reports import build_report
from tests.test_api_analytics import _err
from tests.test_storage import _result

W48 = dt.datetime(2026, 11, 24, tzinfo=dt.timezone.utc)  # 2026-W48


def _seed(rows: list[tuple[int, str, str | None, dict | None, list[str]]], backend: str) -> None:
    with session_scope() as s:
        repository.store_snapshot(
            s, iter([CatalogEntry(f"org/m{i}", downloads=10_000 - 1000 * i) for i in range(10)]), "file:honest"
        )
        for i, st, reason, err, fb in rows:
            r = _result(f"org/m{i}", st, backend=backend, week_day=W48, error=err, fallback_ops=fb)
            r["reason"] = reason
            repository.store_result(s, r)


def test_a_backend_whose_only_failures_are_zoos_has_no_new_failures(sqlite_url):
    from dashboards.report import render_html, render_markdown

    queries.clear_cache()
    _seed(
        [
            (0, "unsupported", "library_unsupported", None, []),  # the most downloaded rows are Zoo's gaps
            (1, "unsupported", "remote_code", None, []),
            (2, "reference_error", None, _err("ValueError", "no input generator"), []),
            (3, "pass", None, None, []),
        ],
        "cpu+quiet",
    )
    rep = build_report(backend="cpu+quiet", tier="tiny", week="2026-W48")
    fc = rep["failure_clusters"]
    assert (fc["failing_models"], fc["new_models"], fc["zoo_models"]) == (0, 0, 3)
    assert fc["zoo_downloads"] == 10_000 + 9_000 + 8_000
    assert {c["owner"] for c in fc["items"]} == {"zoo"}
    md = render_markdown(rep)
    assert "New failures: **0** models (0 downloads)" in md
    backend_section = md.split("## Failure clusters of the backend", 1)[1].split("## Zoo's gaps", 1)[0]
    assert "None." in backend_section and "library_unsupported" not in backend_section
    assert "library_unsupported" in md.split("## Zoo's gaps", 1)[1]
    assert "Failing models (3 — the backend's 0, Zoo's gaps 3)" in md
    html = render_html(rep)
    assert "New failures: <b>0</b> models" in html and 'id="zoo-gaps"' in html


def test_backend_failures_lead_the_clusters_and_the_failing_list(sqlite_url):
    from dashboards.report import render_markdown

    queries.clear_cache()
    _seed(
        [
            (0, "unsupported", "library_unsupported", None, []),
            (1, "unsupported", "library_unsupported", None, []),
            (2, "reference_error", None, _err("ValueError", "no input generator"), []),
            (8, "compile_error", None, _err("BackendCompilerFailed", "backend raised: float64 is not supported"), []),
            (9, "mismatch", None, _err("Mismatch", "RMSE 0.2 exceeds the fp32 budget"), []),
            (4, "pass_with_fallback", None, None, ["aten::cumsum", "aten::sort"]),
            (5, "pass_with_fallback", None, None, ["aten::cumsum", "aten::sort"]),
            (6, "pass_with_fallback", None, None, ["aten::cumsum", "aten::sort", "aten::roll"]),
        ],
        "cpu+loud",
    )
    rep = build_report(backend="cpu+loud", tier="tiny", week="2026-W48")
    fc = rep["failure_clusters"]
    owners = [c["owner"] for c in fc["items"]]
    assert owners == ["backend", "backend", "zoo", "zoo"], owners  # 2,000 and 1,000 downloads before 19,000
    assert (fc["failing_models"], fc["failing_downloads"], fc["new_models"]) == (2, 3_000, 2)
    assert (
        rep["failing"][0]["model_id"] == "org/m8"
        and [f["owner"] for f in rep["failing"]] == ["backend"] * 2 + ["zoo"] * 3
    )
    md = render_markdown(rep)
    assert "New failures: **2** models (3,000 downloads)" in md
    assert md.index("BackendCompilerFailed") < md.index("## Zoo's gaps") < md.index("library_unsupported")
    # no op unlocks a model alone: the report says so and names the sets that would
    gaps = rep["op_gaps"]
    assert gaps["none_alone"] is True
    assert [(e["ops"], e["models"]) for e in gaps["op_sets"]] == [
        (["aten::cumsum", "aten::sort"], 2),
        (["aten::cumsum", "aten::roll", "aten::sort"], 1),
    ]
    assert "No op above unlocks a model alone" in md and "| `aten::cumsum`, `aten::sort` | 2 | 11,000 |" in md
