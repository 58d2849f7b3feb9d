"""Environments: named version sets Zoo builds, caches and runs model processes in (``zoo env``).

``create`` makes a venv under ``ZOO_ENV_HOME`` with the parent's interpreter, installs the pins
there (uv, which links files from its cache: seconds where pip took 79 s for torch 2.9.0; pip where uv
is missing or cannot resolve), and lets everything else, Zoo's engine included, fall through to Zoo's
own site-packages, after the env's own. The env holds only what Zoo lacks or has at another version.
The env's recorded versions are read by the parent from what was installed; a model process never
writes them.

The lookup half (which interpreter runs a model, what a row records) is
:mod:`zoo_runner.envs`, so the engine can run a request with ``env`` set without this module.
"""

from __future__ import annotations

import ast
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
    python = str(target / "bin" / "python")
    if _uv_install(python, site, pins, echo):
        return
    if uv_binary() is not None:  # uv tried and failed: pip starts from a fresh venv, nothing of uv's left in it
        shutil.rmtree(target)
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True, capture_output=True)
        site.mkdir(parents=True, exist_ok=True)
        (site / FALLTHROUGH).write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in parent_sites))
    cmd = [sys.executable, "-m", "pip", "--python", python, "install",
           "--no-input", "--disable-pip-version-check", "--progress-bar", "off", *pins]  # fmt: skip
    errors: list[str] = []
    rc = _stream(cmd, "pip", echo, errors, os.environ.copy())
    if rc != 0:
        why = errors[-1] if errors else f"pip exited with {rc}"
        raise EnvError(f"the pins {' '.join(pins)} do not install: {why}")


def _stream(cmd: list[str], who: str, echo: Callable[[str], None], errors: list[str], env: dict[str, str]) -> int:
    """Run an installer, each line of its output to ``echo`` as ``who: line``; its exit code. Lines that
    say ``ERROR:`` (pip's) are kept in ``errors``."""
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            echo(f"{who}: {line}")
            if line.startswith("ERROR:"):
                errors.append(line[len("ERROR:") :].strip())
        return proc.wait(timeout=PIP_TIMEOUT_S)


def uv_binary() -> str | None:
    """uv beside this interpreter (``scripts/setup.sh`` installs its pinned release there), else on PATH."""
    here = Path(sys.executable).parent / "uv"
    return str(here) if os.access(here, os.X_OK) else shutil.which("uv")


def pip_config() -> dict[str, str]:
    """pip's configuration on this machine, the most specific of its sections winning (its environment,
    then ``[install]``, then ``[global]``): ``{"extra-index-url": "file:///a file:///b", ...}``."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60
    ).stdout
    rank, best = {":env:": 3, "install": 2, "global": 1}, {}
    for line in out.splitlines():  # e.g. global.extra-index-url='file:///a file:///b'
        key, _, value = line.partition("=")
        section, _, name = key.rpartition(".")
        try:
            value = str(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            continue
        if rank.get(section, 0) > best.get(name, (0, ""))[0]:
            best[name] = (rank[section], value)
    return {name: value for name, (_, value) in best.items()}


def uv_environment(config: dict[str, str]) -> dict[str, str]:
    """pip's configuration (``pip_config``) as uv's environment, as ``scripts/setup.sh`` hands it over: an
    env then resolves from the same indexes and local wheels whichever installer builds it. Not on a
    command line: an index URL may hold a password. pip's constraint files are passed by the caller."""
    names = {
        "index-url": ("UV_INDEX_URL", " "),
        "extra-index-url": ("UV_EXTRA_INDEX_URL", " "),
        "find-links": ("UV_FIND_LINKS", ","),
        "cert": ("SSL_CERT_FILE", " "),
    }
    env = {var: sep.join(config[name].split()) for name, (var, sep) in names.items() if name in config}
    if config.get("no-index", "").lower() in ("1", "true", "yes", "on"):
        env["UV_NO_INDEX"] = "1"
    env["UV_INDEX_STRATEGY"] = "unsafe-best-match"  # as pip: the best match over every index, not the first's
    env["UV_COMPILE_BYTECODE"] = "1"  # as pip: model processes (another uid) cannot write .pyc files there
    return env


def _uv_install(python: str, site: Path, pins: list[str], echo: Callable[[str], None]) -> bool:
    """The pins installed into the env at ``python`` by uv (seconds where pip took a minute or more for a
    torch release: uv links files from its cache); False where uv is not here or cannot do it, and pip then
    does it in a fresh venv.

    An env holds only what Zoo's own packages lack: uv resolves with every package Zoo has, other than the
    pins, held at Zoo's version (a pin that needs another version of one is pip's, which installs that
    one in the env), then removes from the env what it installed at Zoo's very version (it falls through
    to Zoo's copy), as pip leaves it."""
    uv = uv_binary()
    if uv is None:
        return False
    pinned = {canonicalize_name(Requirement(p).name) for p in pins}
    parent = _own_many(envs.own_sites())
    constraints = site.parent / ".zoo-uv-constraints.txt"
    constraints.write_text(
        "".join(f"{name}=={version}\n" for name, version in sorted(parent.items()) if name not in pinned)
    )
    config = pip_config()
    env = {**os.environ, **uv_environment(config)}
    env.pop("UV_CONSTRAINT", None)  # pip's constraint files go on the command line, beside Zoo's
    cmd = [uv, "pip", "install", "--python", python, "--constraint", str(constraints)]
    for c in config.get("constraint", "").split():
        if os.path.isfile(c):
            cmd += ["--constraint", c]
    try:
        rc = _stream([*cmd, *pins], "uv", echo, [], env)
        if rc != 0:
            echo(f"uv: exited with {rc}; pip tries")
            return False
        # Zoo's copy serves (a pin Zoo already has at that version too): what pip would not have installed
        same = sorted(n for n, v in _own(site).items() if parent.get(n) == v)
        if same:
            rc = _stream([uv, "pip", "uninstall", "--python", python, *same], "uv", echo, [], env)
            if rc != 0:
                echo(f"uv: uninstall exited with {rc}; pip tries")
                return False
        return True
    except subprocess.TimeoutExpired:
        echo(f"uv: no answer in {PIP_TIMEOUT_S:.0f} s; pip tries")
        return False
    finally:
        constraints.unlink(missing_ok=True)


def _own_many(sites: list[str]) -> dict[str, str]:
    return {canonicalize_name(d.metadata["Name"]): d.version for d in distributions(path=sites)}


def describe(name: str) -> dict[str, Any]:
    meta = envs.metadata(name)
    return {
        "name": name,
        "pins": meta.get("pins") or [],
        "versions": meta.get("versions") or {},
        "own": meta.get("own") or {},
        "created": meta.get("created"),
        "path": str(envs.env_dir(name)),
        "size_mb": size_mb(envs.env_dir(name)),
    }


def size_mb(root: Path) -> int:
    """What the env's files hold, measured (each file once; links not followed): MB, rounded up."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_size
    return -(-total // (1 << 20))


def list_envs() -> list[dict[str, Any]]:
    return [describe(n) for n in envs.names()]


def remove(name: str) -> None:
    envs.metadata(name)  # UnknownEnv, with the known names, for a name that is not one
    shutil.rmtree(envs.env_dir(name))
