"""What to validate (a request); what came of it is :class:`zoo_runner.result.ValidationResult`."""

from __future__ import annotations

import re
import shlex
from dataclasses import asdict, dataclass
from typing import Any

# 2: seeded forwards, fp64 reference checked against fp32, reference cache; 3: precision, determinism;
# 4: half-precision references emulated (the same on every CPU), budgets below fp32 on the error pooled over inputs
HARNESS_VERSION = "5"


@dataclass
class ValidationRequest:
    """One model to validate: which (``model_id``: a Hub repo id, or ``arch:<Class>`` for a builtin
    architecture; ``revision``), on what (``backend``: a backend spec such as ``cpu+inductor``),
    how far (``tier``: ``census``, ``tiny`` or ``full``), judged at which ``precision`` (``auto``:
    the backend's declared one), with which ``seed`` and budgets (``timeout_s``, ``memory_gb``).

    The fields after the budgets are filled by the parent (:func:`zoo_runner.hub.prepare`) before
    the model process starts; the model process itself never touches the network.
    :meth:`to_dict` / :meth:`from_dict` carry a request across the process boundary, and
    :meth:`repro` is the shell command that reproduces its result.
    """

    model_id: str
    backend: str = "cpu"
    tier: str = "tiny"
    revision: str | None = None
    seed: int = 0
    timeout_s: float = 600.0
    memory_gb: float = 16.0
    # Filled by the parent before the model process starts (it alone may touch the network):
    config: dict[str, Any] | None = None
    config_source: str | None = None
    files_dir: str | None = None
    library: str | None = None
    task: str | None = None
    extras: dict[str, Any] | None = None  # small JSON files a builder needs (modules.json, pooling config)
    plugins: str | None = None  # ZOO_PLUGINS as the parent saw it (the forkserver may be older)
    reference_cache: str | None = None  # CPU reference cache directory ("" = off); set by the parent
    reference_outbox: str | None = None  # where a model process hands new references back (set by the parent)
    precision: str = "auto"  # what the backend is judged at: auto (its declared one), fp32, tf32, bf16, fp16
    triage: bool = False  # run the triage (attribution ladder, failing graph, minifier) after the validation
    triage_outbox: str | None = None  # where a triaging model process hands its graph back (set by the parent)
    env: str | None = None  # a named version set (``zoo env create``) whose interpreter runs the model process
    # custom code the parent fetched (never imported) for the model process to run: {file: sha256}
    remote_code: dict[str, str] | None = None
    # a custom-code repo validated on transformers' own classes instead (its code never fetched): why
    custom_code_native: str | None = None
    threads: int | None = None  # torch's CPU threads in the model process (:func:`share_of_cores`); None: its default
    # what the parent claimed and set up for the device (cores, compiler flags: zoo_runner.device_claims)
    device_setup: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ValidationRequest:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    def repro(self) -> str:
        parts = ["zoo", "validate", self.model_id, "--backend", self.backend, "--tier", self.tier]
        if self.revision:
            parts += ["--revision", self.revision]
        if self.seed:
            parts += ["--seed", str(self.seed)]
        if self.precision and self.precision != "auto":
            parts += ["--precision", self.precision]
        if self.env:
            parts += ["--env", self.env]
        if self.remote_code:
            parts += ["--remote-code", "sandboxed"]
        parts.append("--json")
        return shlex.join(parts)


def share_of_cores(jobs: int) -> int | None:
    """Torch CPU threads for each of ``jobs`` model processes run at once: ``ZOO_MODEL_THREADS``
    where set, else the machine's cores divided among them (at least 1); None for a single job
    (torch's own default, all cores). Two model processes each running torch's default of one
    thread per core oversubscribe the cores, and OpenMP's barriers then wait on descheduled
    threads: on 2 cores a tiny EfficientNet's forward went from 0.2 s to 3 s."""
    import os

    from .settings import settings

    configured = settings().model_threads
    if configured:
        return configured
    if jobs <= 1:
        return None
    return max(1, (os.cpu_count() or 1) // jobs)


_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """``text`` without terminal escape sequences (CSI, OSC) or control characters; tabs and newlines
    kept, a carriage return dropped (it would let a line overwrite what came before it on a terminal)."""
    return _CONTROLS.sub("", _ESCAPES.sub("", text))


def error_info(
    exc: BaseException | None = None, *, type_: str | None = None, message: str = "", tb: str | None = None
) -> dict[str, Any]:
    """A result's ``error`` object for ``exc`` (or for ``type_``/``message``/``tb`` given as such):
    ``type``, ``message`` and ``traceback`` (capped), and a ``signature`` (the type and first line
    without numbers, ids or quoted names) with its ``signature_hash``, which group one failure
    across models."""
    import hashlib
    import re
    import traceback

    if exc is not None:
        type_ = type_ or type(exc).__name__
        message = message or str(exc)
        tb = tb or "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    # what a model raised is data wherever it is shown: no terminal escape sequence or control character
    # survives into the row, a signature, a page or repro.py's output (tabs and newlines kept)
    type_, message, tb = strip_controls(type_ or ""), strip_controls(message or ""), strip_controls(tb or "") or None
    message = message[:4000]  # cut before the signature: the parent recomputes it from what is stored
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    first = lines[0] if lines else ""
    if first.endswith(" raised:") and len(lines) > 1:  # dynamo's "backend='x' raised:": the error is the next line
        first = f"{first} {lines[1]}"
    # A signature groups the same failure across models: type + message without numbers/ids/paths.
    norm = re.sub(r"0x[0-9a-f]+|\d+", "N", first)
    norm = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", norm)[:200]
    sig = f"{type_}: {norm}"
    return {
        "type": type_,
        "message": message,
        "signature": sig,
        "signature_hash": hashlib.sha1(sig.encode()).hexdigest()[:12],
        "traceback": (tb or "")[-8000:],
    }
