"""Storage: SQLAlchemy 2 models, sessions and Alembic migrations (SQLite or PostgreSQL)."""
