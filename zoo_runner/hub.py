"""Everything the parent does on the Hub before a model process starts.

Policy is decided here, from metadata alone: no remote code is imported and nothing is
unpickled. The model process later runs offline on the files fetched here.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from .exceptions import HubUnreachable, NotSupported, UnknownModel, UntrustedFile
from .request import ValidationRequest
from .statuses import Reason
from .untrusted import load_json, load_mapping

log = logging.getLogger(__name__)

WEIGHT_FORMATS = {
    ".safetensors": "safetensors",
    ".bin": "pickle",
    ".pt": "pickle",
    ".pth": "pickle",
    ".ckpt": "pickle",
    ".gguf": "gguf",
    ".onnx": "onnx",
    ".npz": "mlx",
}
LIBRARY_TAGS = (
    "sentence-transformers",
    "timm",
    "diffusers",
    "open_clip",
    "pyannote-audio",
    "ultralytics",
    "transformers",
)


@dataclass
class HubFacts:
    model_id: str
    sha: str | None
    library: str | None
    task: str | None
    tags: list[str]
    gated: bool
    files: list[str]


def library_from_tags(tags: list[str], library_name: str | None = None) -> str | None:
    for lib in LIBRARY_TAGS:
        if lib in tags:
            return lib
    return library_name


def _hub_errors():
    from huggingface_hub import errors

    return errors


def model_facts(model_id: str, revision: str | None = None) -> HubFacts:
    from huggingface_hub import HfApi

    errors = _hub_errors()
    try:
        info = HfApi().model_info(model_id, revision=revision, files_metadata=False)
    except errors.RepositoryNotFoundError as exc:
        raise UnknownModel(f"unknown model {model_id!r}: not found on {hub_endpoint()}") from exc
    except errors.RevisionNotFoundError as exc:
        raise UnknownModel(f"unknown revision {revision!r} of {model_id!r}") from exc
    except errors.GatedRepoError as exc:
        raise NotSupported(Reason.GATED, f"{model_id} is gated") from exc
    except errors.OfflineModeIsEnabled as exc:  # type: ignore[attr-defined]
        raise HubUnreachable(f"{model_id}: HF_HUB_OFFLINE is set and the model is not a builtin arch: id") from exc
    except errors.HfHubHTTPError as exc:
        raise HubUnreachable(
            f"the Hub at {hub_endpoint()} answered {exc.__class__.__name__}: {str(exc).splitlines()[0]}"
        ) from exc
    except Exception as exc:  # connection refused, DNS, timeouts
        if "offline" in str(exc).lower():
            raise HubUnreachable(
                f"{model_id}: the Hub is offline here (HF_HUB_OFFLINE) and the model is not a builtin arch: id"
            ) from exc
        raise HubUnreachable(
            f"the Hub at {hub_endpoint()} is unreachable: {exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}"
        ) from exc
    tags = list(info.tags or [])
    return HubFacts(
        model_id=model_id,
        sha=info.sha,
        library=library_from_tags(tags, info.library_name),
        task=info.pipeline_tag,
        tags=tags,
        gated=bool(info.gated),
        files=[s.rfilename for s in (info.siblings or [])],
    )


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "https://huggingface.co")


def weight_formats(files: list[str]) -> set[str]:
    out = set()
    for f in files:
        for ext, kind in WEIGHT_FORMATS.items():
            if f.endswith(ext):
                out.add(kind)
    return out


def remote_code_refused(model_id: str) -> NotSupported:
    return NotSupported(
        Reason.REMOTE_CODE,
        f"{model_id} needs remote code (custom_code); Zoo runs it only under "
        "ZOO_REMOTE_CODE=sandboxed (--remote-code sandboxed)",
    )


def check_policy(facts: HubFacts, tier: str, allow_remote_code: bool = False) -> None:
    """Raise NotSupported with the SPEC's reason code, from metadata alone."""
    if "custom_code" in facts.tags and not allow_remote_code:
        raise remote_code_refused(facts.model_id)
    if facts.gated:
        raise NotSupported(Reason.GATED, f"{facts.model_id} is gated")
    formats = weight_formats(facts.files)
    if "safetensors" not in formats:
        if "pickle" in formats and tier == "full":
            raise NotSupported(
                Reason.PICKLE_ONLY, f"{facts.model_id} has only pickle weights (.bin/.pt); Zoo loads safetensors only"
            )
        if "gguf" in formats and "pickle" not in formats:
            return  # tiny and census build from the GGUF file's header, full dequantises it (zoo_runner/gguf_header.py)
        if formats and formats <= {"gguf", "onnx", "mlx"}:
            raise NotSupported(
                Reason.NO_PYTORCH_WEIGHTS,
                f"{facts.model_id} has no PyTorch weights ({', '.join(sorted(formats))} only)",
            )
    if "config.json" not in facts.files and facts.library == "transformers":
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{facts.model_id} has no config.json")
    if not {"config.json", "config.yaml"} & set(facts.files) and facts.library is None:
        # a repo naming no library may say whose it is in its config.yaml (Vocos)
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{facts.model_id} has no config.json")


