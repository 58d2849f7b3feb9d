"""ISO-week maths (``YYYY-Www``): the week a result counts in, and the weeks around it.

A leaf module: the reads (:mod:`db.queries`), the writes (:mod:`db.repository`) and the layers
above share it without importing each other.
"""

from __future__ import annotations

import datetime as dt
import re

from zoo_runner.exceptions import BadInput

from .models import utcnow

WEEK_PATTERN = r"^[1-9][0-9]{3}-W(0[1-9]|[1-4][0-9]|5[0-3])$"  # YYYY-Www, W01..W53


def iso_week(when: dt.datetime | dt.date | None = None) -> str:
    """The ISO week ``YYYY-Www`` of ``when`` (default: now, UTC)."""
    when = when or utcnow()
    y, w, _ = when.isocalendar()
    return f"{y}-W{w:02d}"


class BadWeek(BadInput, ValueError):
    """A week that is not ``YYYY-Www`` within the ISO calendar (one line; 422 in the API)."""


def check_week(week: str | None) -> str | None:
    """``week`` if it is an ISO week ``YYYY-Www`` of the calendar (W53 only in a year that has
    one), None for none; else :class:`BadWeek` saying why. The CLI, the API and the pages all
    check weeks here."""
    if not week:
        return None
    if not re.fullmatch(WEEK_PATTERN.strip("^$"), week):
        raise BadWeek(f"week {week[:40]!r} is not an ISO week YYYY-Www (e.g. {iso_week()})")
    year, w = (int(x) for x in week.split("-W"))
    if w == 53 and dt.date(year, 12, 28).isocalendar()[1] != 53:
        raise BadWeek(f"{year} has 52 ISO weeks: {week} is not a week")
    return week


def week_monday(week: str) -> dt.date:
    """The Monday of ISO week ``YYYY-Www``; W53 of a 52-week year is the week after W52."""
    year, w = (int(x) for x in week.split("-W"))
    try:
        return dt.date.fromisocalendar(year, w, 1)
    except ValueError:
        return dt.date.fromisocalendar(year, 52, 1) + dt.timedelta(weeks=w - 52)


def previous_week(week: str) -> str:
    """The ISO week before ``week``."""
    return iso_week(week_monday(week) - dt.timedelta(days=7))


def week_minus(week: str, n: int) -> str:
    """The ISO week ``n`` weeks before ``week``."""
    return iso_week(week_monday(week) - dt.timedelta(weeks=n))
