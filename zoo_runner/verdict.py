"""The parent decides the verdict; the model process only measures.

A model process returns measurements: its outputs' errors against the reference (``metrics``, and
``details.budget_use``, the largest share of a budget any output used), timings and fallback ops.
:func:`decide` recomputes the status from them by the rules Zoo owns:

* a comparing tier (``tiny``, ``full``) claiming ``pass`` or ``pass_with_fallback`` must carry its
  metrics (``max_abs_diff``, ``rmse_ratio``, ``cosine``) and a budget use, all finite: without them
  the row is refused (the launcher stores a ``crash`` saying why);
* a budget use over 1 is a ``mismatch``, whatever the model process claimed;
* ``pass`` with fallback ops is ``pass_with_fallback``, and ``pass_with_fallback`` without any is ``pass``.

:func:`parent_versions` replaces the row's ``versions`` with what the parent reads from the model
interpreter's installed metadata: the model process only names which distributions matter.
"""

from __future__ import annotations

import functools
import json
import math
import re
import subprocess
import sys
from typing import Any

from .request import ValidationRequest, error_info
from .result_schema import BadResult
from .statuses import PASSING, Reason, Status

COMPARED_TIERS = ("tiny", "full")
NEEDED_METRICS = ("max_abs_diff", "rmse_ratio", "cosine")
DIST_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_DISTS = 16
ALWAYS = ("torch", "transformers")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _overrule(result: dict[str, Any], status: Status, reason: Reason | None, type_: str, message: str) -> None:
    """The parent's verdict over the model process's: ``status`` (``reason``) with that error."""
    result["status"], result["reason"] = status.value, reason.value if reason else None
    result["error"] = error_info(type_=type_, message=message)
    result["details"]["verdict"] = "parent"


def decide(req: ValidationRequest, result: dict[str, Any]) -> None:
    """Recompute ``result``'s status from its measurements (in place); raises BadResult for a pass
    claimed without the measurements that make one."""
    status = result.get("status")
    if status not in PASSING:
        return
    if (result.get("details") or {}).get("backend_share") == 0:  # it ran, but not on the backend: nothing proved
        _overrule(
            result, Status.COMPILE_ERROR, Reason.BACKEND_FELL_BACK, "BackendFellBack",
            f"the backend executed none of the graphs' ops (backend_share 0), though the model process said {status}",
        )  # fmt: skip
        return
    if req.tier not in COMPARED_TIERS:
        return
    metrics = result.get("metrics") or {}
    missing = [m for m in NEEDED_METRICS if not _finite(metrics.get(m))]
    use = (result.get("details") or {}).get("budget_use")
    if missing or not _finite(use):
        what = ", ".join(missing + ([] if _finite(use) else ["budget_use"]))
        raise BadResult(f"it claims {status} without its measurements ({what})")
    if use > 1.0:
        _overrule(
            result, Status.MISMATCH, None, "Mismatch",
            f"the outputs used {use:.3g}x their error budget: a mismatch, though the model process said {status}",
        )  # fmt: skip
        return
    fallbacks = result.get("fallback_ops") or []
    want = Status.PASS_WITH_FALLBACK.value if fallbacks else Status.PASS.value
    if status != want:
        result["status"] = want
        result["details"]["verdict"] = "parent"


def parent_identity(req: ValidationRequest, result: dict[str, Any], started_at: str, facts: Any = None) -> None:
    """What other rows are matched by comes from the parent: the start time (its ISO week) and the
    fingerprint, computed from the plan (fingerprint dedup hands a row to every model sharing it:
    a fingerprint the model process claims could hand its verdict to another model); and so do the
    row's library, architecture, task and known failure (:func:`parent_facts`)."""
    from .planning import parent_plan

    facts = facts or parent_plan(req)
    result["started_at"] = started_at
    claimed = result.get("fingerprint")
    if claimed != facts.fingerprint:
        result["details"]["fingerprint_claimed"] = claimed
    result["fingerprint"] = facts.fingerprint
    parent_facts(result, facts)


def parent_facts(result: dict[str, Any], facts: Any, claims: bool = True) -> None:
    """The parent's :class:`~zoo_runner.planning.PlanFacts` on a row (in place), whatever the model
    process said: library, architecture and task; ``details.known_failure`` on a failing row whose
    quirk names a known failure (``known_failure_fixed`` on a passing one); ``details.strict_fp32``
    from the strict comparison's budget use (a passing row that also meets fp32's budget)."""
    details = result.setdefault("details", {})
    own = {"library": facts.library or result.get("library"), "architecture": facts.architecture, "task": facts.task}
    claimed = {k: result.get(k) for k in own if result.get(k) is not None and result.get(k) != own[k]}
    if claimed and claims:  # what the model process said otherwise: kept apart, for whoever investigates
        details["claims_overruled"] = {k: str(v)[:200] for k, v in claimed.items()}
    result.update(own)
    for key in ("known_failure", "known_failure_fixed", "strict_fp32"):
        details.pop(key, None)
    passing = result.get("status") in PASSING
    if facts.known_failure:
        details["known_failure_fixed" if passing else "known_failure"] = dict(facts.known_failure)
    strict = details.get("strict_budget_use")
    if "strict_budget_use" in details:
        details["strict_fp32"] = bool(passing and _finite(strict) and strict <= 1.0)


def parent_versions(python: str | None, claimed: Any, backend: str = "") -> dict[str, str]:
    """``versions`` from the parent: torch, transformers and Zoo always, and each distribution the
    model process named that is installed for the model's interpreter, at its installed version."""
    names = [n for n in (claimed or {}) if isinstance(n, str) and DIST_NAME.match(n) and n != "zoo"][:MAX_DISTS]
    found = _installed(python or sys.executable, tuple(sorted(set(names) | set(ALWAYS))))
    from .version import __version__

    out = {k: v for k, v in found.items() if v is not None}
    out["zoo"] = __version__
    return dict(sorted(out.items()))


@functools.lru_cache(maxsize=64)
def _installed(python: str, names: tuple[str, ...]) -> dict[str, str | None]:
    if python == sys.executable:
        return _metadata(names)
    code = (
        "import json,sys\nfrom importlib.metadata import version,PackageNotFoundError\nout={}\n"
        "for n in sys.argv[1:]:\n    try: out[n]=version(n)\n    except PackageNotFoundError: out[n]=None\n"
        "print(json.dumps(out))"
    )
    try:
        proc = subprocess.run([python, "-I", "-c", code, *names], capture_output=True, text=True, timeout=60)
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        return {n: (v if isinstance(v, str) else None) for n, v in data.items() if n in names}
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return {n: None for n in names}


def _metadata(names: tuple[str, ...]) -> dict[str, str | None]:
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, str | None] = {}
    for n in names:
        try:
            out[n] = version(n)
        except PackageNotFoundError:
            out[n] = None
    return out