def load_config(path: str) -> dict[str, Any]:
    """A repo's config file: JSON, or YAML (pyannote) read with the safe loader (no objects), both
    within size and depth limits (:mod:`zoo_runner.untrusted`); a bad one is ``UntrustedFile``."""
    return load_mapping(path)


def fetch_config(model_id: str, revision: str | None, filename: str = "config.json") -> dict[str, Any]:
    from huggingface_hub import hf_hub_download

    return load_config(hf_hub_download(model_id, filename, revision=revision))


EXTRA_JSON = ("modules.json", "1_Pooling/config.json", "config_sentence_transformers.json")


def fetch_extras(
    model_id: str,
    revision: str | None,
    files: list[str],
    files_dir: str | None,
    wanted: tuple[str, ...] | list[str] = EXTRA_JSON,
) -> dict[str, Any]:
    """Small JSON files some builders read (sentence-transformers pooling, diffusers components), from the repo."""
    from huggingface_hub import hf_hub_download

    out: dict[str, Any] = {}
    for name in wanted:
        if name not in files:
            continue
        path = os.path.join(files_dir, name) if files_dir else hf_hub_download(model_id, name, revision=revision)
        try:
            out[name] = load_json(path, name=name)  # over the limits, or not JSON: UntrustedFile, the model's row
        except OSError:
            continue
    return out


def fetch_files(model_id: str, revision: str | None, patterns: list[str], max_bytes: int | None = None) -> str:
    """The repo's files matching ``patterns`` (never code), downloaded; with ``max_bytes``, sized first
    from the repo's listing and refused (``too_large``) when together they are larger."""
    from huggingface_hub import snapshot_download

    if max_bytes is not None:
        total = listed_bytes(model_id, revision, patterns)
        if total > max_bytes:
            raise NotSupported(
                Reason.TOO_LARGE,
                f"{model_id}: the files the full tier reads are {total / (1 << 30):.2f} GiB, over the "
                f"{max_bytes / (1 << 30):.2f} GiB memory budget: not downloaded",
            )

    # never a code file (a tokenizer*.py the patterns match): custom code is fetched, hashed and
    # handed over only by zoo_runner.remote_code, and nothing else in a snapshot may be Python
    return snapshot_download(model_id, revision=revision, allow_patterns=patterns, ignore_patterns=["*.py"])


