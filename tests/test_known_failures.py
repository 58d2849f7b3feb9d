"""Known failures, end to end: a quirk row names a failure Zoo sees (with a reason, a link and an
expiry); a matching result keeps its status and is flagged; the report and the failures page count
it apart from new failures, and an expired row is shown as "expired: re-check"."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json

import pytest

from dashboards.report import render_html, render_markdown
from db import queries, repository
from db.repository import CatalogEntry
from db.session import session_scope
from services.reports import build_report
from zoo_runner import quirks
from zoo_runner.engine import validate_here
from zoo_runner.request import ValidationRequest


def _validate(arch: str) -> dict:
    return validate_here(ValidationRequest(f"arch:{arch}", backend="cpu", reference_cache=""))


def test_a_real_known_failure_keeps_its_status_and_is_flagged():
    r = _validate("LayoutLMv2Model")  # needs detectron2: a failure Zoo really sees
    assert r["status"] == "reference_error"
    known = r["details"]["known_failure"]
    assert "detectron2" in known["reason"] and known["link"].startswith("https://")
    expires = dt.date.fromisoformat(known["expires"])
    assert expires > dt.date(2026, 12, 1) and known["expired"] is (dt.date.today() > expires)  # no time bomb


def test_a_passing_model_under_no_row_is_not_flagged():
    r = _validate("BertModel")
    assert r["status"] == "pass" and "known_failure" not in r["details"] and "known_failure_fixed" not in r["details"]


@pytest.fixture
def current_layoutlmv2(monkeypatch):
    """The LayoutLMv2 row with an expiry 90 days from today, whatever today is."""
    row = quirks.QUIRKS["layoutlmv2"]
    later = quirks.KnownFailure(row.known_failure.reason, row.known_failure.link, dt.date.today() + dt.timedelta(90))
    monkeypatch.setitem(quirks.QUIRKS, "layoutlmv2", dataclasses.replace(row, known_failure=later))
    return later.expires.isoformat()


@pytest.fixture
def expired_bark(monkeypatch):
    """The Bark row as it would stand after its expiry date."""
    row = quirks.QUIRKS["bark"]
    past = quirks.KnownFailure(row.known_failure.reason, row.known_failure.link, dt.date(2026, 1, 1))
    monkeypatch.setitem(quirks.QUIRKS, "bark", quirks.Quirk(row.reason, known_failure=past))


def test_report_and_failures_page_separate_new_known_and_expired(database_url, current_layoutlmv2, expired_bark):
    layout, bark, new = _validate("LayoutLMv2Model"), _validate("BarkModel"), _validate("BertModel")
    assert bark["status"] == "reference_error" and bark["details"]["known_failure"]["expired"] is True
    new.update(
        status="runtime_error",
        error={"type": "RuntimeError", "message": "boom", "signature": "RuntimeError: boom", "traceback": ""},
    )
    queries.clear_cache()
    with session_scope() as s:
        repository.store_snapshot(
            s, iter([CatalogEntry(r["model_id"], d) for r, d in ((layout, 300), (bark, 200), (new, 100))]), "file:known"
        )
        for r in (layout, bark, new):
            repository.store_result(s, r)
    with session_scope() as s:
        fc = queries.failure_clusters(s, backend="cpu", tier="tiny")
    assert (fc["new_models"], fc["known_models"], fc["expired_models"]) == (1, 2, 1)
    assert (fc["new_downloads"], fc["known_downloads"]) == (100, 500)
    by_example = {c["example_models"][0]["model_id"]: c for c in fc["items"]}
    assert by_example["arch:LayoutLMv2Model"]["known"] == 1 and by_example["arch:LayoutLMv2Model"]["expired"] == 0
    assert by_example["arch:BarkModel"]["expired"] == 1
    assert by_example["arch:BertModel"]["known_failure"] is None

    rep = build_report(backend="cpu", tier="tiny")
    md = render_markdown(rep)
    assert "New failures: **1** models" in md and "known failures: 2 models" in md and "(1 expired: re-check)" in md
    assert f"known until {current_layoutlmv2}" in md and "expired: re-check — BarkModel" in md
    html = render_html(rep)
    assert "expired: re-check" in html and f"known until {current_layoutlmv2}" in html
    json.dumps(rep, default=str)  # the JSON report carries them too

    # the dashboard's failures page, as served
    from fastapi.testclient import TestClient

    from api.app import create_app

    queries.clear_cache()
    page = TestClient(create_app()).get("/failures", params={"backend": "cpu", "tier": "tiny"})
    assert page.status_code == 200, page.text[:500]
    assert '<b id="new-failing">1</b> new, <b id="known-failing">2</b> known' in page.text
    assert "1 expired: re-check" in page.text and f"known until {current_layoutlmv2}" in page.text


def test_strings_a_model_wrote_render_as_inert_text_and_links_only_with_an_allowed_scheme():
    """A known failure, a triage or a message carrying a ``javascript:`` link, HTML or Markdown link syntax
    renders as text: the Markdown report escapes it and keeps only http(s) and site links; the pages'
    ``safe_url`` filter drops every other scheme."""
    from dashboards.format import md_code, md_escape, safe_url
    from dashboards.report import _known, _triage
    from dashboards.templating import templates

    bad_urls = ("javascript:alert(1)", "JaVaScRiPt:x", "data:text/html,x", "//evil.example/x", "vbscript:x")
    bad_urls += (" \tjavascript:x",)
    for bad in bad_urls:
        assert safe_url(bad) == "", bad
    for good in ("https://github.com/org/repo/issues/1", "http://example.org/x", "/findings/openvino/abc/repro.py"):
        assert safe_url(good) == good
    cell = md_escape("boom [why](javascript:alert(1)) <img src=x onerror=alert(1)> | `x` \x1b[31m")
    assert "](" not in cell.replace("\\](", "") and "<img" not in cell.replace("\\<img", "") and "\x1b" not in cell
    assert "\\|" in cell and md_code("a`b\x07") == "a'b"
    known = {"known_failure": {"reason": "<b>x</b>", "link": "javascript:alert(1)", "expires": "2099-12-31"}}
    assert "javascript" not in _known(known) and "why" not in _known(known) and "\\<b\\>" in _known(known)
    ok = {"known_failure": {"reason": "r", "link": "https://github.com/o/r/issues/2", "expires": "2099-12-31"}}
    assert "([why](https://github.com/o/r/issues/2))" in _known(ok)
    tri = {"triage": {"attribution": "backend", "repro_url": "javascript:alert(1)", "issue_url": "/f/issue.md"}}
    assert _triage(tri) == "backend · [issue.md](/f/issue.md)"
    page = templates.from_string('<a href="{{ u|safe_url }}">{{ m }}</a>').render(u="javascript:alert(1)", m="<script>")
    assert page == '<a href="">&lt;script&gt;</a>'
