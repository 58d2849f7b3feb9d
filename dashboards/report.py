"""The weekly coverage report, rendered: Markdown (stored with the report, served by the API) and
HTML (the report page, or a standalone file). The data is :func:`services.reports.build_report`'s;
each section prints the API query behind its numbers (``rep["queries"]``).
"""

from __future__ import annotations

import json
from typing import Any

from services import dashboard as queries
from services import reports
from services.reports import api_url
from services.triage import attach_triage

from .format import bar, delta, md_code, md_escape, pct, safe_url, versions
from .templating import CHART_JS, STATIC, report_context, templates


def render_markdown(rep: dict[str, Any]) -> str:
    rep = with_triage(rep)
    c, p = rep["coverage"], rep.get("previous") or {}
    qs = rep.get("queries") or {}
    lines = [
        f"# Zoo coverage report — {rep['week']}",
        "",
        f"Backend `{rep['backend']}` · tier `{rep['tier']}` · catalog snapshot "
        f"{c['snapshot_id']} ({c['catalog_models']} models) · generated {rep['generated_at']}",
        "",
        "## Headline",
        "",
        "**Download-weighted functional coverage: "
        f"{pct(c['functional_weighted'])}**{delta(c['functional_weighted'], p.get('functional_weighted'))} "
        f"— {c['passing_downloads']:,} of {c['valid_reference_downloads']:,} downloads with a valid reference.",
        "",
        "| metric | by count | numerator / denominator | by downloads | numerator / denominator | Δ by downloads |",
        "|---|---:|---:|---:|---:|---:|",
        f"| functional | {pct(c['functional'])} | {c['passing']} / {c['valid_reference']} "
        f"| {pct(c['functional_weighted'])} | {c['passing_downloads']:,} / {c['valid_reference_downloads']:,} "
        f"| {delta(c['functional_weighted'], p.get('functional_weighted')).strip(' ()')} |",
        f"| strict | {pct(c['strict_rate'])} | {c['strict']} / {c['valid_reference']} "
        f"| {pct(c['strict_weighted'])} | {c['strict_downloads']:,} / {c['valid_reference_downloads']:,} "
        f"| {delta(c['strict_weighted'], p.get('strict_weighted')).strip(' ()')} |",
        f"| harness | {pct(c['harness'])} | {c['valid_reference']} / {c['attempted']} "
        f"| {pct(c['harness_weighted'])} | {c['valid_reference_downloads']:,} / {c['attempted_downloads']:,} "
        f"| {delta(c['harness_weighted'], p.get('harness_weighted')).strip(' ()')} |",
        "",
        f"Query: `GET {qs.get('headline', '/api/v1/coverage')}` (last week: `GET {qs.get('previous', '')}`)",
    ]
    lines += _precision_markdown(rep)
    hist = rep.get("history") or []
    if hist:
        lines += [
            "",
            "## Trend",
            "",
            "| week | functional by downloads | | strict by downloads | models attempted |",
            "|---|---:|---|---:|---:|",
        ]
        for h in hist:
            lines.append(
                f"| {h['week']} | {pct(h['functional_weighted'])} | `{bar(h['functional_weighted'])}` "
                f"| {pct(h['strict_weighted'])} | {h['attempted']} |"
            )
        lines += ["", f"Query: `GET {qs.get('history', '')}`"]
    lines += ["", "## Status counts", "", "| status | models |", "|---|---:|"]
    lines += [f"| {k} | {v} |" for k, v in c["status_counts"].items() if v]

    for key, title, word in (
        ("newly_failing", "Newly failing", "first failing versions"),
        ("newly_passing", "Newly passing", "first passing versions"),
    ):
        t = rep.get(key) or {"items": [], "total": 0, "downloads": 0}
        lines += ["", f"## {title} ({t['total']} models, {t['downloads']:,} downloads)", ""]
        if t["items"]:
            lines += [
                f"| model | downloads | {rep.get('previous_week', 'last week')} → {rep['week']} "
                f"| {word} (what changed) | error |",
                "|---|---:|---|---|---|",
            ]
            for i in t["items"][:25]:
                lines.append(
                    f"| {i['model_id']} | {i['downloads']:,} | {i['status_before']} → {i['status_now']} "
                    f"| {md_escape(versions(i['changed_versions']))} "
                    f"| {md_escape((i.get('error_signature') or '')[:100])} |"
                )
        else:
            lines.append("None.")
        lines += ["", f"Query: `GET {qs.get(key, '')}`"]

    g = rep.get("op_gaps") or {"items": []}
    lines += ["", "## Top op gaps (downloads unlocked if the op were supported)", ""]
    if g["items"]:
        lines += [
            "| op | downloads unlocked | share | models unlocked "
            "| strict (only fallback) | functional (only op in error) | example |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for e in g["items"]:
            ex = e["example_models"][0]["model_id"] if e["example_models"] else ""
            lines.append(
                f"| `{md_code(e['op'])}` | {e['unlocked_downloads']:,} | {pct(e['unlocked_share'])} "
                f"| {e['unlocked_models']} | {e['strict_models']} | {e['functional_models']} | {ex} |"
            )
    else:
        lines.append("None.")
    if g.get("none_alone"):
        lines += [
            "",
            "No op above unlocks a model alone: every model that falls back on one of them also falls back "
            "on others. The op sets that would unlock models if all of each were lowered:",
            "",
            "| ops (all of them) | models | downloads | examples |",
            "|---|---:|---:|---|",
        ]
        for e in (g.get("op_sets") or [])[:5]:
            ops = ", ".join(f"`{md_code(o)}`" for o in e["ops"][:12]) + (
                f" and {len(e['ops']) - 12} more" if len(e["ops"]) > 12 else ""
            )
            lines.append(f"| {ops} | {e['models']} | {e['downloads']:,} | {', '.join(e['example_models'])} |")
    lines += ["", f"Query: `GET {qs.get('op_gaps', '')}`"]

    fc = rep.get("failure_clusters") or {"items": []}
    mine = [f for f in fc["items"] if f.get("owner", "backend") == "backend"]
    zoos = [f for f in fc["items"] if f.get("owner") == "zoo"]
    lines += ["", "## Failure clusters of the backend", ""]
    expired = f" ({fc.get('expired_models', 0)} expired: re-check)" if fc.get("expired_models") else ""
    lines += [
        f"New failures: **{fc.get('new_models', 0)}** models "
        f"({fc.get('new_downloads', 0):,} downloads); known failures: {fc.get('known_models', 0)} "
        f"models ({fc.get('known_downloads', 0):,} downloads){expired}. "
        "Only the backend's failures are counted here (a valid CPU reference, then a failure on the backend); "
        "Zoo's own gaps are in the next section.",
        "",
    ]
    if mine:
        lines += [
            "| error signature | models | downloads | known failure | triage | examples |",
            "|---|---:|---:|---|---|---|",
        ]
        for f in mine:
            lines.append(
                f"| {md_escape(f['signature'][:140])} | {f['models']} | {f['downloads']:,} "
                f"| {_known(f)} | {_triage(f)} | {', '.join(e['model_id'] for e in f['example_models'][:3])} |"
            )
    else:
        lines.append("None.")
    lines += ["", "## Zoo's gaps (unsupported, reference_error: not the backend's failures)", ""]
    if zoos:
        lines += [
            f"{fc.get('zoo_models', 0)} models ({fc.get('zoo_downloads', 0):,} downloads) got no verdict on "
            "this backend because Zoo could not prepare or run them on CPU.",
            "",
            "| reason | models | downloads | known failure | examples |",
            "|---|---:|---:|---|---|",
        ]
        for f in zoos:
            lines.append(
                f"| {md_escape(f['signature'][:140])} | {f['models']} | {f['downloads']:,} | {_known(f)} "
                f"| {', '.join(e['model_id'] for e in f['example_models'][:3])} |"
            )
    else:
        lines.append("None.")
    lines += ["", f"Query: `GET {qs.get('failure_clusters', '')}`"]

    sc = rep.get("slowest_compiles") or []
    lines += ["", "## Slowest compiles", ""]
    if sc:
        lines += ["| model | status | compile s | target ms | reference ms |", "|---|---|---:|---:|---:|"]
        for r in sc:
            lines.append(
                f"| {r['model_id']} | {r['status']} | {r['compile_s']:.1f} "
                f"| {r['target_ms'] if r['target_ms'] is not None else ''} "
                f"| {r['reference_ms'] if r['reference_ms'] is not None else ''} |"
            )
    else:
        lines.append("None (no compile times recorded).")
    lines += ["", "Query: `GET /api/v1/models/{model_id}` (metrics.compile_s of each)"]

    failing = rep.get("failing") or []
    total = rep.get("failing_total", len(failing))
    split = (
        f" — the backend's {rep['failing_backend_total']}, Zoo's gaps {rep['failing_zoo_total']}"
        if rep.get("failing_zoo_total")
        else ""
    )
    lines += ["", f"## Failing models ({total}{split})", ""]
    if failing:
        lines += ["| model | status | whose | downloads | error | repro |", "|---|---|---|---:|---|---|"]
        for f in failing[:50]:
            err = md_escape(f.get("error") or f.get("reason") or "")
            lines.append(
                f"| {f['model_id']} | {f['status']}{' (' + f['reason'] + ')' if f.get('reason') else ''} "
                f"| {'Zoo' if f.get('owner') == 'zoo' else 'backend'} "
                f"| {f['downloads']:,} | {err[:120]} | `{f['repro']}` |"
            )
        if total > 50:
            lines.append(f"| … {total - 50} more | | | | | |")
    else:
        lines.append("None.")
    numbers = (rep.get("queries") or {}).get("headline") or api_url(
        "/coverage", backend=rep["backend"], tier=rep["tier"], week=rep["week"]
    )
    failing_url = api_url("/models", backend=rep["backend"])
    lines += [
        "",
        f"Numbers: `GET {numbers}`; failing models: `GET {failing_url}{'&' if '?' in failing_url else '?'}status=...`.",
    ]
    return "\n".join(lines) + "\n"


def _triage(cluster: dict[str, Any]) -> str:
    """A cluster's triage links (``repro.py``, ``issue.md``) where Zoo has triaged it."""
    t = cluster.get("triage") or {}
    if not t:
        return ""
    links = [
        f"[{name}]({safe_url(t[key])})"
        for key, name in (("repro_url", "repro.py"), ("issue_url", "issue.md"))
        if safe_url(t.get(key))
    ]
    return " · ".join([md_escape(t.get("attribution") or ""), *links]).strip(" ·")


def _known(cluster: dict[str, Any]) -> str:
    """How a failure cluster stands against the known-failure rows: new, known until a date, or expired."""
    known = cluster.get("known_failure")
    if not known:
        return "new"
    state = "expired: re-check" if cluster.get("expired") else f"known until {known['expires']}"
    link = safe_url(known.get("link"))
    return f"{state} — {md_escape(str(known.get('reason') or '')[:100])}" + (f" ([why]({link}))" if link else "")


def _precision_markdown(rep: dict[str, Any]) -> list[str]:
    """The precision each backend was judged at this week, one line per backend (and per
    precision a ``--precision`` run asked for)."""
    out = [
        "",
        "## Precision",
        "",
        "Coverage is at each backend's declared compute precision; `--precision` runs are counted apart.",
        "",
    ]
    plines = rep.get("precision_lines")
    if plines is None:  # a report stored before precisions were recorded
        plines = [queries.precision_line(p) for p in rep.get("precision") or []]
    out += [f"- {md_escape(line)}" for line in plines] or [
        "No result says what it was judged at (rows stored before precisions were recorded)."
    ]
    qs = rep.get("queries") or {}
    if qs.get("precision"):
        out += ["", f"Query: `GET {qs['precision']}` (`precisions`)"]
    return out


def with_triage(rep: dict[str, Any]) -> dict[str, Any]:
    """The report with each triaged cluster's attribution and links (``zoo triage --clusters``)."""
    if not rep.get("failure_clusters"):
        return rep
    return {**rep, "failure_clusters": attach_triage(rep["failure_clusters"])}


def render_html(rep: dict[str, Any], standalone: bool = True) -> str:
    """The report page; ``standalone`` inlines Chart.js so the file works offline on its own."""
    inline = (
        {
            "chart_js": (STATIC / CHART_JS).read_text(),
            "zoo_js": (STATIC / "zoo.js").read_text(),
            "css": (STATIC / "zoo.css").read_text(),
        }
        if standalone
        else None
    )
    return templates.get_template("report.html").render(**report_context(with_triage(rep)), standalone=inline)


def render_report(rep: dict[str, Any], fmt: str) -> str:
    if fmt == "json":
        return json.dumps(rep, indent=2, default=str)
    if fmt == "html":
        return render_html(rep)
    return render_markdown(rep)


def store_weekly_report(week: str | None = None, backend: str | None = None, tier: str | None = None) -> str:
    """Build and store the week's report with its Markdown (:func:`services.reports.store_weekly_report`);
    returns the week."""
    return reports.store_weekly_report(week, backend, tier, render=render_markdown)
