"""Custom code (a repo's own modeling files, ``trust_remote_code``), run only in the sandbox.

Under ``ZOO_REMOTE_CODE=sandboxed`` (``--remote-code sandboxed``) a repo tagged ``custom_code`` is
no longer refused by policy. The parent, in :func:`prepare`:

- refuses it (``unsupported``, ``remote_code``) where the model process would not get the full
  sandbox (``ZOO_SANDBOX=off``, or a protection this machine cannot give);
- fetches the repo's code files at the pinned revision with ``huggingface_hub`` into Zoo's Hub
  cache, never importing them, and records each file's sha256 (``details.remote_code``);
- reads their imports as text (transformers' own ``get_imports``, what its ``check_imports``
  reads) and answers ``unsupported`` / ``missing_dependency``, naming the packages, where the
  model's interpreter (Zoo's, or the env's) has none of that name.

The model process gets the files read-only (the repo's Hub cache directory, as for the full
tier) and loads the classes the config's ``auto_map`` names (:func:`load_class`): transformers
copies them into its modules cache under the model process's own ``HF_HOME`` (its work directory),
so nothing it imports or writes outlives the run. The fingerprint of such a model comes from its
config and the code's hashes (:func:`fingerprint`), computed alike in the parent and the model
process, so the parent never imports the code to dedup it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from typing import Any

from .exceptions import NotSupported
from .statuses import Reason

CODE_SUFFIXES = (".py",)
MAX_FILES = 64  # a repo with more code files than this is not a model's code: refused
MAX_BYTES = 4 << 20  # nor is more code than this
IN_MODEL_PROCESS = False  # set by zoo_runner.child.main: only a model process imports a repo's code


_POLICY: list[str] = []  # --remote-code, over ZOO_REMOTE_CODE, for this process


def set_policy(policy: str) -> None:
    """``never`` or ``sandboxed`` for this process, over ``ZOO_REMOTE_CODE`` (the CLI's flag)."""
    if policy not in ("never", "sandboxed"):
        raise ValueError(f"remote-code policy {policy!r}: never or sandboxed")
    _POLICY[:] = [policy]


def enabled() -> bool:
    from .settings import settings

    return (_POLICY[0] if _POLICY else settings().remote_code) == "sandboxed"


def code_files(files: list[str]) -> list[str]:
    return sorted(f for f in files if f.endswith(CODE_SUFFIXES) and not f.startswith(".") and ".." not in f)


def sandbox_gaps() -> str | None:
    """Why a model process here would not get the full sandbox, or None where it would."""
    from . import sandbox

    if sandbox.mode() == "off":
        return "ZOO_SANDBOX=off"
    caps = sandbox.capabilities(*sandbox.sandbox_ids())
    return sandbox.why_missing(caps) if sandbox.missing(caps) else None


def _auto_map_refs(config: dict[str, Any]) -> list[str]:
    refs: list[str] = []
    for value in (config.get("auto_map") or {}).values():
        refs += [v for v in (value if isinstance(value, (list, tuple)) else [value]) if isinstance(v, str)]
    return refs


def missing_modules(names: list[str], python: str | None = None) -> list[str]:
    """The top-level module names of ``names`` that interpreter ``python`` (Zoo's own by default)
    cannot find; nothing is imported (``find_spec`` of a top-level name only looks)."""
    names = sorted({n.split(".")[0] for n in names if n and n.replace("_", "a").replace(".", "a").isalnum()})
    if not names:
        return []
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        return [n for n in names if importlib.util.find_spec(n) is None]
    code = (
        "import importlib.util, json, sys\n"
        "print(json.dumps([n for n in sys.argv[1:] if importlib.util.find_spec(n) is None]))"
    )
    out = subprocess.run([python, "-c", code, *names], capture_output=True, text=True, timeout=60)
    return list(json.loads(out.stdout.strip().splitlines()[-1])) if out.returncode == 0 else []


def prepare(req: Any, files: list[str], fetch: Any) -> None:
    """Fill ``req.remote_code`` and ``req.files_dir`` for a custom-code repo (see the module's
    docstring); NotSupported where it cannot run here. ``files``: the repo's file list;
    ``fetch(patterns)``: the repo's local directory with those files (``huggingface_hub``)."""
    gaps = sandbox_gaps()
    if gaps:
        raise NotSupported(
            Reason.REMOTE_CODE,
            f"{req.model_id} needs remote code: ZOO_REMOTE_CODE=sandboxed runs it only under the full "
            f"sandbox, and model processes here would run without {gaps}",
        )
    refs = _auto_map_refs(req.config or {})
    if any("--" in ref for ref in refs):
        raise NotSupported(
            Reason.REMOTE_CODE, f"{req.model_id}: its auto_map names code in another repo ({refs[0]}): not fetched"
        )
    names = code_files(files)
    if not names or not refs:
        raise NotSupported(Reason.REMOTE_CODE, f"{req.model_id} is tagged custom_code but has no auto_map code to run")
    if len(names) > MAX_FILES:
        raise NotSupported(Reason.REMOTE_CODE, f"{req.model_id} has {len(names)} code files (at most {MAX_FILES})")
    folder = fetch([*names, "config.json"])
    hashes: dict[str, str] = {}
    total = 0
    for name in names:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:  # Zoo's Hub cache: read as bytes, never imported here
            data = f.read(MAX_BYTES + 1)
        total += len(data)
        if total > MAX_BYTES:
            raise NotSupported(Reason.REMOTE_CODE, f"{req.model_id}: over {MAX_BYTES >> 20} MiB of code files")
        hashes[name] = hashlib.sha256(data).hexdigest()
    from transformers.dynamic_module_utils import get_imports  # reads the file as text

    imported = sorted({m for name in names for m in get_imports(os.path.join(folder, name))})
    local = {os.path.splitext(os.path.basename(n))[0] for n in names}
    python = None
    if req.env:
        from .envs import python_for

        python = python_for(req.env)
    lacking = missing_modules([m for m in imported if m not in local], python)
    if lacking:
        raise NotSupported(
            Reason.MISSING_DEPENDENCY,
            f"{req.model_id}'s code imports {', '.join(lacking)}, not installed "
            f"{'in env ' + req.env if req.env else 'here'} (pip install {' '.join(lacking)})",
        )
    req.remote_code = hashes
    req.files_dir = req.files_dir or folder


def fingerprint(req: Any) -> str:
    """What a custom-code model is, from what the parent read itself: the config, the code's
    hashes, the tier and the input shapes (the model process records the same)."""
    from . import inputs
    from .fingerprint import fingerprint as fp

    config = dict(req.config or {})
    arch = ",".join(config.get("architectures") or []) or str(config.get("model_type"))
    return fp(
        req.library or "transformers",
        f"remote:{arch}",
        {"config": config, "code": dict(sorted((req.remote_code or {}).items()))},
        req.tier,
        [dict(s) for s in inputs.DEFAULT_SHAPES],
    )


def load_class(reference: str, folder: str) -> type:
    """The class ``module.Class`` of a custom-code repo in ``folder``, imported by transformers from
    a copy in its modules cache. Only a model process runs this: the parent never imports the code."""
    if not IN_MODEL_PROCESS:
        raise RuntimeError("custom code is imported only in a model process")
    from transformers import dynamic_module_utils as dynamic

    # transformers copies the code into its modules cache, resolved from HF_HOME when it was first
    # imported (the forkserver's, maybe): this process's own, under its work directory
    dynamic.HF_MODULES_CACHE = os.path.join(os.environ.get("HF_HOME") or os.getcwd(), "modules")
    return dynamic.get_class_from_dynamic_module(reference, folder)
