"""Zoo's validation engine: build a model, run it on a backend and on a CPU reference, compare.

A library with no service dependencies. The public surface:

- :func:`validate` — one model, in its own process, with time and memory budgets.
- :class:`ValidationRequest`, :class:`BackendSpec`, :class:`Status`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .backends import BackendSpec
from .exceptions import ZooError
from .request import ValidationRequest
from .statuses import Status


def validate(request: ValidationRequest, **kwargs):
    """Validate one model in a child process; always returns a SPEC result dict."""
    from .launcher import run_isolated

    return run_isolated(request, **kwargs)


__all__ = ["BackendSpec", "Status", "ValidationRequest", "ZooError", "validate", "__version__"]
