"""`zoo serve` as users run it; pages rendered in headless Chromium; the weekly report."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from tests.conftest import child_env, serving


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A database holding one real validation (arch:BertModel on cpu) plus a catalog, served by `zoo serve`."""
    tmp = tmp_path_factory.mktemp("serve")
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp / 'zoo.db'}")
    for args in (
        ["sync", "--builtin"],
        ["validate", "arch:BertModel", "--backend", "cpu"],
        ["validate", "arch:GPT2LMHeadModel", "--backend", "cpu", "--tier", "census"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "zoo.cli", *args], env=env, cwd=tmp, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, proc.stderr
    with serving(env, tmp) as base:
        yield base, env, tmp


def test_api_returns_latest_result_for_arch_model(served):
    base, _, _ = served
    body = httpx.get(f"{base}/api/v1/models/arch:BertModel").json()
    latest = {(r["backend"], r["tier"]): r for r in body["latest"]}
    r = latest[("cpu", "tiny")]
    assert r["status"] == "pass" and r["fingerprint"] and r["repro"].startswith("zoo validate arch:BertModel")
    assert body["downloads"] > 0  # catalog facts come with it


def _page(browser, url):
    page = browser.new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    resp = page.goto(url)
    assert resp.status == 200
    return page, errors


def test_overview_shows_coverage_numbers_in_chromium(served, browser):
    base, _, _ = served
    cov = httpx.get(f"{base}/api/v1/coverage").json()
    page, errors = _page(browser, f"{base}/")
    headline = page.inner_text("#headline")
    assert "functional, by downloads" in headline
    expected = f"{100 * cov['functional_weighted']:.1f}%"
    assert expected in headline
    assert f"{cov['passing_downloads']:,}" in headline  # numerator and denominator shown
    assert page.inner_text("#scope-backend") == cov["backend"]
    link = page.locator("#models a", has_text="arch:BertModel")
    link.click()
    page.wait_for_load_state()
    assert page.url.endswith("/models/arch:BertModel")
    assert "zoo validate arch:BertModel" in page.inner_text("code.repro")
    assert not errors, errors


def test_report_markdown_has_headline_denominators_and_failures(served):
    _, env, tmp = served
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "report", "--format", "md", "--backend", "cpu", "--tier", "tiny"],
        env=env,
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    md = proc.stdout
    assert md.startswith("# Zoo coverage report — ")
    assert "Download-weighted functional coverage: 100.0%" in md
    assert "| functional | 100.0% | 1 / 1 |" in md
    assert "## Status counts" in md and "| pass | 1 |" in md
    assert "## Failing models (0)" in md
    data = json.loads(
        subprocess.run(
            [sys.executable, "-m", "zoo.cli", "report", "--format", "json", "--backend", "cpu", "--tier", "tiny"],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
    assert data["coverage"]["passing"] == 1 and data["coverage"]["catalog_models"] == 78
