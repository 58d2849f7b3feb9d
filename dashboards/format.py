"""How the dashboards print numbers and version changes: the small formatting helpers shared by the
Markdown report (:mod:`dashboards.report`) and the HTML pages (:mod:`dashboards.templating`,
:mod:`dashboards.pages`). A leaf module: it imports nothing of the project's.
"""

from __future__ import annotations

import re
from typing import Any


def pct(x: float | None) -> str:
    """A rate in 0..1 as a percentage with one decimal (``0.1234`` → ``12.3%``); ``n/a`` for None."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def delta(cur: float | None, prev: float | None) -> str:
    """This week's rate against last week's in points (`` (+1.5 pts vs last week)``); empty where
    either is unknown."""
    if cur is None or prev is None:
        return ""
    d = 100 * (cur - prev)
    return f" ({'+' if d >= 0 else ''}{d:.1f} pts vs last week)"


def bar(x: float | None, width: int = 20) -> str:
    """A rate in 0..1 as a text bar of ``width`` characters; empty for None."""
    if x is None:
        return ""
    n = round(max(0.0, min(1.0, x)) * width)
    return "█" * n + "░" * (width - n)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|!])")
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def md_escape(s: Any) -> str:
    """A value made inert text in one Markdown table cell: newlines folded, control characters dropped,
    and every character Markdown or HTML reads (links, images, tags, emphasis, code, ``|``) escaped, so
    that a message a model wrote can never become a link, markup or a broken table."""
    text = _CONTROLS.sub("", str(s if s is not None else "").replace("\n", " "))
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_code(s: Any) -> str:
    """A value for a Markdown code span (between single backticks): no backtick or control character
    that could end the span early."""
    return _CONTROLS.sub("", str(s if s is not None else "").replace("\n", " ")).replace("`", "'")


SAFE_SCHEMES = ("https", "http")


def safe_url(url: Any) -> str:
    """``url`` where a page may link to it: an http(s) address or a path on this site; "" for anything
    else (``javascript:``, ``data:``, a scheme-relative ``//host``), which the pages render as no link."""
    from urllib.parse import urlsplit

    text = str(url or "").strip()
    if not text or _CONTROLS.search(text) or text.startswith("//") or "\\" in text:
        return ""
    if text.startswith("/"):
        return text
    try:
        parts = urlsplit(text)
    except ValueError:
        return ""
    return text if parts.scheme.lower() in SAFE_SCHEMES and parts.netloc else ""


def versions(changed: dict[str, list]) -> str:
    """A regression's changed versions, ``torch 2.12.0 → 2.13.0, ...`` (``∅`` for absent)."""
    return ", ".join(f"{k} {a or '∅'} → {b or '∅'}" for k, (a, b) in changed.items()) or "no version change"


def p100(x: float | None) -> float | None:
    """A rate in 0..1 as a chart value in percent, two decimals; None stays None (a gap)."""
    return None if x is None else round(100 * x, 2)


def num(x: Any) -> str:
    """A count with thousands separators; empty for None."""
    return "" if x is None else f"{int(x):,}"


def sig(x: Any, digits: int = 3) -> str:
    """A measurement for people: ``digits`` significant figures (``1.33e-06``, ``0.000131``,
    ``1``); ``n/a`` for None, the text of anything that is not a number."""
    if x is None:
        return "n/a"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    return f"{x:.{digits}g}"


def size(n: Any) -> str:
    """A byte count for people (``543 MiB``, ``1.2 GiB``); ``n/a`` for None."""
    if n is None or isinstance(n, bool) or not isinstance(n, (int, float)):
        return "n/a"
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.3g} {unit}" if unit != "B" else f"{int(value)} B"
        value /= 1024
    return f"{value:.3g} GiB"
