"""The REST API (FastAPI), under /api/v1, with the dashboard pages mounted beside it."""
