"""The parent trusts nothing from the model process but measurements.

The model process writes ``result.json`` in a directory it owns, so the file is as hostile as the
model: it may be a symbolic link to a secret, a FIFO, gigabytes, nesting that overflows the parser,
NaN, wrong types, or another model's identity. :func:`read_json_file` reads at most a capped number
of bytes from a regular file the sandbox uid owns, never following a link; :func:`check` validates
the SPEC's result shape; :func:`trusted_result` keeps the child's measurements and verdict and takes
every identity field (model, revision, backend, tier, precision, repro, seed, harness version) from
the parent's own request.
"""

from __future__ import annotations

import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from .precision import PRECISIONS, SOURCES
from .request import HARNESS_VERSION, ValidationRequest, error_info, strip_controls
from .result import ERROR_KEYS, RESULT_KEYS, ValidationResult, own_details
from .statuses import ALL_REASONS, ALL_STATUSES

RESULT_MAX_BYTES = 8 << 20
MAX_DEPTH = 24
MAX_STR = 1 << 20
REASONS = frozenset(ALL_REASONS)
STAGES = frozenset({"start", "build", "reference", "target", "compare", "census", "triage", "minify", "done"})
OPTIONAL_STR = ("device", "dtype", "fingerprint", "library", "architecture", "task", "started_at")


# The details a model process may report: measurements and what it saw while measuring, each a fact
# about its own run. Every other key it writes is dropped (its name kept in ``details.claims_dropped``):
# a row's known failure, triage, verdict, precision flags, published references, dedup source, env and
# sandbox are the parent's, computed or looked up by the parent (verdict.parent_identity, the launcher).
MODEL_DETAIL_KEYS = frozenset(
    {
        "seed",  # written by every result and overwritten below with the request's own
        "harness_version",  # likewise
        "threads",  # torch's thread count in the model process
        "stage_s",  # seconds per stage
        "stage",  # the stage a failure of Zoo's happened in
        "precision_source",  # checked below against the request
        "input_shapes",
        "parameters",
        "target_model",  # whether the backend got a copy of the reference's model
        "config_source",
        "timm_shrink",  # how a timm tower was shrunk
        "ultralytics_checkpoint",
        "inductor_isa_probes_copied",
        "inductor_headers_built",
        "failed_input",  # which input failed on the backend, with its shapes
        "graph_break_reasons",
        "compile_cache",
        "backend_share",  # checked below: a fraction
        "fallback_report",
        "fallback_prediction",
        "budget_use",  # checked by verdict.decide
        "strict_budget_use",  # the parent turns it into strict_fp32
        "nonfinite_metrics",
        "reference_cache",
        "reference_precision_cache",
        "reference64",
        "random_ops",
        "zoo_error",  # the type of an error of Zoo's own in the model process
        "triage",  # kept only for a triage request, rebuilt by triage.graph.clean_triage
    }
)
MAX_DROPPED_NAMES = 20
# what the engine says of itself in-process (validate_here) that a row takes from the parent instead:
# dropped without a word (the parent puts its own), as every other key it may not write is with one
RECOMPUTED_BY_PARENT = frozenset({"strict_fp32", "known_failure", "known_failure_fixed"})


class BadResult(ValueError):
    """The model process's result is not a result."""


def read_json_file(path: Path, max_bytes: int, owner: int | None = None) -> tuple[Any, str | None]:
    """(value, None); (None, None) where there is no file; (None, problem) for a bad one."""
    blob, problem = read_bytes_file(path, max_bytes, owner)
    if blob is None:
        return None, problem
    try:
        return json.loads(blob.decode("utf-8"), parse_constant=_no_constant), None
    except (ValueError, RecursionError, UnicodeDecodeError) as exc:
        return None, f"{path.name} is not valid JSON ({type(exc).__name__}: {str(exc)[:200]})"


def read_bytes_file(path: Path, max_bytes: int, owner: int | None = None) -> tuple[bytes | None, str | None]:
    """A file a model process wrote, read without following a link: a regular file with one link,
    of ``owner`` (when given), at most ``max_bytes``. (bytes, None); (None, None) where there is no
    file; (None, problem) for a bad one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"{path.name} cannot be opened safely ({exc.strerror or exc}: a link?)"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None, f"{path.name} is not a regular file"
        if st.st_nlink != 1:
            return None, f"{path.name} has {st.st_nlink} hard links"
        if owner is not None and st.st_uid != owner:
            return None, f"{path.name} belongs to uid {st.st_uid}, not {owner}"
        if st.st_size > max_bytes:
            return None, f"{path.name} is {st.st_size} bytes, over the cap of {max_bytes}"
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            return None, f"{path.name} is over the cap of {max_bytes} bytes"
    finally:
        os.close(fd)
    return b"".join(chunks), None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def read_stage(path: Path, owner: int | None = None) -> str:
    """The last stage the model process reached, as one of the known names ("start" when unknown)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return "start"
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (owner is not None and st.st_uid != owner):
            return "start"
        text = os.read(fd, 64).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    return text if text in STAGES else "start"


def _depth_ok(value: Any) -> bool:
    todo = [(value, 0)]
    while todo:
        v, d = todo.pop()
        if d > MAX_DEPTH:
            return False
        if isinstance(v, dict):
            todo += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            todo += [(x, d + 1) for x in v]
    return True


