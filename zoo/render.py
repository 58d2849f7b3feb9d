"""Plain-text rendering of coverage and results for the terminal."""

from __future__ import annotations

from typing import Any

from db.queries import Coverage
from zoo_runner.statuses import PASSING


def pct(x: float | None) -> str:
    return "   n/a" if x is None else f"{100 * x:5.1f}%"


def human(n: int) -> str:
    for unit, div in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(n) >= div:
            return f"{n / div:.1f}{unit}"
    return str(n)


def coverage_table(cov: Coverage) -> str:
    r = cov.rates
    lines = [
        f"Coverage — backend {cov.backend or '?'} · tier {cov.tier} · week {cov.week or '?'} · precision "
        f"{cov.precision} · env {cov.env or 'default'} · catalog snapshot {cov.snapshot_id} "
        f"({cov.catalog_models} models, {human(cov.catalog_downloads)} downloads)",
        "",
        f"{'metric':<12} {'by count':>8} {'numerator/denominator':>24}   {'by downloads':>12} "
        f"{'numerator/denominator':>24}",
        f"{'functional':<12} {pct(r['functional']):>8} {f'{cov.passing}/{cov.valid_reference}':>24}   "
        f"{pct(r['functional_weighted']):>12} "
        f"{f'{human(cov.passing_downloads)}/{human(cov.valid_reference_downloads)}':>24}",
        f"{'strict':<12} {pct(r['strict_rate']):>8} {f'{cov.strict}/{cov.valid_reference}':>24}   "
        f"{pct(r['strict_weighted']):>12} "
        f"{f'{human(cov.strict_downloads)}/{human(cov.valid_reference_downloads)}':>24}",
        f"{'harness':<12} {pct(r['harness']):>8} {f'{cov.valid_reference}/{cov.attempted}':>24}   "
        f"{pct(r['harness_weighted']):>12} "
        f"{f'{human(cov.valid_reference_downloads)}/{human(cov.attempted_downloads)}':>24}",
        "",
        "statuses: " + ", ".join(f"{k} {v}" for k, v in cov.status_counts.items() if v)
        if cov.status_counts
        else "statuses: no results yet",
        f"headline: download-weighted functional coverage {pct(r['functional_weighted']).strip()} of "
        f"{human(cov.valid_reference_downloads)} downloads with a valid reference ({cov.attempted} of "
        f"{cov.catalog_models} catalog models attempted)",
    ]
    if cov.below_half_on_backend:
        lines.append(
            f"of the passing models, {cov.below_half_on_backend} ran under half of their ops on the backend "
            "(details.backend_share < 0.5)"
        )
    return "\n".join(lines)


def result_line(res: dict[str, Any]) -> str:
    m = res.get("metrics") or {}
    bits = [f"{res['model_id']}", f"[{res.get('backend')}/{res.get('tier')}]", f"status={res['status']}"]
    if res.get("precision"):
        bits.append(f"precision={res['precision']}")
    if res.get("reason"):
        bits.append(f"reason={res['reason']}")
    if m.get("max_abs_diff") is not None:
        bits.append(f"max_abs_diff={m['max_abs_diff']:.3g}")
    if m.get("compile_s") is not None:
        bits.append(f"compile={m['compile_s']:.1f}s")
    if res.get("fallback_ops"):
        bits.append(f"fallback={','.join(res['fallback_ops'][:5])}")
    if res.get("error") and res["status"] not in PASSING:
        bits.append(f"error={res['error'].get('message', '')[:160]!r}")
    return " ".join(bits)


def compare_table(data: dict[str, Any]) -> str:
    """``zoo compare``: counts per kind, the clusters, then each changed model with both results."""
    a, b = data["env_a"], data["env_b"]
    lines = [
        f"{a} -> {b}: {data['models']} models in both at tier {data['tier']}"
        + (f", backend {data['backend']}" if data["backend"] else "")
        + (f", top {data['top']}" if data["top"] else "")
        + f" ({data['only_a']} only in {a}, {data['only_b']} only in {b})",
        "",
        f"{'':<46} {'models':>7} {'downloads':>10}",
    ]
    from db.queries import COMPARE_LABELS

    for kind, label in COMPARE_LABELS.items():
        c = data["counts"][kind]
        lines.append(f"{label:<46} {c['models']:>7} {human(c['downloads']):>10}")
    if data["clusters"]:
        lines += ["", "clusters:"]
        for c in data["clusters"]:
            lines.append(f"  {c['kind']:<20} {c['models']:>4} models {human(c['downloads']):>8}  {c['signature'][:90]}")
    changed = [i for i in data["items"] if i["kind"] != "unchanged"]
    if changed:
        lines += ["", "models:"]
        for i in changed:
            lines.append(
                f"  {i['kind']:<20} {i['model_id']} ({i['backend']}): {i['a']['status']} -> {i['b']['status']}"
                f"  results {i['a']['id']} -> {i['b']['id']}"
            )
    return "\n".join(lines)
