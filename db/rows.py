"""A stored result as the SPEC's JSON shape: the one serialisation the API, the dedup copies and
the pages share, and which rows a precision scope holds. A leaf module (reads and writes both use it)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, or_

from zoo_runner.result import ValidationResult

from .models import Result


def precision_scope(precision: str | None = None, env: str = ""):
    """Rows in a precision scope, run in one env (``""``, the default: Zoo's own interpreter; a
    ``zoo env`` name: that env's rows). None (the default): each backend's declared precision, i.e. every
    row not judged at a ``--precision`` flag (a NULL source counts as declared). ``fp32``, ``tf32``,
    ``bf16`` or ``fp16``: rows judged at that precision, whoever chose it, plus rows without a
    verdict precision (refused or failed before one applied: the same at every precision)."""
    no_verdict = Result.precision_source.is_(None)
    if precision is None:
        return and_(Result.env == env, or_(no_verdict, Result.precision_source != "flag"))
    return and_(Result.env == env, or_(no_verdict, Result.precision == precision))


def judged_precision(r: Result) -> str | None:
    """What the row was judged at (or asked to be, with ``--precision``); None where its result had
    no precision and the backend's declared one was asked for (no verdict precision)."""
    return r.precision if r.precision_source is not None else None


def result_dict(r: Result) -> dict[str, Any]:
    """The stored row ``r`` as a SPEC result (:meth:`ValidationResult.to_dict`), plus its ``week``."""
    result = ValidationResult(
        model_id=r.model_id,
        revision=r.revision or None,
        tier=r.tier,
        backend=r.backend,
        device=r.device,
        dtype=r.dtype,
        status=r.status,
        reason=r.reason,
        fingerprint=r.fingerprint,
        library=r.library,
        architecture=r.architecture,
        task=r.task,
        precision=judged_precision(r),
        metrics=r.metrics or {},
        fallback_ops=r.fallback_ops or [],
        op_census=r.op_census or {},
        error=r.error,
        versions=r.versions or {},
        repro=r.repro,
        started_at=r.started_at.isoformat() if r.started_at else None,
        duration_s=r.duration_s,
        details=r.details or {},
    )
    return {**result.to_dict(), "week": r.week}
