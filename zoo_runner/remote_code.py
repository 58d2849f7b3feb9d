"""Custom code (a repo's own modeling files, ``trust_remote_code``), run only in the sandbox.

Under ``ZOO_REMOTE_CODE=sandboxed`` (``--remote-code sandboxed``) a repo tagged ``custom_code`` is
no longer refused by policy. The parent, in :func:`prepare`:

- refuses it (``unsupported``, ``remote_code``) where the model process would not get the full
  sandbox (``ZOO_SANDBOX=off``, or a protection this machine cannot give);
- fetches the repo's code files at the pinned revision with ``huggingface_hub`` into Zoo's Hub
  cache, never importing them, and records each file's sha256 (``details.remote_code``);
- parses their imports (transformers' own ``get_imports``, with ``ast``, as its ``check_imports``
  does: nothing runs) and answers ``unsupported`` / ``missing_dependency``, naming the packages, where the
  model's interpreter (Zoo's, or the env's) has none of that name;
- refuses code in another repo (an ``auto_map`` entry ``repo--module.Class``), a module the
  ``auto_map`` names that the repo lacks, more than ``MAX_FILES`` files or ``MAX_BYTES`` of code
  (sized before anything is fetched), a library whose builder does not load ``auto_map``
  classes, and code that does not parse.

The model process gets exactly the hashed files and ``config.json``, read-only, in a directory of
Zoo's named by their hashes (the full tier: the weights' snapshot, where they were fetched too)
and loads the classes the config's ``auto_map`` names (:func:`load_class`): transformers
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
import posixpath
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .exceptions import NotSupported
from .statuses import Reason

CODE_SUFFIXES = (".py",)
MAX_FILES = 64  # a repo with more code files than this is not a model's code: refused
MAX_BYTES = 4 << 20  # nor is more code than this
LIBRARIES = ("transformers", "sentence-transformers")  # whose builders load auto_map classes
IN_MODEL_PROCESS = False  # set by zoo_runner.child.main: only a model process imports a repo's code
_policy: str | None = None  # --remote-code, over ZOO_REMOTE_CODE, for this process


def set_policy(policy: str) -> None:
    """``never`` or ``sandboxed`` for this process, over ``ZOO_REMOTE_CODE`` (the CLI's flag)."""
    global _policy
    if policy not in ("never", "sandboxed"):
        raise ValueError(f"remote-code policy {policy!r}: never or sandboxed")
    _policy = policy


def enabled() -> bool:
    from .settings import settings

    return (_policy or settings().remote_code) == "sandboxed"


def native_classes(config: dict[str, Any]) -> str | None:
    """Why this custom-code repo may be validated on transformers' own classes instead of its code,
    or None: its ``model_type`` is one transformers ported from such repos (the quirks table's
    ``native_for_custom_code``, with why), this transformers knows it, and every class its config's
    ``architectures`` names is transformers' own. That is what ``from_pretrained`` without
    ``trust_remote_code`` loads for it: transformers prefers its own classes to the repo's code."""
    import transformers
    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

    from .quirks import custom_code_guards, native_for_custom_code

    model_type = config.get("model_type")
    why = native_for_custom_code(model_type) if isinstance(model_type, str) else ""
    archs = config.get("architectures") or []
    if not why or model_type not in CONFIG_MAPPING_NAMES or not isinstance(archs, list):
        return None
    agree, fixed = custom_code_guards(model_type)
    if any(config.get(key, default) != value for key, value, default in fixed):
        return None  # an option of the repo's code of which transformers ported another value (nomic's MoE)
    if agree:
        from transformers import AutoConfig  # its config class's defaults: transformers' own code only

        defaults = AutoConfig.for_model(model_type).to_dict()
        for theirs, own in agree:
            if theirs not in config or config[theirs] != _dotted(config, own, _dotted(defaults, own, None)):
                return None  # the repo's value, named its own way, is not the one transformers would build
    # the classes transformers' auto mappings give this model_type (names only: nothing is imported)
    own: set[str] = set()
    for name, mapping in vars(modeling_auto).items():
        if name.startswith("MODEL_") and name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict):
            mapped = mapping.get(model_type)
            own.update([mapped] if isinstance(mapped, str) else mapped if isinstance(mapped, (list, tuple)) else [])
    if any(not isinstance(a, str) or a not in own for a in archs):
        return None
    return (
        f"its code was not run (ZOO_REMOTE_CODE=never): validated on transformers {transformers.__version__}'s "
        f"own {model_type} classes, as from_pretrained without trust_remote_code loads it; {why}"
    )


