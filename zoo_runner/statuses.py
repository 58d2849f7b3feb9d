"""The SPEC's statuses and reasons (why ``unsupported``, which ``reference_error``) — exactly these.

Code names a status or a reason by its :class:`Status` / :class:`Reason` member, not by a string
literal: each member equals, hashes and formats as its string, so the strings of rows read back
from JSON or the database compare equal to the members.
"""

from __future__ import annotations

from enum import Enum


class _Code(str, Enum):
    """A SPEC code: compares, hashes, formats and serialises as its string."""

    def __str__(self) -> str:
        return self.value

    __format__ = str.__format__


class Status(_Code):
    """A result's ``status`` (the SPEC's table of statuses)."""

    PASS = "pass"
    PASS_WITH_FALLBACK = "pass_with_fallback"
    MISMATCH = "mismatch"
    COMPILE_ERROR = "compile_error"
    RUNTIME_ERROR = "runtime_error"
    CRASH = "crash"
    TIMEOUT = "timeout"
    OOM = "oom"
    REFERENCE_ERROR = "reference_error"
    UNSUPPORTED = "unsupported"


class Reason(_Code):
    """A result's ``reason``: why it is ``unsupported`` (the first eight), what kind of
    ``reference_error`` it is (the next two), or of ``compile_error`` (``backend_fell_back``)."""

    REMOTE_CODE = "remote_code"
    PICKLE_ONLY = "pickle_only"
    NO_PYTORCH_WEIGHTS = "no_pytorch_weights"
    GATED = "gated"
    LIBRARY_UNSUPPORTED = "library_unsupported"
    TOO_LARGE = "too_large"
    NO_INPUTS = "no_inputs"
    # custom code (ZOO_REMOTE_CODE=sandboxed) that imports a package the model's interpreter (Zoo's, or an env's) lacks
    MISSING_DEPENDENCY = "missing_dependency"
    # A reference_error whose two CPU fp32 runs on the same inputs differ.
    NONDETERMINISTIC = "nondeterministic"
    # A reference_error whose model the parent could not prepare (its Hub metadata or config files
    # broke Zoo's reading of them): one row, the run goes on.
    PREPARE_FAILED = "prepare_failed"
    # A compile_error whose backend executed none of the graph's ops (details.backend_share 0): it
    # handed every graph to PyTorch or another compiler (OpenVINO's silent inductor fallback).
    BACKEND_FELL_BACK = "backend_fell_back"


# The reasons a reference_error carries (kept as names of their own for existing imports).
NONDETERMINISTIC = Reason.NONDETERMINISTIC
PREPARE_FAILED = Reason.PREPARE_FAILED
BACKEND_FELL_BACK = Reason.BACKEND_FELL_BACK
UNSUPPORTED_REASONS = tuple(r for r in Reason if r not in (NONDETERMINISTIC, PREPARE_FAILED, BACKEND_FELL_BACK))
ALL_REASONS = tuple(r.value for r in Reason)

PASSING = frozenset({Status.PASS.value, Status.PASS_WITH_FALLBACK.value})
# A valid reference: the CPU reference ran (anything but these).
NO_VALID_REFERENCE = frozenset({Status.REFERENCE_ERROR.value, Status.UNSUPPORTED.value})
ALL_STATUSES = tuple(s.value for s in Status)
# Whose failure a failing row is: the backend's (it ran on a valid CPU reference and failed), or
# Zoo's own gap (no valid reference: the model could not be prepared or run on CPU).
BACKEND_FAILING = frozenset(s.value for s in Status if s.value not in PASSING and s.value not in NO_VALID_REFERENCE)


def owner(status: str) -> str | None:
    """``"backend"`` for a backend's failure, ``"zoo"`` for Zoo's gap, ``None`` for a pass."""
    if status in BACKEND_FAILING:
        return "backend"
    return "zoo" if status in NO_VALID_REFERENCE else None


TIERS = ("census", "tiny", "full")
