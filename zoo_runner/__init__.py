"""Zoo's validation engine: build a model, run it on a backend and on a CPU reference, compare.

A library with no service dependencies. The public surface:

- :func:`validate` — one model, in its own process, with time and memory budgets.
- :class:`ValidationRequest` (what to validate), :class:`ValidationResult` (the SPEC's result shape),
  :class:`BackendSpec`, :class:`Status` and :class:`Reason` (the SPEC's codes).
- :func:`zoo_runner.compare.compare` — one output against its references, within the error budget.
"""

from __future__ import annotations

from typing import Any

from .backends import BackendSpec
from .exceptions import ZooError
from .request import ValidationRequest
from .result import ValidationResult
from .statuses import Reason, Status
from .version import __version__


def validate(request: ValidationRequest, **kwargs: Any) -> dict[str, Any]:
    """Validate one model in a sandboxed child process, with ``request``'s time and memory budgets.

    Always returns a SPEC result (:meth:`ValidationResult.to_dict`): whatever the model does (it
    raises, crashes, hangs, runs out of memory, writes a forged result), the verdict is a status,
    never an exception in the caller; only ``ZOO_SANDBOX=strict`` on a machine without the full
    sandbox raises :class:`~zoo_runner.exceptions.SandboxUnavailable`. ``request`` must be prepared
    (:func:`zoo_runner.hub.prepare`) unless it names a builtin ``arch:`` model. ``kwargs`` go to
    :func:`zoo_runner.launcher.run_isolated` (``python``, ``on_stage``).
    """
    from .launcher import run_isolated

    return run_isolated(request, **kwargs)


__all__ = [
    "BackendSpec",
    "Reason",
    "Status",
    "ValidationRequest",
    "ValidationResult",
    "ZooError",
    "validate",
    "__version__",
]
