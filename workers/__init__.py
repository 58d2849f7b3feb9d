"""Execution: one validation end to end (prepare, isolate, store), and the Celery app around it."""
