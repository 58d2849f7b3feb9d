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
    echo(f"creating env {env_name}: {' '.join(pins)}")
    environments.create(env_name, pins)
    return env_name


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
    """Bisect; returns (and stores) ``first_bad``, ``last_good`` and ``steps``."""
    if env_base:
        envs.metadata(env_base)  # UnknownEnv, one line
    versions = between(released_versions(package), good, bad)
    steps: list[dict[str, Any]] = []
    cache: dict[Version, dict[str, Any]] = {}

    def run(v: Version) -> dict[str, Any]:
        if v in cache:
            return cache[v]
        env = env_for(package, v, env_base, echo)
        row = validate_or_fail(
            ValidationRequest(model_id=model_id, backend=backend, tier=tier, timeout_s=timeout_s, env=env)
        )
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

    def is_bad(step: dict[str, Any], ref: dict[str, Any]) -> bool:
        if step["status"] != ref["status"]:
            return False
        return match != "signature" or step["signature"] == ref["signature"]

    ref = run(versions[-1])
    ref["bad"] = True
    steps.append(ref)
    echo(f"{package} {ref['version']} (--bad): {ref['status']} {(ref['signature'] or '')[:100]}")
    first = run(versions[0])
    first["bad"] = is_bad(first, ref)
    steps.append(first)
    echo(f"{package} {first['version']} (--good): {first['status']} {(first['signature'] or '')[:100]}")
    if first["bad"]:
        raise BisectError(f"--good {good} is bad too ({first['status']}): nothing to bisect between {good} and {bad}")
    lo, hi = 0, len(versions) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        step = run(versions[mid])
        step["bad"] = is_bad(step, ref)
        steps.append(step)
        echo(f"{package} {step['version']}: {step['status']} -> {'bad' if step['bad'] else 'good'}")
        if step["bad"]:
            hi = mid
        else:
            lo = mid
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
        "versions": [str(v) for v in versions],
        "steps": steps,
    }
    with session_scope() as s:
        repository.store_bisection(s, out)
    return out
