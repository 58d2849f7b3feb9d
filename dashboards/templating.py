"""The dashboards' Jinja environment and what the report page and the other pages share: the
template globals, the status colours, the chart palette and the report page's context. Both
:mod:`dashboards.pages` (served) and :mod:`dashboards.report` (standalone HTML file) import it, so
neither imports the other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, FileSystemLoader, select_autoescape

from services import dashboard as queries
from services.reports import api_url as api
from zoo_runner.statuses import Status

from .format import delta, num, p100, pct, safe_url, sig, size, versions

HERE = Path(__file__).parent
STATIC = HERE / "static"
CHART_JS = "chart-4.5.1.umd.min.js"
templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
templates.filters["safe_url"] = safe_url  # every link a page renders from stored data: http(s) or this site
STATUS_COLORS = {
    Status.PASS: "#2e9e6a",
    Status.PASS_WITH_FALLBACK: "#9cc94a",
    Status.MISMATCH: "#e0524a",
    Status.COMPILE_ERROR: "#f08c2e",
    Status.RUNTIME_ERROR: "#f5b041",
    Status.CRASH: "#b04aa8",
    Status.TIMEOUT: "#8e6bbf",
    Status.OOM: "#d17fc7",
    Status.REFERENCE_ERROR: "#9aa3ad",
    Status.UNSUPPORTED: "#c5cbd3",
}
PALETTE = ["#1f6fb2", "#e07b39", "#2e9e6a", "#b04aa8", "#c9a227", "#4aa3b0", "#7a7a7a", "#d1495b"]


def plotted(cfg: dict[str, Any]) -> bool:
    """Whether a Chart.js config has a point to draw (a label and a value that is not null)."""
    data = cfg.get("data") or {}
    return bool(data.get("labels")) and any(
        v is not None for d in data.get("datasets") or [] for v in d.get("data") or []
    )


def drawable(cfg: dict[str, Any]) -> dict[str, Any]:
    """``cfg`` as it should be drawn: a line over a single week is a lone dot in a corner, so one
    label makes it bars (one per series, with its value), everything else is left as it is."""
    if cfg.get("type") != "line" or len((cfg.get("data") or {}).get("labels") or []) != 1:
        return cfg
    return {**cfg, "type": "bar"}


templates.globals.update(
    plotted=plotted,
    drawable=drawable,
    pct=pct,
    num=num,
    sig=sig,
    size=size,
    api=api,
    quote=quote,
    CHART_JS=CHART_JS,
    STATUS_COLORS=STATUS_COLORS,
    versions=versions,
    precision_line=queries.precision_line,
)


def report_context(rep: dict[str, Any]) -> dict[str, Any]:
    """What ``report.html`` renders a weekly report (:func:`services.reports.build_report`) with: the
    report, its formatters and its two charts (coverage trend, op gaps)."""
    hist = rep.get("history") or []
    trend = {
        "type": "line",
        "data": {
            "labels": [h["week"] for h in hist],
            "datasets": [
                {
                    "label": "functional, by downloads",
                    "data": [p100(h["functional_weighted"]) for h in hist],
                    "borderColor": PALETTE[0],
                    "backgroundColor": PALETTE[0],
                },
                {
                    "label": "strict, by downloads",
                    "data": [p100(h["strict_weighted"]) for h in hist],
                    "borderColor": PALETTE[1],
                    "backgroundColor": PALETTE[1],
                },
                {
                    "label": "harness, by downloads",
                    "data": [p100(h["harness_weighted"]) for h in hist],
                    "borderColor": PALETTE[2],
                    "backgroundColor": PALETTE[2],
                },
            ],
        },
        "options": {
            "scales": {"y": {"min": 0, "max": 100, "title": {"display": True, "text": "%"}}},
            "plugins": {"legend": {"position": "bottom"}},
        },
    }
    gaps = (rep.get("op_gaps") or {}).get("items", [])[:10]
    gap_chart = {
        "type": "bar",
        "data": {
            "labels": [e["op"] for e in gaps],
            "datasets": [
                {
                    "label": "downloads unlocked",
                    "data": [e["unlocked_downloads"] for e in gaps],
                    "backgroundColor": STATUS_COLORS[Status.COMPILE_ERROR],
                }
            ],
        },
        "options": {"indexAxis": "y", "plugins": {"legend": {"display": False}}},
    }
    return {"rep": rep, "pct": pct, "delta": delta, "trend": trend, "gap_chart": gap_chart}
