"""Every dashboard page in headless Chromium over `zoo seed --models 300 --weeks 6`: it renders
with data, its charts are drawn by the vendored Chart.js, no console errors, and the numbers on
it are those of the API queries it links to."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from tests.conftest import seed_database, serving

pytestmark = pytest.mark.browser


class Served(str):
    """The base URL, with the environment and directory the server runs in."""

    def __new__(cls, base, env, cwd):
        obj = super().__new__(cls, base)
        obj.base, obj.env, obj.cwd = base, env, cwd
        return obj


@pytest.fixture(scope="module")
def seeded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pages")
    env, printed = seed_database(tmp, 300, 6)
    assert "seeded 5400 results" in printed
    with serving(env, tmp) as base:
        yield Served(base, env, tmp)


def open_page(browser, url, charts: int = 1):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
    resp = page.goto(url)
    assert resp.status == 200, url
    page.wait_for_selector("html[data-charts=ready]", timeout=15_000)
    drawn = page.evaluate(
        "Array.from(document.querySelectorAll('canvas[data-chart]'))"
        ".filter(c => c.chart && c.chart.data.datasets.length && c.width > 0).length"
    )
    assert drawn >= charts, f"{url}: {drawn} charts drawn"
    return page, errors


def api_links_answer(base, page) -> int:
    """Every "as JSON"/"CSV" link on the page is a working API query."""
    hrefs = page.eval_on_selector_all("a.api", "els => els.map(e => e.getAttribute('href'))")
    assert hrefs, "no API link on the page"
    for h in set(hrefs):
        assert h.startswith("/api/v1/"), h
        assert httpx.get(base + h, timeout=30).status_code == 200, h
    return len(hrefs)


def fmt(n: int) -> str:
    return f"{n:,}"


def test_overview(seeded, browser):
    base = seeded
    page, errors = open_page(browser, base + "/")
    backends = httpx.get(f"{base}/api/v1/backends").json()["items"]
    cards = page.locator(".backend-card")
    assert cards.count() == len(backends) == 3
    for i, b in enumerate(backends):
        text = cards.nth(i).inner_text()
        assert (
            f"{100 * b['functional_weighted']:.1f}%" in text
            and fmt(b["passing_downloads"]) in text
            and fmt(b["valid_reference_downloads"]) in text
        )
        # the long tail beside the head: coverage by count on every card, with its denominator
        count = cards.nth(i).locator(".by-count").inner_text()
        assert f"{100 * b['functional']:.1f}%" in count and f"{b['passing']} / {b['valid_reference']} models" in count
        assert (
            f"judged at {'tf32' if b['backend'].startswith('cuda') else 'bf16'}" in text
        )  # what seeded backends declare
    cov = httpx.get(f"{base}/api/v1/coverage", params={"group_by": "task"}).json()
    assert f"{100 * cov['functional_weighted']:.1f}%" in page.inner_text("#headline")
    first = cov["groups"][0]
    row = page.locator("#by-task tbody tr").first.inner_text()
    assert (first["group"] or "unknown") in row and fmt(first["passing_downloads"]) in row
    assert f"{100 * first['functional']:.1f}%" in row and f"{first['passing']} / {first['valid_reference']}" in row
    hist = httpx.get(
        f"{base}/api/v1/coverage/history", params={"tier": cov["tier"], "until": cov["week"], "weeks": 12}
    ).json()["items"]
    series = page.evaluate(
        "document.getElementById('trend-chart').chart.data.datasets.map(d => [d.label, d.data.length])"
    )
    assert len(series) == 3 and all(n == 6 for _, n in series) and len(hist) == 18
    assert page.locator("#models tbody tr").count() == 50
    api_links_answer(base, page)
    assert not errors, errors


def test_models_search_and_model_page(seeded, browser):
    base = seeded
    page, errors = open_page(browser, base + "/models?search=model-00001", charts=0)
    api_total = httpx.get(f"{base}/api/v1/models", params={"search": "model-00001"}).json()["total"]
    assert page.inner_text("#total").startswith(f"{api_total} models")
    mid = page.locator("#models tbody a").first.inner_text()
    page.locator("#models tbody a").first.click()
    page.wait_for_selector("html[data-charts=ready]")
    assert page.url.endswith(f"/models/{mid}")
    detail = httpx.get(f"{base}/api/v1/models/{mid}").json()
    assert page.locator("#status-history tbody tr").count() == 6  # one row per week
    assert page.locator("section.result").count() == len(detail["latest"]) == 3
    shown = page.locator("section.result h3 .precision").all_inner_texts()
    assert len(shown) == 3
    for r, text in zip(detail["latest"], shown):
        assert r["repro"] in page.inner_text("body")
        expected = "n/a" if r["precision"] is None else f"{r['precision']} (declared by the plugin)"
        assert text == expected, (r["backend"], text)
        for op in r["fallback_ops"]:
            assert op in page.inner_text("body")
    assert f"/badge/{mid}.svg" in page.inner_text("#badge-md")
    assert page.evaluate("document.querySelector('img.badge').naturalWidth") > 0
    api_links_answer(base, page)
    assert not errors, errors


def test_ops_page(seeded, browser):
    base = seeded
    page, errors = open_page(browser, base + "/ops")
    gaps = httpx.get(f"{base}/api/v1/ops/gaps").json()
    first = page.locator("#gaps tbody tr").first.inner_text()
    assert gaps["items"][0]["op"] in first and fmt(gaps["items"][0]["unlocked_downloads"]) in first
    assert page.locator("#gaps tbody tr").count() == len(gaps["items"])
    api_links_answer(base, page)
    assert not errors, errors


def test_failures_page(seeded, browser):
    base = seeded
    page, errors = open_page(browser, base + "/failures")
    data = httpx.get(f"{base}/api/v1/failures").json()
    assert page.inner_text("#failing-total") == fmt(data["failing_models"])
    first = page.locator("#clusters tbody tr").first.inner_text()
    assert data["items"][0]["signature"][:60] in first and fmt(data["items"][0]["downloads"]) in first
    api_links_answer(base, page)
    assert not errors, errors


def test_regressions_page(seeded, browser):
    base = seeded
    page, errors = open_page(browser, base + "/regressions", charts=0)
    data = httpx.get(f"{base}/api/v1/regressions").json()
    assert data["total"] > 0
    assert page.inner_text("#regressed-total") == str(data["total"])
    first = page.locator("#regressed tbody tr").first.inner_text()
    assert data["items"][0]["model_id"] in first
    for k, v in data["items"][0]["first_versions"].items():
        assert f"{k} {v}" in first
    api_links_answer(base, page)
    assert not errors, errors


def test_backends_page(seeded, browser):
    base = seeded
    page, errors = open_page(browser, base + "/backends")
    items = httpx.get(f"{base}/api/v1/backends").json()["items"]
    head = page.locator("#backends thead").inner_text()
    for b in items:
        assert f"{b['backend']} · {b['tier']}" in head
    assert page.evaluate("document.getElementById('backends-chart').chart.data.datasets.length") == len(items)
    # the precision each backend was judged at (seeded: neuron declares bf16, CUDA tf32)
    precisions = httpx.get(f"{base}/api/v1/backends").json()["precisions"]
    declared = {(p["backend"], p["tier"]): p["precision"] for p in precisions if p["declared"]}
    assert declared == {
        ("neuron", "tiny"): "bf16",
        ("neuron+neuron", "tiny"): "bf16",
        ("cuda+inductor", "tiny"): "tf32",
    }
    cells = page.locator("#precision-row td.precision").all_inner_texts()
    assert [c.split()[0] for c in cells] == [declared[(b["backend"], b["tier"])] for b in items]
    assert page.locator("#precisions tbody tr").count() == len(precisions)
    # side by side on the same models: each tier's intersection, with its size in the header
    common = httpx.get(f"{base}/api/v1/backends").json()["common"]
    assert common, "the seeded history has several backends at tier tiny"
    for t in common:
        header = page.locator(f"#common-{t['tier']} thead").inner_text()
        assert f"{t['common_models']} models in common" in header
        assert all(c["attempted"] <= t["common_models"] for c in t["items"])
    api_links_answer(base, page)
    assert not errors, errors


def test_report_page_and_badge(seeded, browser):
    base = seeded
    week = httpx.get(f"{base}/api/v1/coverage").json()["week"]
    page, errors = open_page(browser, base + f"/reports/{week}", charts=2)
    rep = httpx.get(f"{base}/api/v1/reports/{week}").json()
    c = rep["coverage"]
    assert f"{100 * c['functional_weighted']:.1f}%" in page.inner_text("#headline")
    assert f"({rep['newly_failing']['total']} models" in page.inner_text("#newly_failing")
    for q in rep["queries"].values():
        if "<" not in q:
            assert httpx.get(base + q, timeout=30).status_code == 200, q
    api_links_answer(base, page)
    assert not errors, errors
    mid = rep["failing"][0]["model_id"]
    svg = httpx.get(f"{base}/badge/{mid}.svg")
    assert svg.headers["content-type"].startswith("image/svg+xml") and "<svg" in svg.text
    assert "unknown" in httpx.get(f"{base}/badge/nobody/nothing.svg").text


def test_report_html_is_standalone(seeded, browser, tmp_path):
    """`zoo report --format html` inlines Chart.js and the styles: the file works on its own."""
    base, env, cwd = seeded.base, seeded.env, seeded.cwd
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "report", "--format", "html", "--output", str(out)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    html = out.read_text()
    assert "/static/" not in html and "Chart.js v4.5.1" in html
    page, errors = open_page(browser, out.as_uri(), charts=2)
    week = httpx.get(f"{base}/api/v1/coverage").json()["week"]
    c = httpx.get(f"{base}/api/v1/reports/{week}").json()["coverage"]
    assert f"{100 * c['functional_weighted']:.1f}%" in page.inner_text("#headline")
    assert not errors, errors
