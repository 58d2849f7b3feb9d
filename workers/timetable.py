"""What beat sends and when: the daily refresh, the weekly sweep and the weekly report, for the
backends ``ZOO_SCHEDULE_BACKENDS`` names. A leaf of ``workers``: the Celery app reads it when it is
made, so it imports neither the app nor the scheduler (workers/schedules.py) that runs it."""

from __future__ import annotations

import datetime as dt

from celery.schedules import crontab

from zoo_runner.settings import settings


def schedule_backends() -> list[str]:
    """The backends beat schedules (``ZOO_SCHEDULE_BACKENDS``, comma-separated; default cpu)."""
    s = settings()
    raw = s.schedule_backends or s.schedule_backend or "cpu"
    return [b.strip() for b in raw.split(",") if b.strip()]


def beat_schedule() -> dict:
    backends = schedule_backends()
    s = settings()
    tier, every = s.schedule_tier, s.beat_sweep_every_s
    weekly = dt.timedelta(seconds=every) if every is not None else crontab(day_of_week="mon", hour=0, minute=30)
    return {
        "daily-top-k": {
            "task": "zoo.refresh",
            "schedule": crontab(hour=2, minute=0),
            "kwargs": {"top": s.daily_top_k, "backends": backends, "tier": tier},
        },
        "weekly-sweep": {
            "task": "zoo.weekly_sweep",
            "schedule": weekly,
            "kwargs": {"backends": backends, "tier": tier},
        },
        "weekly-report": {"task": "zoo.weekly_report", "schedule": crontab(day_of_week="mon", hour=6, minute=0)},
    }
