"""The Celery side: the app, its tasks and beat schedules, and publishing tasks to the queues
(validate-and-store itself is :mod:`services.validation`)."""
