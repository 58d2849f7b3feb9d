"""What came of a validation: :class:`ValidationResult`, the SPEC's result shape, defined once.

``zoo validate --json`` prints :meth:`ValidationResult.to_dict`, the model process writes it, the
parent checks it (:mod:`zoo_runner.result_schema`), the database stores it and the API returns it.
:func:`failure_result` is the row of a request that failed before (or instead of) a verdict.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

from .request import HARNESS_VERSION, ValidationRequest, error_info
from .statuses import Reason, Status

METRIC_KEYS = (
    "max_abs_diff",
    "max_rel_diff",
    "rmse_ratio",
    "cosine",
    "compile_s",
    "reference_ms",
    "target_ms",
    "peak_mem_bytes",
    "graph_breaks",
)
# The SPEC's ``error`` object (``signature_hash`` besides: a short key of ``signature``).
ERROR_KEYS = ("type", "message", "signature", "signature_hash", "traceback")


def package_versions(spec: Any = None) -> dict[str, str]:
    """Package versions without importing the packages (cheap in the parent), the backend's too."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("torch", "transformers"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    from .version import __version__

    out["zoo"] = __version__
    if spec is not None:
        from .backends import backend_package_versions

        out.update(backend_package_versions(spec.device, spec.compiler))
    return out


def _empty_metrics() -> dict[str, float | int | None]:
    return dict.fromkeys(METRIC_KEYS)


def env_details(name: str) -> dict[str, Any]:
    """``details.env`` for a request run in env ``name``: its name and recorded pins (just the name
    for an env that is gone or unreadable: the row is still that env's)."""
    from . import envs

    try:
        return envs.describe(name)
    except Exception:
        return {"name": name, "pins": []}


# details only the parent may say of a row, from the row's own request: never from the model process
# (which may claim anything) nor from another model's row (a dedup twin's). Every path that builds or
# copies a row goes through own_details, so a key added here cannot be missed on one of them.
PARENT_KEYS = ("env", "remote_code", "custom_code_native", "other_repo_files", "device_setup")


def parent_details(req: Any) -> dict[str, Any]:
    """The :data:`PARENT_KEYS` of ``req``'s row: the env it ran in, the custom code's files and sha256
    as the parent fetched them, why a custom-code repo ran on transformers' own classes, and the files
    of other repos the parent fetched at their commits (absent where the request has none)."""
    out: dict[str, Any] = {}
    if getattr(req, "env", None):  # even a row without a verdict is the env's, stored beside Zoo's own
        out["env"] = env_details(req.env)
    if getattr(req, "remote_code", None):
        out["remote_code"] = dict(req.remote_code)
    if getattr(req, "custom_code_native", None):
        out["custom_code_native"] = req.custom_code_native
    extras = getattr(req, "extras", None)
    other = extras.get("other_repo_commits") if isinstance(extras, dict) else None
    if isinstance(other, dict) and other:
        out["other_repo_files"] = dict(other)
    if getattr(req, "device_setup", None):
        out["device_setup"] = dict(req.device_setup)
    return out


# set only where the parent copies another model's row for a dedup twin (db.repository.shared_result):
# a model process claiming it would have its own row counted as a copy and never used as a dedup source
DEDUP_KEY = "deduplicated_from"


def own_details(details: dict[str, Any] | None, req: Any) -> dict[str, Any]:
    """``details`` with every :data:`PARENT_KEYS` entry replaced by ``req``'s own (dropped where it has
    none), and no :data:`DEDUP_KEY` (the parent adds it to a copy afterwards)."""
    out = {k: v for k, v in (details or {}).items() if k not in PARENT_KEYS and k != DEDUP_KEY}
    out.update(parent_details(req))
    return out


