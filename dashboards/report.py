"""The weekly coverage report: headline numbers with denominators, status counts, failing models.

Every number here comes from a query the API exposes: /api/v1/coverage (headline, statuses) and
/api/v1/models?status=... (failing models).
"""
from __future__ import annotations

import datetime as dt
import html
import json
from typing import Any

from sqlalchemy import select

from db import queries
from db.models import Report, Result, SnapshotEntry
from db.repository import iso_week, latest_snapshot
from db.session import session_scope
from zoo_runner.statuses import PASSING


def _previous_week(week: str) -> str:
    year, w = week.split("-W")
    monday = dt.date.fromisocalendar(int(year), int(w), 1)
    return iso_week(monday - dt.timedelta(days=7))


def build_report(week: str | None = None, backend: str | None = None, tier: str | None = None) -> dict[str, Any]:
    with session_scope() as s:
        backend, tier, week_found = queries.default_scope(s, backend, tier, week)
        week = week or week_found or iso_week()
        cov = queries.coverage(s, backend=backend, tier=tier, week=week)
        prev = queries.coverage(s, backend=backend, tier=tier, week=_previous_week(week))
        snap = latest_snapshot(s)
        weights = {}
        if snap:
            weights = dict(s.execute(select(SnapshotEntry.model_id, SnapshotEntry.downloads).where(SnapshotEntry.snapshot_id == snap.id)).all())
        rows = s.scalars(select(Result).where(Result.backend == backend, Result.tier == tier, Result.week == week).order_by(Result.started_at.desc())).all() if backend else []
        latest: dict[str, Result] = {}
        for r in rows:
            latest.setdefault(r.model_id, r)
        failing = [
            {
                "model_id": r.model_id,
                "status": r.status,
                "reason": r.reason,
                "downloads": weights.get(r.model_id, 0),
                "error": ((r.error or {}).get("message") or "")[:200],
                "repro": r.repro,
            }
            for r in latest.values()
            if r.status not in PASSING
        ]
        failing.sort(key=lambda f: -f["downloads"])
        return {
            "week": week,
            "backend": backend,
            "tier": tier,
            "generated_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
            "coverage": cov.to_dict(),
            "previous": prev.to_dict() if prev.attempted else None,
            "failing": failing,
        }


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _delta(cur: float | None, prev: float | None) -> str:
    if cur is None or prev is None:
        return ""
    d = 100 * (cur - prev)
    return f" ({'+' if d >= 0 else ''}{d:.1f} pts vs last week)"


def render_markdown(rep: dict[str, Any]) -> str:
    c, p = rep["coverage"], rep["previous"] or {}
    lines = [
        f"# Zoo coverage report — {rep['week']}",
        "",
        f"Backend `{rep['backend']}` · tier `{rep['tier']}` · catalog snapshot {c['snapshot_id']} ({c['catalog_models']} models) · generated {rep['generated_at']}",
        "",
        "## Headline",
        "",
        f"**Download-weighted functional coverage: {_pct(c['functional_weighted'])}**{_delta(c['functional_weighted'], p.get('functional_weighted'))} "
        f"— {c['passing_downloads']:,} of {c['valid_reference_downloads']:,} downloads with a valid reference.",
        "",
        "| metric | by count | numerator / denominator | by downloads | numerator / denominator |",
        "|---|---:|---:|---:|---:|",
        f"| functional | {_pct(c['functional'])} | {c['passing']} / {c['valid_reference']} | {_pct(c['functional_weighted'])} | {c['passing_downloads']:,} / {c['valid_reference_downloads']:,} |",
        f"| strict | {_pct(c['strict_rate'])} | {c['strict']} / {c['valid_reference']} | {_pct(c['strict_weighted'])} | {c['strict_downloads']:,} / {c['valid_reference_downloads']:,} |",
        f"| harness | {_pct(c['harness'])} | {c['valid_reference']} / {c['attempted']} | {_pct(c['harness_weighted'])} | {c['valid_reference_downloads']:,} / {c['attempted_downloads']:,} |",
        "",
        "## Status counts",
        "",
        "| status | models |",
        "|---|---:|",
    ]
    lines += [f"| {k} | {v} |" for k, v in c["status_counts"].items() if v]
    lines += ["", f"## Failing models ({len(rep['failing'])})", ""]
    if rep["failing"]:
        lines += ["| model | status | downloads | error | repro |", "|---|---|---:|---|---|"]
        for f in rep["failing"]:
            err = (f["error"] or f["reason"] or "").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {f['model_id']} | {f['status']}{' (' + f['reason'] + ')' if f['reason'] else ''} | {f['downloads']:,} | {err[:120]} | `{f['repro']}` |")
    else:
        lines.append("None.")
    lines += ["", f"Numbers: `GET /api/v1/coverage?backend={rep['backend']}&tier={rep['tier']}&week={rep['week']}`; failing models: `GET /api/v1/models?backend={rep['backend']}&status=...`."]
    return "\n".join(lines) + "\n"


def render_html(rep: dict[str, Any]) -> str:
    from .pages import templates

    return templates.get_template("report.html").render(rep=rep, pct=_pct, delta=_delta)


def render_report(rep: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rep, indent=2)
    if fmt == "html":
        return render_html(rep)
    return render_markdown(rep)


def store_weekly_report(week: str | None = None, backend: str | None = None, tier: str | None = None) -> str:
    rep = build_report(week, backend, tier)
    with session_scope() as s:
        row = s.scalars(select(Report).filter_by(week=rep["week"], backend=rep["backend"] or "", tier=rep["tier"])).first()
        if row is None:
            row = Report(week=rep["week"], backend=rep["backend"] or "", tier=rep["tier"])
            s.add(row)
        row.data, row.markdown = rep, render_markdown(rep)
    return rep["week"]
