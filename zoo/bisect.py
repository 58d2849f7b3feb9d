"""``zoo bisect``: the first bad version of a package for one model on one backend.

It lists the package's released versions between ``--good`` and ``--bad`` from the package index
(pip's own ``index versions``), and bisects them: each version tried runs the model in an env
(:mod:`services.environments`) pinned to it, every other pin taken from ``--env-base`` or Zoo's
own packages; envs with the same pins are reused. "Bad" is the status of the row at ``--bad``
(and its error signature with ``--match signature``). Every row is stored under its env, and the
outcome as a :class:`db.models.Bisection`, shown on the model page and in the cluster's issue.md.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from db import repository
from db.session import session_scope
from services import environments
from services.validation import validate_or_fail
from zoo_runner import envs
from zoo_runner.exceptions import ZooError
from zoo_runner.request import ValidationRequest
from zoo_runner.statuses import BACKEND_FAILING, PASSING


class BisectError(ZooError):
    """A bisection that cannot start or cannot decide (one line)."""


def released_versions(package: str) -> list[Version]:
    """The package's final releases on the index this machine's pip uses, oldest first."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package, "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    line = next((x for x in proc.stdout.splitlines() if x.startswith("Available versions:")), None)
    if proc.returncode != 0 or line is None:
        why = (proc.stderr.strip().splitlines() or ["no versions listed"])[-1]
        raise BisectError(f"the package index lists no versions of {package!r}: {why}")
    out = []
    for v in line.split(":", 1)[1].split(","):
        try:
            ver = Version(v.strip())
        except InvalidVersion:
            continue
        if not ver.is_prerelease and not ver.is_devrelease:
            out.append(ver)
    return sorted(set(out))


def between(versions: list[Version], good: str, bad: str) -> list[Version]:
    """``versions`` from ``good`` to ``bad`` inclusive; both must be released."""
    g, b = Version(good), Version(bad)
    if g >= b:
        raise BisectError(f"--good {good} must be older than --bad {bad}")
    for v, flag in ((g, "--good"), (b, "--bad")):
        if v not in versions:
            raise BisectError(
                f"{flag} {v} is not a released version (released: {', '.join(map(str, versions[-8:]))} …)"
            )
    return [v for v in versions if g <= v <= b]


def env_for(package: str, version: Version, base: str | None, echo: Callable[[str], None]) -> str:
    """An env with ``package==version`` and the base's other pins: an existing one with exactly
    those pins, else a new one."""
    pins = [p for p in (envs.metadata(base).get("pins") if base else []) or []]
    name = canonicalize_name(package)
    pins = [p for p in pins if canonicalize_name(re.split(r"[<>=!~;\[ ]", p, maxsplit=1)[0]) != name]
    pins.append(f"{package}=={version}")
    for other in environments.list_envs():
        if sorted(other["pins"]) == sorted(pins):
            return other["name"]
    env_name = re.sub(r"[^a-z0-9._-]", "-", f"{base or 'zoo'}-{name}-{version}".lower())[:63]
    taken = set(envs.names())
    stem, n = env_name[:58], 2
    while env_name in taken:  # that name holds other pins (another base, edited by hand): a new one beside it
        env_name, n = f"{stem}-{n}", n + 1
    echo(f"creating env {env_name}: {' '.join(pins)}")
    environments.create(env_name, pins)
    return env_name


