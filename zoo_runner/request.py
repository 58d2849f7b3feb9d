"""What to validate (a request) and what came of it (a result, in the SPEC's shape)."""

from __future__ import annotations

import datetime as _dt
import shlex
from dataclasses import asdict, dataclass
from typing import Any

# 2: seeded forwards, fp64 reference checked against fp32, reference cache; 3: precision, determinism;
# 4: half-precision references emulated (the same on every CPU), budgets below fp32 on the error pooled over inputs
HARNESS_VERSION = "4"


@dataclass
class ValidationRequest:
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
    precision: str = "auto"  # what the backend is judged at: auto (its declared one), fp32, tf32, bf16, fp16

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
        parts.append("--json")
        return shlex.join(parts)


def _versions(spec: Any = None) -> dict[str, str]:
    """Package versions without importing the packages (cheap in the parent), the backend's too."""
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for dist in ("torch", "transformers"):
        try:
            out[dist] = version(dist)
        except PackageNotFoundError:
            pass
    from . import __version__

    out["zoo"] = __version__
    if spec is not None:
        from .backends import backend_package_versions

        out.update(backend_package_versions(spec.device, spec.compiler))
    return out


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


def empty_result(req: ValidationRequest) -> dict[str, Any]:
    from .backends import BackendSpec

    try:
        spec = BackendSpec.parse(req.backend) if req.backend != "auto" else None
    except Exception:
        spec = None
    result = {
        "model_id": req.model_id,
        "revision": req.revision,
        "tier": req.tier,
        "backend": req.backend,
        "device": spec.device if spec else None,
        "dtype": spec.dtype if spec else None,
        "status": None,
        "reason": None,
        "fingerprint": None,
        "library": req.library,
        "architecture": None,
        "task": req.task,
        "precision": None,
        "metrics": {k: None for k in METRIC_KEYS},
        "fallback_ops": [],
        "op_census": {},
        "error": None,
        "versions": _versions(spec),
        "repro": req.repro(),
        "started_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "duration_s": None,
        "details": {"seed": req.seed, "harness_version": HARNESS_VERSION},
    }
    if req.precision and req.precision != "auto":  # asked for: even a row that never got a verdict is at that precision
        result["precision"] = req.precision
        result["details"]["precision_source"] = "flag"
    return result


def error_info(
    exc: BaseException | None = None, *, type_: str | None = None, message: str = "", tb: str | None = None
) -> dict[str, Any]:
    import hashlib
    import re
    import traceback

    if exc is not None:
        type_ = type_ or type(exc).__name__
        message = message or str(exc)
        tb = tb or "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    first = (message or "").strip().splitlines()[0] if message else ""
    # A signature groups the same failure across models: type + message without numbers/ids/paths.
    norm = re.sub(r"0x[0-9a-f]+|\d+", "N", first)
    norm = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", norm)[:200]
    sig = f"{type_}: {norm}"
    return {
        "type": type_,
        "message": (message or "")[:4000],
        "signature": sig,
        "signature_hash": hashlib.sha1(sig.encode()).hexdigest()[:12],
        "traceback": (tb or "")[-8000:],
    }