@dataclass
class ValidationResult:
    """One validation's result, field for field the SPEC's JSON result (in its key order).

    ``status`` and ``reason`` are :class:`Status` / :class:`Reason` members (None until decided);
    ``metrics`` holds :data:`METRIC_KEYS` (null where not measured); ``error`` is an
    :func:`~zoo_runner.request.error_info` object or None; ``details`` holds what the engine
    recorded besides the SPEC's fields (``seed``, ``harness_version``, ``precision_source``, ...).
    """

    model_id: str
    revision: str | None
    tier: str
    backend: str
    device: str | None = None
    dtype: str | None = None
    status: Status | None = None
    reason: Reason | None = None
    fingerprint: str | None = None
    library: str | None = None
    architecture: str | None = None
    task: str | None = None
    precision: str | None = None
    metrics: dict[str, float | int | None] = field(default_factory=_empty_metrics)
    fallback_ops: list[str] = field(default_factory=list)
    op_census: dict[str, int] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    versions: dict[str, str] = field(default_factory=dict)
    repro: str | None = None
    started_at: str | None = None
    duration_s: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def empty(cls, req: ValidationRequest) -> ValidationResult:
        """The result of ``req`` before anything ran: its identity, its versions, no verdict."""
        from .backends import BackendSpec

        try:
            spec = BackendSpec.parse(req.backend) if req.backend != "auto" else None
        except Exception:
            spec = None
        result = cls(
            model_id=req.model_id,
            revision=req.revision,
            tier=req.tier,
            backend=req.backend,
            device=spec.device if spec else None,
            dtype=spec.dtype if spec else None,
            library=req.library,
            task=req.task,
            versions=package_versions(spec),
            repro=req.repro(),
            started_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            details={"seed": req.seed, "harness_version": HARNESS_VERSION},
        )
        if req.precision and req.precision != "auto":  # asked for: even a row without a verdict is at that precision
            result.precision = req.precision
            result.details["precision_source"] = "flag"
        result.details.update(parent_details(req))
        return result

    def fail(self, status: Status, exc: BaseException | None = None, reason: Reason | None = None) -> None:
        """Set the verdict ``status`` (with ``reason``) and ``exc`` as the error."""
        self.status, self.reason = status, reason
        if exc is not None:
            self.error = error_info(exc)

    def to_dict(self) -> dict[str, Any]:
        """The SPEC's JSON result: exactly :data:`RESULT_KEYS`, in order, statuses and reasons as
        their strings. Shallow: the nested dicts and lists are this result's own."""
        out = {name: getattr(self, name) for name in RESULT_KEYS}
        for name in ("status", "reason"):
            if isinstance(out[name], Enum):
                out[name] = out[name].value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidationResult:
        """A result from its SPEC dict (keys beyond the SPEC's, such as a stored row's ``week``,
        are left out); a status or reason that is not the SPEC's stays the string it was."""
        kwargs = {k: data[k] for k in RESULT_KEYS if k in data}
        kwargs.setdefault("revision", None)
        status, reason = kwargs.get("status"), kwargs.get("reason")
        if isinstance(status, str) and status in Status._value2member_map_:
            kwargs["status"] = Status(status)
        if isinstance(reason, str) and reason in Reason._value2member_map_:
            kwargs["reason"] = Reason(reason)
        return cls(**kwargs)


RESULT_KEYS = tuple(f.name for f in fields(ValidationResult))


def empty_result(req: ValidationRequest) -> dict[str, Any]:
    """The SPEC result of ``req`` before anything ran, as a dict (:meth:`ValidationResult.empty`)."""
    return ValidationResult.empty(req).to_dict()


def failure_result(
    req: ValidationRequest,
    exc: BaseException | None,
    status: Status = Status.REFERENCE_ERROR,
    reason: Reason | None = None,
    *,
    error: dict[str, Any] | None = None,
    duration_s: float | None = 0.0,
) -> ValidationResult:
    """The result of a request that failed before (or instead of) a verdict: ``status`` (by
    default ``reference_error``: Zoo could not produce one, a gap of Zoo's, never the backend's)
    with ``exc`` (or an :func:`~zoo_runner.request.error_info` ``error``) as its error."""
    result = ValidationResult.empty(req)
    result.fail(status, exc, reason)
    if error is not None:
        result.error = error
    result.duration_s = duration_s
    return result