def _version(flag: str, text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise BisectError(f"{flag} {text!r} is not a version (e.g. 2026.0.0)") from None


def bisect(
    model_id: str,
    backend: str,
    package: str,
    good: str,
    bad: str,
    tier: str = "tiny",
    env_base: str | None = None,
    match: str = "status",
    timeout_s: float = 600.0,
    echo: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Bisect; returns (and stores) ``first_bad``, ``last_good``, ``steps`` and ``skipped``.

    A version is bad when its row fails as ``--bad``'s does (the same status; with ``--match
    signature`` the same error signature too), good when it passes, and skipped otherwise (its env
    cannot be made, Zoo's own gap, another failure): like ``git bisect skip``, the search goes on
    around it, and a first bad version next to skipped ones says so in ``skipped``."""
    _version("--good", good), _version("--bad", bad)
    if env_base:
        envs.metadata(env_base)  # UnknownEnv, one line
    versions = between(released_versions(package), good, bad)
    steps: list[dict[str, Any]] = []
    cache: dict[Version, dict[str, Any]] = {}

    def run(v: Version) -> dict[str, Any]:
        if v in cache:
            return cache[v]
        try:
            env = env_for(package, v, env_base, echo)
        except environments.EnvError as exc:  # this version cannot be installed here: skipped
            step = {"version": str(v), "env": None, "status": "env_error", "signature": str(exc)[:300]}
            step["installed"] = None
            cache[v] = step
            return step
        row = validate_or_fail(
            ValidationRequest(model_id=model_id, backend=backend, tier=tier, timeout_s=timeout_s, env=env)
        ).to_dict()
        step = {
            "version": str(v),
            "env": env,
            "status": row["status"],
            "signature": (row.get("error") or {}).get("signature"),
            "installed": (row.get("versions") or {}).get(canonicalize_name(package))
            or (row.get("versions") or {}).get(package),
        }
        cache[v] = step
        return step

    def verdict_of(step: dict[str, Any], ref: dict[str, Any]) -> str:
        if step["status"] == ref["status"] and (match != "signature" or step["signature"] == ref["signature"]):
            return "bad"
        return "good" if step["status"] in PASSING else "skip"

    ref = run(versions[-1])
    ref["verdict"] = "bad"
    steps.append(ref)
    echo(f"{package} {ref['version']} (--bad): {ref['status']} {(ref['signature'] or '')[:100]}")
    if ref["status"] not in BACKEND_FAILING:
        raise BisectError(
            f"--bad {bad} gives {ref['status']}, not a failure of the backend: nothing to bisect"
            + (f" ({(ref['signature'] or '')[:120]})" if ref["signature"] else "")
        )
    first = run(versions[0])
    first["verdict"] = verdict_of(first, ref)
    steps.append(first)
    echo(f"{package} {first['version']} (--good): {first['status']} {(first['signature'] or '')[:100]}")
    if first["verdict"] != "good":
        raise BisectError(
            f"--good {good} gives {first['status']}, not a pass: nothing to bisect between {good} and {bad}"
            + (f" ({(first['signature'] or '')[:120]})" if first["signature"] else "")
        )
    lo, hi = 0, len(versions) - 1
    skipped: set[int] = set()
    while True:
        inside = [i for i in range(lo + 1, hi) if i not in skipped]
        if not inside:
            break
        mid = (lo + hi) // 2
        mid = min(inside, key=lambda i: (abs(i - mid), i))  # the middle, or the nearest not skipped
        step = run(versions[mid])
        step["verdict"] = verdict_of(step, ref)
        steps.append(step)
        echo(f"{package} {step['version']}: {step['status']} -> {step['verdict']}")
        if step["verdict"] == "bad":
            hi = mid
        elif step["verdict"] == "good":
            lo = mid
        else:
            skipped.add(mid)
    between_skipped = [str(versions[i]) for i in sorted(skipped) if lo < i < hi]
    if between_skipped:
        echo(f"first bad is one of {', '.join(between_skipped)} or {versions[hi]}: those were skipped")
    out = {
        "model_id": model_id,
        "backend": backend,
        "tier": tier,
        "package": package,
        "good": good,
        "bad": bad,
        "match": match,
        "env_base": env_base,
        "bad_status": ref["status"],
        "bad_signature": ref["signature"],
        "last_good": str(versions[lo]),
        "first_bad": str(versions[hi]),
        "skipped": between_skipped,
        "versions": [str(v) for v in versions],
        "steps": steps,
    }
    with session_scope() as s:
        repository.store_bisection(s, out)
    return out
