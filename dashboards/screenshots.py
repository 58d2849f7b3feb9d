"""Screenshots of every dashboard page, for docs/: ``python -m dashboards.screenshots BASE_URL OUT_DIR``.

Opens each page in headless Chromium (the system's, through Playwright), waits for the charts,
fails on any console error, and writes one PNG per page."""

from __future__ import annotations

import sys
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def pages(model_id: str, week: str) -> list[tuple[str, str]]:
    return [
        ("overview", "/"),
        ("models", "/models"),
        ("model", f"/models/{model_id}"),
        ("ops", "/ops"),
        ("failures", "/failures"),
        ("regressions", "/regressions"),
        ("backends", "/backends"),
        ("report", f"/reports/{week}"),
        ("badge", f"/badge/{model_id}.svg"),
    ]


def _collect_errors(page) -> list[str]:
    """The list the page's console errors and uncaught exceptions are appended to, as they come."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def shoot(base: str, out: Path, full_page: bool = True, only: list[tuple[str, str]] | None = None) -> list[Path]:
    """Every page (or ``only`` these (name, path) pairs) of the dashboard at ``base``, as PNGs in ``out``."""
    import httpx
    from playwright.sync_api import sync_playwright

    if only is None:
        first = httpx.get(f"{base}/api/v1/models", params={"limit": 1}).json()["items"][0]["model_id"]
        week = httpx.get(f"{base}/api/v1/coverage").json()["week"]
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        for name, path in only if only is not None else pages(first, week):
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            errors = _collect_errors(page)
            resp = page.goto(base + path)
            assert resp is not None and resp.status == 200, (path, resp and resp.status)
            if name != "badge":
                page.wait_for_selector("html[data-charts=ready]", timeout=10_000)
            if errors:
                raise AssertionError(f"{path}: console errors {errors}")
            target = out / f"dashboard-{name}.png"
            page.screenshot(path=str(target), full_page=full_page and name != "badge")
            written.append(target)
            page.close()
        browser.close()
    return written


def main(argv: list[str] | None = None) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m dashboards.screenshots", description=__doc__.split("\n\n")[1])
    ap.add_argument("base_url", help="where `zoo serve` listens, e.g. http://127.0.0.1:8000")
    ap.add_argument("out_dir", type=Path, help="folder for the dashboard-*.png files (docs/ for the README's)")
    ap.add_argument(
        "--page",
        action="append",
        metavar="NAME=PATH",
        help="only this page, as dashboard-NAME.png (repeatable), e.g. releases=/releases?env_a=A&env_b=B",
    )
    args = ap.parse_args(argv)
    only = [tuple(p.split("=", 1)) for p in args.page] if args.page else None
    if only and any(len(p) != 2 or not p[1].startswith("/") for p in only):
        ap.error("--page takes NAME=/path")
    for p in shoot(args.base_url.rstrip("/"), args.out_dir, only=only):  # type: ignore[arg-type]
        sys.stdout.write(f"{p}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
