"""Every error Zoo raises on purpose, in one tree.

The CLI turns any ``ZooError`` into one clear line and a non-zero exit; anything else is a bug.
"""

from __future__ import annotations

from .statuses import Reason


class ZooError(Exception):
    """Base of every error Zoo raises on purpose."""

    exit_code = 2


class BadInput(ZooError):
    """The user asked for something malformed."""


class UnknownModel(BadInput):
    """A model id that is neither a builtin architecture nor a Hub repo we can find."""


class UnknownBackend(BadInput):
    """A backend spec that does not parse, or names a device/compiler/dtype that does not exist."""


class ConfigError(BadInput):
    """A ``ZOO_*`` environment variable with a value Zoo cannot use (:mod:`zoo_runner.settings`)."""


class BackendUnavailable(ZooError):
    """A well-formed backend that this machine cannot run (no device, package missing)."""


class CatalogError(BadInput):
    """A catalog source (CSV file, Hub listing) that cannot be read."""


class HubUnreachable(ZooError):
    """The Hub (or HF_ENDPOINT) could not be reached."""


class DatabaseUnavailable(ZooError):
    """The configured database cannot be reached or migrated."""


class BrokerUnavailable(ZooError):
    """The configured Celery broker cannot be reached."""


class NotSupported(ZooError):
    """Refused by policy; carries the SPEC's ``reason`` code."""

    def __init__(self, reason: Reason, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class ReferenceError_(ZooError):
    """The CPU reference failed: a gap of Zoo's, never blamed on the backend."""


class NonDeterministic(ReferenceError_):
    """Two CPU fp32 runs of the model on the same inputs differ: it cannot be a reference."""


class UntrustedFile(NotSupported):
    """A file from a repo (config.json, config.yaml, model_index.json, ...) that Zoo refuses to
    read: over the size or depth limits, not UTF-8, not valid JSON/YAML, or not the expected shape.
    Over the size limit is ``too_large``; anything else ``library_unsupported``."""

    def __init__(self, name: str, problem: str, reason: Reason = Reason.LIBRARY_UNSUPPORTED) -> None:
        super().__init__(reason, f"{name} {problem}")
        self.name, self.problem = name, problem


class NoInputs(NotSupported):
    def __init__(self, message: str) -> None:
        super().__init__(Reason.NO_INPUTS, message)


class SandboxUnavailable(ZooError):
    """``ZOO_SANDBOX=strict`` and this machine cannot give a model process the full sandbox
    (``zoo doctor`` says which protection is missing and why)."""


class Interrupted(BaseException):
    """The run was interrupted (Ctrl-C, SIGTERM): a model process in flight was ended and gives no row.
    A BaseException, as KeyboardInterrupt: no ``except Exception`` turns it into a stored failure."""