def listed_bytes(model_id: str, revision: str | None, patterns: list[str]) -> int:
    """Bytes of the repo's files matching ``patterns`` (code files left out), by the Hub's own listing."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import filter_repo_objects

    entries = [e for e in HfApi().list_repo_tree(model_id, revision=revision, recursive=True) if hasattr(e, "size")]
    sizes = {e.path: int(e.size or 0) for e in entries if not getattr(e, "tree_id", None)}
    names = filter_repo_objects(list(sizes), allow_patterns=patterns, ignore_patterns=["*.py"])
    return sum(sizes[n] for n in names)


FULL_TIER_PATTERNS = [
    "*.json",
    "*.safetensors",
    "*.txt",
    "*.model",
    "tokenizer*",
    "sentencepiece*",
    "modules.json",
    "1_Pooling/*",
    "2_Normalize/*",
]


# ``req.extras[OTHER_REPO_COMMITS]``: {"<repo>/<file>": the commit it was fetched at} for each file of another repo
OTHER_REPO_COMMITS = "other_repo_commits"


def _snapshot_commit(path: str, name: str) -> str | None:
    """The commit of a file ``hf_hub_download`` fetched: its cache path is ``.../snapshots/<commit>/<name>``."""
    commit = os.path.basename(path[: -len(name)].rstrip("/")) if path.endswith(name) else ""
    return commit if re.fullmatch(r"[0-9a-f]{40}", commit) else None


def _other_repo_config(
    repo: str, revision: str | None, name: str, errors: Any
) -> tuple[dict[str, Any] | None, str | None]:
    """A config file of another repo a plan reads (a pipeline's models, a transformers text tower)
    and the commit it was fetched at; None where it has none (the builder then says which model is
    missing)."""
    from huggingface_hub import hf_hub_download

    try:
        path = hf_hub_download(repo, name, revision=revision)
        return load_config(path), _snapshot_commit(path, name)
    except (
        errors.EntryNotFoundError,
        errors.RepositoryNotFoundError,
        errors.RevisionNotFoundError,
        errors.GatedRepoError,
    ):
        return None, None
    except UntrustedFile as exc:  # the model's row says which repo's file was refused
        raise UntrustedFile(f"{repo}/{name}", exc.problem, exc.reason) from None


def _library_from_config(
    req: ValidationRequest, errors: Any, filename: str = "config.json"
) -> tuple[str | None, dict[str, Any] | None]:
    """The library whose builder recognises the repo's config.json (or config.yaml), and that config
    (fetched once)."""
    from .builders import library_for_config

    try:
        config = fetch_config(req.model_id, req.revision, filename)
    except (errors.EntryNotFoundError, FileNotFoundError):
        return None, None
    except (OSError, errors.HfHubHTTPError) as exc:
        raise HubUnreachable(
            f"could not fetch {filename} of {req.model_id} from {hub_endpoint()}: {exc.__class__.__name__}"
        ) from exc
    return library_for_config(config, filename), config


GGUF_TAIL_SLACK = 1 << 20  # bytes a GGUF file may hold past its last tensor (alignment padding, a trailer)
GGUF_FULL_ROOM = 3  # a dequantised GGUF model in float32, times this, must fit the memory budget (load, copy, run)


def _gguf_only(facts: HubFacts, tier: str) -> bool:
    """A repo whose only PyTorch-loadable description is a GGUF file (no safetensors, no pickle, no config.json)."""
    formats = weight_formats(facts.files)
    return "gguf" in formats and not formats & {"safetensors", "pickle"} and ("config.json" not in facts.files)


def _prepare_gguf(req: ValidationRequest, facts: HubFacts, errors: Any) -> ValidationRequest:
    """Tiers tiny and census of a GGUF repo: the config transformers maps from one file's header."""
    from .gguf_header import pick_file, read_header

    name = pick_file(facts.files)
    assert name is not None  # _gguf_only saw one
    try:
        header = read_header(req.model_id, req.revision, name)
    except (OSError, errors.HfHubHTTPError) as exc:
        raise HubUnreachable(
            f"could not read the GGUF header of {req.model_id}/{name} from {hub_endpoint()}: {exc.__class__.__name__}"
        ) from exc
    req.library = "transformers"
    req.task = req.task or "text-generation"
    req.config = header.config
    req.extras = {}
    read = f"header: {header.bytes_read:,} of {header.size:,} bytes"
    req.config_source = f"gguf:{req.model_id}/{name}@{(req.revision or '')[:12]} ({read})"
    if req.tier == "full":  # transformers dequantises the whole file to float32, in the model process
        need = header.elements * 4
        budget = int(req.memory_gb * (1 << 30))
        if not need or need * GGUF_FULL_ROOM > budget:
            raise NotSupported(
                Reason.TOO_LARGE,
                f"{req.model_id}/{name} dequantised to float32 is {need / (1 << 30):.1f} GiB "
                f"({header.elements:,} weights; {GGUF_FULL_ROOM}x that is room to load and run it), over the "
                f"{req.memory_gb:g} GiB memory budget"
                if need
                else f"{req.model_id}/{name}: its tensors' sizes could not be read from the header",
            )
        if not header.data_end or header.size > header.data_end + GGUF_TAIL_SLACK:
            raise NotSupported(
                Reason.TOO_LARGE,
                f"{req.model_id}/{name} is {header.size:,} bytes, but its header declares tensors ending at byte "
                f"{header.data_end:,}: the rest is not what the header says, and is not downloaded",
            )
        from huggingface_hub import hf_hub_download

        try:
            path = hf_hub_download(req.model_id, name, revision=req.revision)
        except (OSError, errors.HfHubHTTPError) as exc:
            raise HubUnreachable(f"could not fetch {req.model_id}/{name}: {exc.__class__.__name__}") from exc
        req.files_dir = path[: -len(name)].rstrip("/")  # the snapshot's root: its links into the blobs hold
        req.extras = {"gguf_file": name}
    return req


def prepare(req: ValidationRequest) -> ValidationRequest:
    """Fill ``req`` with what the model process needs (config, files, library, task)."""
    req.remote_code = None  # only what this parent fetches and hashes below, never a request's claim
    req.custom_code_native = None  # likewise: only this parent's finding below
    if req.model_id.startswith("arch:"):
        from .builders.transformers_builder import resolve_class, task_for

        cls = resolve_class(req.model_id[5:])
        req.library = req.library or "transformers"
        req.task = req.task or task_for(cls.__name__)
        req.config_source = f"default:{cls.config_class.model_type}"
        if req.tier == "full":
            raise NotSupported(
                Reason.NO_PYTORCH_WEIGHTS,
                f"{req.model_id} is a builtin architecture: it has no real weights for the full tier",
            )
        return req
    if "/" not in req.model_id and ":" in req.model_id:
        raise UnknownModel(f"unknown model id {req.model_id!r}: expected org/name or arch:ClassName")
    facts = model_facts(req.model_id, req.revision)
    req.revision = req.revision or facts.sha
    declared = req.library or facts.library
    req.library = declared or "transformers"
    req.task = req.task or facts.task
    from . import remote_code
    from .builders import LIBRARIES_WITHOUT_BUILDER, get_builder, registered_libraries

    if declared in LIBRARIES_WITHOUT_BUILDER:
        # its reason (not PyTorch, or what blocks a builder) before its files' formats (a CTranslate2
        # model.bin is no pickle) or a config.json copied from the original say otherwise
        get_builder(declared)
    custom = "custom_code" in facts.tags and remote_code.enabled()
    errors = _hub_errors()
    if "custom_code" in facts.tags and not custom:
        # Under ZOO_REMOTE_CODE=never a transformers (or sentence-transformers) repo of an architecture
        # transformers ported from such repos runs on transformers' own classes
        # (remote_code.native_classes), its config.json read as data; any other is refused first,
        # before what else its metadata says.
        if (
            declared in (None, *remote_code.LIBRARIES)
            and not _gguf_only(facts, req.tier)
            and "config.json" in facts.files
        ):
            req.custom_code_native = _native_classes(req, facts)
        if not req.custom_code_native:
            raise remote_code_refused(req.model_id)
    check_policy(facts, req.tier, allow_remote_code=custom or bool(req.custom_code_native))
    if _gguf_only(facts, req.tier):
        if custom:
            raise NotSupported(Reason.REMOTE_CODE, f"{req.model_id}: custom code of a GGUF-only repo is never run")
        return _prepare_gguf(req, facts, errors)

    sniffed_config, sniffed_file = None, "config.json"
    if declared is None or req.library not in registered_libraries():
        # The Hub names no library Zoo builds (or none): the repo's config.json says whose it is, or
        # where it has none, its config.yaml (Vocos)
        sniffed_file = next((f for f in ("config.json", "config.yaml") if f in facts.files), None)
        if sniffed_file:
            sniffed, sniffed_config = _library_from_config(req, errors, sniffed_file)
            req.library = sniffed or req.library
            if sniffed is None and sniffed_file == "config.yaml" and declared is None:  # no builder claims it
                raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{req.model_id} has no config.json")
    builder = get_builder(req.library)  # library_unsupported, naming the library or the missing extra
    if hasattr(builder, "config_from_files"):  # no config file: what the repo's file listing says (ultralytics)
        req.config = builder.config_from_files(req.model_id, facts.files)
        req.config_source = f"file name: {req.model_id}/{req.config.get('checkpoint')}@{(req.revision or '')[:12]}"
        return req
    # the first config file the repo has, of those the builder reads (diffusers: model_index.json,
    # else a single component's config.json)
    candidates = getattr(builder, "config_files", ("config.json",))
    config_file = next((f for f in candidates if f in facts.files), candidates[0])
    try:
        if req.tier == "full":
            budget = int(req.memory_gb * (1 << 30))  # the weights are loaded at least once: never more to fetch
            req.files_dir = fetch_files(req.model_id, req.revision, FULL_TIER_PATTERNS, max_bytes=budget)
            req.config = load_config(os.path.join(req.files_dir, config_file))
        elif sniffed_config is not None and config_file == sniffed_file:
            req.config = sniffed_config
        else:
            req.config = fetch_config(req.model_id, req.revision, config_file)
        wanted = list(EXTRA_JSON) + (list(builder.extra_files(req.config)) if hasattr(builder, "extra_files") else [])
        req.extras = fetch_extras(req.model_id, req.revision, facts.files, req.files_dir, wanted)
        for repo, revision, name in (
            builder.extra_repo_files(req.config) if hasattr(builder, "extra_repo_files") else []
        ):
            req.extras[f"{repo}/{name}"], commit = _other_repo_config(repo, revision, name, errors)
            if commit:
                req.extras.setdefault(OTHER_REPO_COMMITS, {})[f"{repo}/{name}"] = commit
    except (errors.EntryNotFoundError, FileNotFoundError) as exc:
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{req.model_id} has no {config_file}") from exc
    except ValueError as exc:  # JSON or YAML that does not parse to a mapping
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED, f"{req.model_id}: {config_file} is not a valid config ({exc})"
        ) from exc
    except (OSError, errors.HfHubHTTPError) as exc:
        raise HubUnreachable(
            f"could not fetch files of {req.model_id} from {hub_endpoint()}: {exc.__class__.__name__}"
        ) from exc
    req.config_source = f"hub:{req.model_id}@{(req.revision or '')[:12]}"
    if custom:  # the repo's code files, sized, fetched and hashed, never imported here
        _prepare_remote_code(req, facts, errors)
    elif req.custom_code_native and (
        req.library not in remote_code.LIBRARIES
        or not remote_code.native_classes(req.config or {})
        or not remote_code.standard_st_modules((req.extras or {}).get("modules.json", []))
    ):
        raise remote_code_refused(req.model_id)  # the files it is built from must say the same (a moving revision)
    return req


