"""The dashboard over an empty database and over a single week, in headless Chromium: every chart
is either drawn or replaced by words, every table has a row (data or words), a one-week trend is
drawn as bars (not a lone dot), truncated lists say "N of M", and the model page prints no raw
float with more than 4 significant digits."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.conftest import child_env, seed_database, serving

pytestmark = pytest.mark.browser

PAGES = ("/", "/backends", "/ops", "/failures", "/regressions", "/models", "/releases")
FLOAT = re.compile(r"(?<![\w.])\d[\d,]*\.\d+(?:e[+-]?\d+)?(?![\w.])|(?<![\w.])\d+e[+-]?\d+(?![\w.])")


def significant_digits(text: str) -> int:
    mantissa = text.split("e")[0].replace(",", "").replace(".", "").lstrip("0")
    return len(mantissa)


def test_significant_digits_counts_what_a_reader_sees():
    assert significant_digits("1.326227800468871e-06") == 16
    assert significant_digits("0.000131") == 3 and significant_digits("1.33e-06") == 3
    assert FLOAT.findall("max abs 1.33e-06 · torch 2.13.0 · 1,234 B · 0.99999") == ["1.33e-06", "0.99999"]


@pytest.fixture(scope="module")
def empty(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("empty")
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp / 'zoo.db'}", ZOO_RATE_LIMIT="0")
    with serving(env, tmp) as base:
        yield base


@pytest.fixture(scope="module")
def one_week(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one-week")
    env, _ = seed_database(tmp, 150, 1)
    with serving(env, tmp) as base:
        yield base


def look(browser, url: str):
    """The page at ``url`` once its charts are drawn, and what is wrong with its empty states."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    resp = page.goto(url)
    assert resp.status == 200, url
    page.wait_for_selector("html[data-charts=ready]", timeout=15_000)
    problems = page.evaluate(
        """() => {
        const out = [];
        document.querySelectorAll('.chart').forEach(div => {
          const c = div.querySelector('canvas');
          const ch = c && c.chart;
          const points = ch ? ch.data.datasets.reduce((n, d) => n + d.data.filter(v => v !== null).length, 0) : 0;
          if (!ch || !ch.data.labels.length || !points) out.push('empty chart without words: ' + (c ? c.id : '?'));
        });
        document.querySelectorAll('p.chart-empty').forEach(p => {
          if (!p.innerText.trim()) out.push('chart replaced by nothing: ' + p.id);
        });
        document.querySelectorAll('table').forEach(t => {
          const body = t.tBodies[0];
          const name = t.id || t.rows[0].innerText.slice(0, 40);
          if (body && !body.rows.length) out.push('table of headers only: ' + name);
        });
        return out;
      }"""
    )
    assert not errors, f"{url}: {errors}"
    return page, problems


@pytest.mark.parametrize("path", PAGES)
def test_an_empty_database_says_so_in_words(browser, empty, path):
    page, problems = look(browser, empty + path)
    assert not problems, f"{path}: {problems}"
    page.close()


def test_an_empty_overview_says_how_to_start(browser, empty):
    page, _ = look(browser, empty + "/")
    assert "run `zoo run`" in page.inner_text("#trend-chart-empty")
    assert page.query_selector("#trend-chart") is None
    page.close()


@pytest.mark.parametrize("path", PAGES)
def test_one_week_of_results_has_no_empty_chart_or_table(browser, one_week, path):
    page, problems = look(browser, one_week + path)
    assert not problems, f"{path}: {problems}"
    page.close()


def test_a_one_week_trend_is_bars_not_a_dot(browser, one_week):
    page, _ = look(browser, one_week + "/")
    kind = page.evaluate("document.getElementById('trend-chart').chart.config.type")
    assert kind == "bar"
    # truncated lists say so and link the rest: 150 models, 50 on the overview
    more = page.inner_text("#models-more")
    assert more.startswith("50 of 150 models"), more
    assert page.get_attribute("#models-more a", "href") == "/models?page=2"
    breakdown = page.query_selector("#by-architecture p.more")
    rows = httpx.get(one_week + page.get_attribute("#by-architecture h3 a.api", "href"), timeout=30).json()["groups"]
    assert len(rows) > 12, "the seed has too few architectures to truncate"
    assert breakdown is not None and breakdown.inner_text().startswith(f"12 of {len(rows)} architecture rows")
    assert page.query_selector("#by-library p.more") is None  # not truncated: nothing said
    page.close()


def test_the_model_page_prints_no_float_longer_than_4_significant_digits(browser, one_week):
    mid = httpx.get(one_week + "/api/v1/models?limit=1&sort=-downloads", timeout=30).json()["items"][0]["model_id"]
    page, problems = look(browser, f"{one_week}/models/{mid}")
    assert not problems, problems
    text = page.inner_text(".results")
    floats = FLOAT.findall(text)
    assert floats, "no number on the model page to check"
    long = [f for f in floats if significant_digits(f) > 4]
    assert not long, f"raw floats on /models/{mid}: {long}"
    page.close()