def _clean_str(s: str) -> str:
    """NUL and lone surrogates break PostgreSQL and UTF-8 encoders: replaced, not stored; terminal
    escape sequences and other control characters are dropped (a string a model wrote is data)."""
    s = strip_controls(s.replace("\x00", "\ufffd"))
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s[:MAX_STR]


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return _clean_str(value)
    if isinstance(value, dict):
        return {_clean_str(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (not isinstance(v, float) or math.isfinite(v))


def check(raw: Any, allowed_keys: set[str] | frozenset[str] = frozenset(RESULT_KEYS)) -> dict[str, Any]:
    """The child's result, validated against the SPEC's shape (:class:`ValidationResult`'s keys);
    raises BadResult naming the problem."""
    if not isinstance(raw, dict):
        raise BadResult(f"the result is a {type(raw).__name__}, not an object")
    if not _depth_ok(raw):
        raise BadResult(f"the result nests deeper than {MAX_DEPTH} levels")
    unknown = sorted(str(k) for k in raw if k not in allowed_keys)
    if unknown:
        raise BadResult(f"unknown keys {unknown[:5]}")
    if raw.get("status") not in ALL_STATUSES:
        raise BadResult(f"status {str(raw.get('status'))[:40]!r} is not one of the SPEC's statuses")
    reason = raw.get("reason")
    if reason is not None and reason not in REASONS:
        raise BadResult(f"reason {str(reason)[:40]!r} is not one of the SPEC's reasons")
    for key in OPTIONAL_STR:
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise BadResult(f"{key} is a {type(raw[key]).__name__}, not a string")
    if raw.get("precision") is not None and raw["precision"] not in PRECISIONS:
        raise BadResult(f"precision {str(raw['precision'])[:20]!r} is not one of {', '.join(PRECISIONS)}")
    metrics = raw.get("metrics", {})
    if not isinstance(metrics, dict) or not all(
        isinstance(k, str) and (v is None or _is_number(v)) for k, v in metrics.items()
    ):
        raise BadResult("metrics must map names to finite numbers or null")
    if not isinstance(raw.get("fallback_ops", []), list) or not all(
        isinstance(x, str) for x in raw.get("fallback_ops", [])
    ):
        raise BadResult("fallback_ops must be a list of strings")
    census = raw.get("op_census", {})
    if not isinstance(census, dict) or not all(isinstance(v, int) and not isinstance(v, bool) for v in census.values()):
        raise BadResult("op_census must map op names to counts")
    versions = raw.get("versions", {})
    if not isinstance(versions, dict) or not all(isinstance(v, str) for v in versions.values()):
        raise BadResult("versions must map names to strings")
    error = raw.get("error")
    if error is not None and (
        not isinstance(error, dict) or not all(error.get(k) is None or isinstance(error[k], str) for k in ERROR_KEYS)
    ):
        raise BadResult("error must be null or an object of strings")
    if not isinstance(raw.get("details", {}), dict):
        raise BadResult("details must be an object")
    return _clean(raw)


def trusted_result(req: ValidationRequest, raw: Any) -> dict[str, Any]:
    """The row: the child's measurements and verdict, the parent's identity fields."""
    base = ValidationResult.empty(req).to_dict()
    child = check(raw, set(base))
    result = {**base, **{k: v for k, v in child.items() if k in base}}
    result["metrics"] = {**base["metrics"], **child.get("metrics", {})}
    try:
        from .backends import BackendSpec

        backend = str(BackendSpec.parse(req.backend)) if req.backend != "auto" else req.backend
    except Exception:
        backend = req.backend
    result.update(model_id=req.model_id, revision=req.revision, tier=req.tier, backend=backend, repro=req.repro())
    claimed = child.get("details") or {}
    details = {k: v for k, v in claimed.items() if k in MODEL_DETAIL_KEYS}
    if not req.triage:
        details.pop("triage", None)
    dropped = sorted(k for k in claimed if k not in details and k not in RECOMPUTED_BY_PARENT)
    if dropped:  # what it tried to say that is not its to say: kept as names only, for whoever investigates
        details["claims_dropped"] = [k[:64] for k in dropped[:MAX_DROPPED_NAMES]]
    details.update(seed=req.seed, harness_version=HARNESS_VERSION)
    details = own_details(details, req)  # env, remote_code, ...: the parent's to say, never the model process's
    error = result.get("error")
    if isinstance(error, dict):  # the signature groups rows into clusters: the parent's, from the type and message
        result["error"] = error_info(
            type_=error.get("type") or "UnknownError", message=error.get("message") or "", tb=error.get("traceback")
        )
    share = details.pop("backend_share", None)
    if share is not None:  # a share is a fraction or nothing: it decides a verdict (verdict.decide)
        if not (isinstance(share, (int, float)) and not isinstance(share, bool) and 0 <= share <= 1):
            raise BadResult(f"backend_share {str(share)[:20]!r} is not a fraction in [0, 1]")
        details["backend_share"] = share
    if req.precision and req.precision != "auto":  # asked for: the request says what it was judged at
        result["precision"] = req.precision
        details["precision_source"] = "flag"
    elif details.get("precision_source") not in (None, *SOURCES) or details.get("precision_source") == "flag":
        raise BadResult(
            f"precision_source {str(details.get('precision_source'))[:20]!r} does not fit a request at auto"
        )
    result["details"] = details
    return result