def _native_classes(req: ValidationRequest, facts: HubFacts) -> str | None:
    """remote_code.native_classes of the repo's config.json (read as data), where its modules.json
    (sentence-transformers) names only sentence-transformers' own modules; None where they cannot be
    read, whatever the cause: such a custom-code repo is refused as any other."""
    from . import remote_code

    try:
        if "modules.json" in facts.files:
            modules = fetch_extras(req.model_id, req.revision, facts.files, None, ["modules.json"])["modules.json"]
            if not remote_code.standard_st_modules(modules):
                return None
        return remote_code.native_classes(fetch_config(req.model_id, req.revision, "config.json"))
    except Exception:  # noqa: BLE001  (a file missing or too large, JSON that does not parse, the network)
        return None


def _prepare_remote_code(req: ValidationRequest, facts: HubFacts, errors: Any) -> None:
    from huggingface_hub import get_hf_file_metadata, hf_hub_download, hf_hub_url

    from . import remote_code

    try:
        remote_code.prepare(
            req,
            facts.files,
            download=lambda name: hf_hub_download(req.model_id, name, revision=req.revision),
            size_of=lambda name: get_hf_file_metadata(hf_hub_url(req.model_id, name, revision=req.revision)).size,
        )
    except errors.EntryNotFoundError as exc:
        raise NotSupported(
            Reason.REMOTE_CODE, f"{req.model_id}: a code file it lists is not served ({str(exc).splitlines()[0]})"
        ) from exc
    except (OSError, errors.HfHubHTTPError) as exc:
        raise HubUnreachable(
            f"could not fetch the code files of {req.model_id} from {hub_endpoint()}: {exc.__class__.__name__}"
        ) from exc
