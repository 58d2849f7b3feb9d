"""Zoo's services: what the CLI, the Celery workers, the API and the pages all do, written once.

The packages import one way (``pyproject.toml`` ``[tool.importlinter]``, checked in CI)::

    zoo  >  api  >  workers  >  dashboards  >  services  >  db  >  zoo_runner

Each module here has one job and imports only ``db``, ``zoo_runner`` and the modules beside it:

- :mod:`services.validation`: validate one model and store its row; a failure is a row too;
- :mod:`services.planning`: what a fleet sweep validates next, grouped for publishing by the caller;
- :mod:`services.reports`: the weekly report's data (rendering stays in ``dashboards``);
- :mod:`services.catalog`: catalog sources (the Hub, a CSV, the builtin list) and their sync;
- :mod:`services.model_list`: the catalog page of models with their latest statuses.
"""