def _dotted(config: dict[str, Any], key: str, default: Any) -> Any:
    """``config[a][b]`` for ``key`` ``"a.b"`` (``default`` where any part is missing)."""
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return default
        node = node[part]
    return node


ST_MODULES = "sentence_transformers.models."  # sentence-transformers' own module classes


def standard_st_modules(modules: Any) -> bool:
    """Whether a sentence-transformers repo's ``modules.json`` names only sentence-transformers' own
    modules (a module of the repo's code, ``custom_st.Transformer``, would not run on the native path),
    its transformer at the repo's root (whose config.json is the one checked and built)."""
    return isinstance(modules, list) and all(
        isinstance(m, dict)
        and isinstance(m.get("type"), str)
        and m["type"].startswith(ST_MODULES)
        and (m["type"] != ST_MODULES + "Transformer" or m.get("path", "") in ("", "."))
        for m in modules
    )


def code_files(files: list[str]) -> list[str]:
    """The repo's code files, by names that stay inside it (normalised, relative, no dot-directory)."""
    return sorted(
        f
        for f in files
        if f.endswith(CODE_SUFFIXES)
        and posixpath.normpath(f) == f
        and not f.startswith(("/", "\\", "."))
        and "\\" not in f
        and not any(part.startswith(".") for part in f.split("/"))
    )


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


def _interpreter_env() -> dict[str, str]:
    from .sandbox import base_env

    return base_env()  # the allowlist: no secret reaches an env's startup hooks


def missing_modules(names: list[str], python: str | None = None) -> list[str]:
    """The top-level module names of ``names`` that interpreter ``python`` (Zoo's own by default)
    cannot find; nothing is imported (``find_spec`` of a top-level name only looks)."""
    names = sorted({n.split(".")[0] for n in names if n and n.replace("_", "a").replace(".", "a").isalnum()})
    names = [n for n in names if n != "__main__"]
    if not names:
        return []
    if python is None or os.path.abspath(python) == os.path.abspath(sys.executable):
        out = []
        for n in names:
            try:
                if importlib.util.find_spec(n) is None:
                    out.append(n)
            except (ImportError, ValueError):
                out.append(n)
        return out
    code = (
        "import importlib.util, json, sys\n"
        "def absent(n):\n"
        "    try:\n"
        "        return importlib.util.find_spec(n) is None\n"
        "    except (ImportError, ValueError):\n"
        "        return True\n"
        "print(json.dumps([n for n in sys.argv[1:] if absent(n)]))"
    )
    out = subprocess.run(
        [python, "-I", "-c", code, *names], capture_output=True, text=True, timeout=60, env=_interpreter_env()
    )
    if out.returncode != 0:
        raise RuntimeError(f"could not ask {python} which packages it has: {out.stderr.strip()[-300:]}")
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def _refuse(req: Any, why: str) -> NotSupported:
    return NotSupported(Reason.REMOTE_CODE, f"{req.model_id}: {why}")


