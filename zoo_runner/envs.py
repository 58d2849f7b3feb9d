"""Named version sets ("environments") the model process can run in: the lookup half.

An environment is a venv under ``ZOO_ENV_HOME`` built by :mod:`services.environments` (``zoo env
create NAME PIN...``). It holds only its pins (and what they pull in); everything else, Zoo's
engine included, falls through to Zoo's own interpreter's site-packages, after the env's own. So
an env's engine is always the parent's: it cannot be older. Policy, preparation, budgets and
storage stay in Zoo's own process; only the model process runs with the env's interpreter.

This module only finds an env and reads what was recorded when it was made (``zoo-env.json``,
written by the trusted parent, never by a model process)."""

from __future__ import annotations

import ast
import json
import os
import re
import sysconfig
from pathlib import Path
from typing import Any

from .exceptions import ZooError

NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
RESERVED = {"default"}  # what `zoo compare` calls Zoo's own interpreter
META = "zoo-env.json"
FALLTHROUGH = "zz-zoo-fallthrough.pth"  # in the env's site-packages, sorted last: its own packages come first


class UnknownEnv(ZooError):
    """No env of that name (or a name that could not be one)."""


def home() -> Path:
    from .settings import settings

    configured = settings().env_home
    return Path(configured).expanduser() if configured else Path("~/.cache/zoo/envs").expanduser()


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise UnknownEnv(f"bad env name {name!r}: lowercase letters, digits, '.', '_' and '-', at most 63")
    if name in RESERVED:
        raise UnknownEnv(f"env name {name!r} is reserved: it names Zoo's own interpreter in `zoo compare`")
    return name


def env_dir(name: str) -> Path:
    return home() / check_name(name)


def names() -> list[str]:
    h = home()
    if not h.is_dir():
        return []
    return sorted(p.name for p in h.iterdir() if NAME.fullmatch(p.name) and (p / META).is_file())


def metadata(name: str) -> dict[str, Any]:
    """What was recorded when the env was made; UnknownEnv (one line, with the known names) if none."""
    path = env_dir(name) / META
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        known = ", ".join(names()) or "none yet"
        raise UnknownEnv(
            f"unknown env {name!r} (known: {known}); `zoo env create {name} PKG==VERSION ...` makes one"
        ) from None
    return data if isinstance(data, dict) else {}


def own_sites() -> list[str]:
    """This interpreter's site-packages, where an env made by it falls through (Zoo's engine among them)."""
    return sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})


def fallthrough(name: str) -> list[str]:
    """The site-packages env ``name`` falls through to, as its FALLTHROUGH file names them (read as text)."""
    out: set[str] = set()
    for pth in env_dir(name).glob(f"lib/python*/site-packages/{FALLTHROUGH}"):
        for m in re.finditer(r"site\.addsitedir\(('[^'\n]*'|\"[^\"\n]*\")\)", pth.read_text(errors="replace")):
            out.add(ast.literal_eval(m.group(1)))
    return sorted(out)


def python_for(name: str) -> str:
    """The interpreter of env ``name``; UnknownEnv where there is none, or where it falls through to
    another Zoo's packages (``ZOO_ENV_HOME`` is shared by every Zoo on the machine): its model
    processes would run that Zoo's engine, not this one's."""
    metadata(name)
    python = env_dir(name) / "bin" / "python"
    if not os.access(python, os.X_OK):
        raise UnknownEnv(f"env {name!r} has no interpreter at {python}: `zoo env remove {name}` and create it again")
    theirs = fallthrough(name)
    if theirs != own_sites():
        raise UnknownEnv(
            f"env {name!r} was made by another Zoo (it falls through to {', '.join(theirs) or 'nothing'}), so "
            f"its model processes would run that Zoo's engine: create it again with this Zoo under another "
            f"name, or give each Zoo its own ZOO_ENV_HOME"
        )
    return str(python)


def describe(name: str) -> dict[str, Any]:
    """``details.env`` of a row run in env ``name``: its name and pins, as recorded."""
    meta = metadata(name)
    return {"name": name, "pins": list(meta.get("pins") or [])}
