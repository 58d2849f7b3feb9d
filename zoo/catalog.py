"""Catalog sources: the Hub (through huggingface_hub), a snapshot CSV, or the builtin arch: list."""
from __future__ import annotations

import ast
import csv
import json
import logging
import os
from importlib import resources
from typing import Iterator

from db.repository import CatalogEntry
from zoo_runner.exceptions import CatalogError, HubUnreachable
from zoo_runner.hub import hub_endpoint, library_from_tags

log = logging.getLogger(__name__)
REQUIRED_COLUMNS = ("model_id", "downloads")
HUB_FIELDS = ["downloads", "pipeline_tag", "library_name", "tags", "gated", "sha", "config", "safetensors"]


def _model_type(tags: list[str]) -> str | None:
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING  # a real module: no lazy-import race with other threads

    for t in tags:
        if t in CONFIG_MAPPING:
            return t
    return None


def _parse_tags(raw: str, where: str) -> list[str]:
    raw = (raw or "").strip()
    if not raw:
        return []
    if raw[0] == "[" and '"' not in raw and "\\" not in raw:
        # the common case, a list of plain strings in single quotes: JSON once the quotes are
        # swapped (no string holds a quote or an escape), 10x cheaper than literal_eval
        try:
            return [str(t) for t in json.loads(raw.replace("'", '"'))]
        except ValueError:
            pass
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError) as exc:
        raise CatalogError(f"{where}: tags is not a list literal: {raw[:60]!r}") from exc
    if not isinstance(value, (list, tuple)):
        raise CatalogError(f"{where}: tags is not a list: {raw[:60]!r}")
    return [str(t) for t in value]


def from_file(path: str) -> Iterator[CatalogEntry]:
    """Entries of a snapshot CSV with the shared file's columns; bad rows stop with the line number."""
    if not os.path.isfile(path):
        raise CatalogError(f"catalog file {path} does not exist")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        cols = reader.fieldnames or []
        missing = [c for c in REQUIRED_COLUMNS if c not in cols]
        if missing:
            raise CatalogError(f"{path}: not a catalog CSV: missing column(s) {', '.join(missing)} (have: {', '.join(cols[:8]) or 'none'})")
        for line, row in enumerate(reader, start=2):
            where = f"{path}:{line}"
            model_id = (row.get("model_id") or "").strip()
            if not model_id or None in row:
                raise CatalogError(f"{where}: malformed row (empty model_id or extra fields)")
            try:
                downloads = int(float(row.get("downloads") or 0))
            except ValueError as exc:
                raise CatalogError(f"{where}: downloads {row.get('downloads')!r} is not a number") from exc
            tags = _parse_tags(row.get("tags", ""), where)
            params = row.get("parameters") or ""
            try:
                parameters = int(float(params)) if params else None
            except ValueError:
                parameters = None
            yield CatalogEntry(
                model_id=model_id,
                downloads=downloads,
                library=library_from_tags(tags) if not model_id.startswith("arch:") else "transformers",
                model_type=row.get("model_type") or _model_type(tags),
                task=(row.get("tasks") or row.get("task") or None),
                tags=tags,
                custom_code="custom_code" in tags,
                gated=False,
                parameters=parameters,
            )


def builtin() -> Iterator[CatalogEntry]:
    """The builtin catalog: transformers architectures built from their default config, weighted
    by the March 2025 downloads of the Hub models of that model type (shared snapshot)."""
    from zoo_runner.builders.transformers_builder import task_for

    text = resources.files("zoo_runner").joinpath("data/builtin_catalog.csv").read_text()
    for row in csv.DictReader(text.splitlines()):
        arch = row["model_id"][5:]
        yield CatalogEntry(model_id=row["model_id"], downloads=int(row["downloads"]), library="transformers", model_type=row["model_type"], task=task_for(arch), tags=["transformers", row["model_type"]])


def from_hub(top: int | None) -> Iterator[CatalogEntry]:
    """The Hub's most-downloaded models, streamed page by page through ``HfApi.list_models``."""
    from huggingface_hub import HfApi

    try:
        models = HfApi().list_models(sort="downloads", limit=top, expand=HUB_FIELDS)
        for info in models:
            tags = list(info.tags or [])
            cfg = info.config or {}
            yield CatalogEntry(
                model_id=info.id,
                downloads=int(info.downloads or 0),
                library=library_from_tags(tags, info.library_name),
                model_type=cfg.get("model_type") or (_model_type(tags) if "transformers" in tags else None),
                task=info.pipeline_tag,
                tags=tags,
                custom_code="custom_code" in tags,
                gated=bool(info.gated),
                sha=info.sha,
                parameters=(info.safetensors.total if info.safetensors else None),
            )
    except CatalogError:
        raise
    except Exception as exc:
        if "offline" in str(exc).lower():
            raise HubUnreachable("the Hub is offline here (HF_HUB_OFFLINE); use --from-file or the builtin arch: catalog") from exc
        raise HubUnreachable(f"the Hub at {hub_endpoint()} is unreachable: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from exc


def hub_reachable(timeout: float = 5.0) -> bool:
    """A cheap probe: offline mode, or an endpoint that does not answer, means no."""
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    import httpx

    try:
        r = httpx.get(f"{hub_endpoint().rstrip('/')}/api/models", params={"limit": 1}, timeout=timeout)
        return r.status_code < 500
    except httpx.HTTPError:
        return False
