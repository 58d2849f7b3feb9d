"""Environments: named version sets Zoo builds, caches and runs model processes in (``zoo env``).

``create`` makes a venv under ``ZOO_ENV_HOME`` with the parent's interpreter, installs only the
pins there (pip, which also takes torch's CPU build from the local wheel as ``scripts/setup.sh``
does), and lets everything else, Zoo's engine included, fall through to Zoo's own site-packages,
after the env's own. So an env costs what its pins cost on disk (an OpenVINO release: ~60 MB),
builds in seconds to a minute, and its engine is the parent's. The env's recorded versions are
read by the parent from what pip installed; a model process never writes them.

The lookup half (which interpreter runs a model, what a row records) is
:mod:`zoo_runner.envs`, so the engine can run a request with ``env`` set without this module.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from importlib.metadata import distributions
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from zoo_runner import envs
from zoo_runner.exceptions import ZooError
from zoo_runner.verdict import parent_versions
from zoo_runner.version import __version__

FALLTHROUGH = envs.FALLTHROUGH  # sorted last: the env's own packages come first
PIP_TIMEOUT_S = 1800.0


class EnvError(ZooError):
    """An env that cannot be made: a bad pin, a pin that does not resolve, a name in use."""


def parse_pins(pins: list[str]) -> list[Requirement]:
    """Each pin as a requirement (``openvino==2025.4.1``, ``torch>=2.12``); one line for a bad one."""
    if not pins:
        raise EnvError("an env needs at least one pin, e.g. `zoo env create ov2025 openvino==2025.4.1`")
    out = []
    for pin in pins:
        try:
            req = Requirement(pin)
        except InvalidRequirement as exc:
            raise EnvError(f"bad pin {pin!r}: {str(exc).splitlines()[0]}") from None
        if req.url:
            raise EnvError(f"bad pin {pin!r}: a package index version, not a URL")
        if canonicalize_name(req.name) == "zoo":
            raise EnvError("Zoo itself is not pinned: an env's engine is always the one running it")
        if req.marker is not None and not req.marker.evaluate():  # pip would skip it, and the env record it
            raise EnvError(
                f"pin {pin!r} would not install here: its marker ({req.marker}) is false for this interpreter "
                f"(Python {sys.version_info.major}.{sys.version_info.minor}, {sys.platform})"
            )
        out.append(req)
    return out


def _site(prefix: Path) -> Path:
    rel = os.path.relpath(sysconfig.get_paths()["purelib"], sys.prefix)
    return prefix / rel


def _own(site: Path) -> dict[str, str]:
    """Distributions installed in the env itself (not those it falls through to)."""
    return {canonicalize_name(d.metadata["Name"]): d.version for d in distributions(path=[str(site)])}


def create(name: str, pins: list[str], echo: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Build env ``name`` with ``pins``; returns what ``zoo env list`` shows of it. ``echo`` gets
    pip's output line by line (progress). A pin that does not resolve leaves nothing behind."""
    envs.check_name(name)
    reqs = parse_pins(pins)
    target = envs.env_dir(name)
    if target.exists():
        if (target / envs.META).is_file():
            raise EnvError(f"env {name!r} exists: `zoo env remove {name}` first, or pick another name")
        shutil.rmtree(target)  # a half-built one (a crash during create): nothing refers to it
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvError(
            f"envs cannot be made in {target.parent} ({exc.strerror}): set ZOO_ENV_HOME to a writable folder"
        ) from None
    try:
        _build(target, [str(r) for r in reqs], echo)
        meta = {
            "name": name,
            "pins": [str(r) for r in reqs],
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "zoo": __version__,
            "base": sys.prefix,
            "own": _own(_site(target)),
        }
        meta["versions"] = parent_versions(str(target / "bin" / "python"), {r.name: "" for r in reqs})
        (target / envs.META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    except (OSError, subprocess.CalledProcessError) as exc:  # a full disk, a folder that went away
        shutil.rmtree(target, ignore_errors=True)
        raise EnvError(f"env {name!r} could not be built in {target}: {str(exc).splitlines()[0][:200]}") from None
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    os.chmod(target, 0o755)
    return describe(name)


def _build(target: Path, pins: list[str], echo: Callable[[str], None]) -> None:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, capture_output=True)
    site = _site(target)
    site.mkdir(parents=True, exist_ok=True)
    parent_sites = envs.own_sites()
    # site.addsitedir, not a bare path: it also runs the parent's .pth files (Zoo's editable install)
    (site / FALLTHROUGH).write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in parent_sites))
    cmd = [sys.executable, "-m", "pip", "--python", str(target / "bin" / "python"), "install",
           "--no-input", "--disable-pip-version-check", "--progress-bar", "off", *pins]  # fmt: skip
    errors: list[str] = []
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            echo(line)
            if line.startswith("ERROR:"):
                errors.append(line[len("ERROR:") :].strip())
        rc = proc.wait(timeout=PIP_TIMEOUT_S)
    if rc != 0:
        why = errors[-1] if errors else f"pip exited with {rc}"
        raise EnvError(f"the pins {' '.join(pins)} do not install: {why}")


def describe(name: str) -> dict[str, Any]:
    meta = envs.metadata(name)
    return {
        "name": name,
        "pins": meta.get("pins") or [],
        "versions": meta.get("versions") or {},
        "own": meta.get("own") or {},
        "created": meta.get("created"),
        "path": str(envs.env_dir(name)),
    }


def list_envs() -> list[dict[str, Any]]:
    return [describe(n) for n in envs.names()]


def remove(name: str) -> None:
    envs.metadata(name)  # UnknownEnv, with the known names, for a name that is not one
    shutil.rmtree(envs.env_dir(name))
