"""The SPEC's statuses and unsupported reasons — exactly these."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
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


class Reason(str, Enum):
    REMOTE_CODE = "remote_code"
    PICKLE_ONLY = "pickle_only"
    NO_PYTORCH_WEIGHTS = "no_pytorch_weights"
    GATED = "gated"
    LIBRARY_UNSUPPORTED = "library_unsupported"
    TOO_LARGE = "too_large"
    NO_INPUTS = "no_inputs"


# The reason a reference_error carries when two CPU fp32 runs on the same inputs differ.
NONDETERMINISTIC = "nondeterministic"
# The reason a reference_error carries when the parent could not prepare the model (its Hub
# metadata or config files broke Zoo's reading of them): one row, the run goes on.
PREPARE_FAILED = "prepare_failed"

PASSING = frozenset({Status.PASS.value, Status.PASS_WITH_FALLBACK.value})
# A valid reference: the CPU reference ran (anything but these).
NO_VALID_REFERENCE = frozenset({Status.REFERENCE_ERROR.value, Status.UNSUPPORTED.value})
ALL_STATUSES = tuple(s.value for s in Status)
TIERS = ("census", "tiny", "full")
