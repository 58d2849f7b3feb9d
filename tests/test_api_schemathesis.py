"""schemathesis over the whole OpenAPI schema, against the app over a small seeded history, at
the default rate limit: no server errors, no response that violates the schema (no undocumented
status code — 429 included —, content types, bodies)."""

from __future__ import annotations

import sys

import pytest

if sys.version_info >= (3, 11):
    from builtins import BaseExceptionGroup
else:  # Python 3.10: the backport (a dependency of pytest there)
    from exceptiongroup import BaseExceptionGroup

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from tests.test_api_analytics import seed_history  # noqa: E402

KEY = "schemathesis-key"


@pytest.fixture
def api_schema(database_url, monkeypatch):
    monkeypatch.setenv("ZOO_API_KEYS", KEY)
    monkeypatch.delenv("ZOO_RATE_LIMIT", raising=False)  # the default limit: its 429s must be documented
    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    from db import queries

    queries.clear_cache()
    seed_history()
    from schemathesis.config import SchemathesisConfig

    from api.app import create_app

    # an opaque cursor that does not decode is a 400 by contract (tests/test_api.py): allowed on the paginated
    # /models and /compare only.
    # A backend spec that does not parse, or names no device or compile backend torch or Zoo's plugins
    # know and no result, is a 422 by contract (tests/test_newcomer.py): the schema cannot list backends.
    # So is a week the pattern admits but the ISO calendar does not (W53 of a 52-week year, tests/test_inputs.py),
    # and an env nobody has in POST /validations (tests/test_api_analytics.py).
    accepted = ["2xx", "3xx", "401", "403", "404", "409", "429", "5xx"]
    config = SchemathesisConfig.from_dict(
        {
            "operations": [
                {
                    "include-path-regex": r"^/api/v1/(models|compare)$",
                    "checks": {"positive_data_acceptance": {"expected-statuses": [*accepted, "400", "422"]}},
                },
                {
                    "include-path-regex": (
                        r"^/api/v1/(coverage|coverage/history|backends|ops/gaps|failures|regressions|reports/\{week\}"
                        r"|validations)$"
                    ),
                    "checks": {"positive_data_acceptance": {"expected-statuses": [*accepted, "422"]}},
                },
            ]
        }
    )
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(), config=config)


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_openapi_conformance(api_schema, mode):
    """Every operation, generated cases (valid ones, then invalid ones), all default checks.
    (schemathesis' own pytest plugin does not load under pytest 9, so the strategies are driven
    by hypothesis directly.)"""
    from hypothesis import given
    from hypothesis.errors import Unsatisfiable
    from schemathesis import GenerationMode
    from schemathesis.specs.openapi.checks import status_code_conformance

    gm = GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
    ops = [r.ok() for r in api_schema.get_all_operations()]
    assert len(ops) >= 12
    failures = []
    for op in ops:

        @given(case=op.as_strategy(generation_mode=gm))
        @settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case):
            case.call_and_validate(
                headers={"X-API-Key": KEY} if case.method == "POST" else None,
                additional_checks=[status_code_conformance],
            )

        try:
            check()
        except Unsatisfiable:  # nothing to make invalid (no parameters): nothing to check in this mode
            assert mode == "negative", op.path
        except (Exception, BaseExceptionGroup) as exc:
            # collect all operations' failures, then report them together
            failures.append(f"{op.method.upper()} {op.path}: {str(exc)[:1500]}")
    assert not failures, "\n\n".join(failures)