def prepare(req: Any, files: list[str], download: Any, size_of: Any) -> None:
    """Fill ``req.remote_code`` and ``req.files_dir`` for a custom-code repo (see the module's
    docstring); NotSupported where it cannot run here. ``files``: the repo's file list;
    ``size_of(name)``: a file's size as the Hub says it (asked before anything is fetched);
    ``download(name)``: its local path in Zoo's Hub cache (``huggingface_hub``)."""
    gaps = sandbox_gaps()
    if gaps:
        raise _refuse(
            req,
            "needs remote code: ZOO_REMOTE_CODE=sandboxed runs it only under the full sandbox, and model "
            f"processes here would run without {gaps}",
        )
    if (req.library or "transformers") not in LIBRARIES:
        raise _refuse(req, f"custom code of a {req.library} repo: Zoo runs custom code only through transformers")
    refs = _auto_map_refs(req.config or {})
    if not refs:
        raise _refuse(req, "tagged custom_code, but its config.json has no auto_map naming its classes")
    if any("--" in ref for ref in refs):
        raise _refuse(
            req, f"its auto_map names code in another repo ({next(r for r in refs if '--' in r)}): not fetched"
        )
    names = code_files(files)
    missing = sorted({ref.rsplit(".", 1)[0].replace(".", "/") + ".py" for ref in refs} - set(names))
    if missing:
        raise _refuse(req, f"its auto_map names code the repo does not have: {', '.join(missing)}")
    if len(names) > MAX_FILES:
        raise _refuse(req, f"{len(names)} code files (at most {MAX_FILES})")
    total = 0
    for name in names:  # sizes first: nothing is fetched from a repo over the limit
        total += int(size_of(name) or 0)
        if total > MAX_BYTES:
            raise _refuse(req, f"over {MAX_BYTES >> 20} MiB of code files")
    hashes: dict[str, str] = {}
    paths: dict[str, str] = {}
    for name in names:
        paths[name] = download(name)
        with open(paths[name], "rb") as f:  # Zoo's Hub cache: read as bytes, never imported here
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            raise _refuse(req, f"{name} is over {MAX_BYTES >> 20} MiB")
        hashes[name] = hashlib.sha256(data).hexdigest()
    from transformers.dynamic_module_utils import get_imports  # parses the file (ast): never runs it

    try:
        imported = sorted({m for name in names for m in get_imports(paths[name])})
    except (SyntaxError, ValueError, RecursionError, UnicodeDecodeError) as exc:
        raise _refuse(req, f"its code does not parse ({type(exc).__name__}: {str(exc)[:200]})") from exc
    local = {posixpath.splitext(posixpath.basename(n))[0] for n in names}
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
    if req.tier == "full" and req.files_dir:
        return  # the weights' snapshot, where the code files were fetched too
    req.files_dir = str(_code_dir(hashes, paths, download("config.json")))


def _code_dir(hashes: dict[str, str], paths: dict[str, str], config: str) -> Path:
    """A directory of exactly the hashed code files and config.json, Zoo's and read-only, named
    by their hashes (``~/.cache/zoo/remote-code/<digest>``): the model process sees nothing else of
    the repo (no other revision, no earlier download) at tiers tiny and census."""
    from . import cache_trust
    from .sandbox import remote_code_dir

    with open(config, "rb") as f:
        config_bytes = f.read(1 << 20)
    digest = hashlib.sha256(
        json.dumps([sorted(hashes.items()), hashlib.sha256(config_bytes).hexdigest()]).encode()
    ).hexdigest()[:24]
    base = remote_code_dir()
    os.close(cache_trust.own_root(base, 0o755))  # Zoo's own, never a link
    target = base / digest
    if (target / "config.json").is_file():
        return target
    tmp = Path(tempfile.mkdtemp(prefix=".build-", dir=base))
    try:
        for name, path in [*paths.items(), ("config.json", config)]:
            dest = tmp / name
            dest.parent.mkdir(parents=True, exist_ok=True, mode=0o755)
            shutil.copyfile(path, dest)
            os.chmod(dest, 0o444)
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, target)
        except OSError:  # another process made it meanwhile: the same bytes
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def fingerprint(req: Any) -> str:
    """What a custom-code model is, from what the parent read itself: the config, the code's
    hashes, the task, the small JSON files a builder reads (pooling), the tier and the input
    shapes (the model process records the same)."""
    from . import inputs
    from .fingerprint import fingerprint as fp

    config = dict(req.config or {})
    arch = ",".join(config.get("architectures") or []) or str(config.get("model_type"))
    graph = {
        "config": config,
        "code": dict(sorted((req.remote_code or {}).items())),
        "task": req.task,  # picks the auto_map class
        "extras": req.extras or {},  # a sentence-transformers repo's pooling and modules
    }
    return fp(
        req.library or "transformers", f"remote:{arch}", graph, req.tier, [dict(s) for s in inputs.DEFAULT_SHAPES]
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
