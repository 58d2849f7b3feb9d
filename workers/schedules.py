"""Celery beat: a daily top-K refresh and the weekly report."""
from __future__ import annotations

import os

from celery.schedules import crontab


def beat_schedule() -> dict:
    backend = os.environ.get("ZOO_SCHEDULE_BACKEND", "cpu")
    return {
        "daily-top-k": {
            "task": "zoo.refresh",
            "schedule": crontab(hour=2, minute=0),
            "kwargs": {"top": int(os.environ.get("ZOO_DAILY_TOP_K", "100")), "backend": backend},
        },
        "weekly-report": {"task": "zoo.weekly_report", "schedule": crontab(day_of_week="mon", hour=6, minute=0)},
    }
