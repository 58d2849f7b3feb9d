"""The builder interface and its registry."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from ..exceptions import NotSupported


@dataclass
class Built:
    model: torch.nn.Module
    config: Any
    config_dict: dict[str, Any]
    library: str
    architecture: str
    task: str | None
    config_source: str
    make_inputs: Callable[[dict, int], dict[str, torch.Tensor]]
    shapes: list[dict] = field(default_factory=list)
    tolerance_factor: float = 1.0


@dataclass
class ConfigPlan:
    """What will be built, for builders whose graph is an architecture name and a config dict."""

    architecture: str
    config: dict[str, Any]
    config_source: str
    shapes: list[dict] = field(default_factory=list)

    def fingerprint(self, library: str, tier: str) -> str:
        from ..fingerprint import fingerprint

        return fingerprint(library, self.architecture, self.config, tier, self.shapes)


class Builder(Protocol):
    library: str

    def plan(self, request: Any) -> Any: ...

    def build(self, request: Any, plan: Any = None) -> Built: ...


_REGISTRY: dict[str, str] = {
    "transformers": "zoo_runner.builders.transformers_builder:TransformersBuilder",
    "sentence-transformers": "zoo_runner.builders.sentence_transformers_builder:SentenceTransformersBuilder",
    # extras: their packages are imported in the model process only
    "timm": "zoo_runner.builders.timm_builder:TimmBuilder",
    "diffusers": "zoo_runner.builders.diffusers_builder:DiffusersBuilder",
    "chronos-forecasting": "zoo_runner.builders.chronos_builder:ChronosBuilder",
    "open_clip": "zoo_runner.builders.open_clip_builder:OpenClipBuilder",
    "pyannote-audio": "zoo_runner.builders.pyannote_builder:PyannoteBuilder",
}
# For repos whose Hub metadata names no library Zoo has a builder for: which library a
# ``config.json`` belongs to, asked in this order ("module:function" taking the config dict).
_CONFIG_CLAIMS: list[tuple[str, str]] = [
    ("chronos-forecasting", "zoo_runner.builders.chronos_builder:claims"),
    ("transformers", "zoo_runner.builders.base:_transformers_claims"),
]
_INSTANCES: dict[str, Builder] = {}


def register_builder(library: str, target: str | Builder) -> None:
    """Register a builder (an instance, or ``"module:Class"`` imported on first use)."""
    if isinstance(target, str):
        _REGISTRY[library] = target
        _INSTANCES.pop(library, None)
    else:
        _INSTANCES[library] = target


def registered_libraries() -> list[str]:
    return sorted(set(_REGISTRY) | set(_INSTANCES))


def _transformers_claims(config: dict[str, Any]) -> bool:
    """A config.json whose ``model_type`` transformers knows."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # a plain dict: no lazy import

    return isinstance(config.get("model_type"), str) and config["model_type"] in CONFIG_MAPPING_NAMES


def library_for_config(config: dict[str, Any]) -> str | None:
    """The library whose builder recognises ``config`` (a repo's config.json), or None."""
    for library, target in _CONFIG_CLAIMS:
        module, _, fn = target.partition(":")
        if getattr(importlib.import_module(module), fn)(config):
            return library
    return None


def get_builder(library: str) -> Builder:
    if library in _INSTANCES:
        return _INSTANCES[library]
    target = _REGISTRY.get(library)
    if target is None:
        raise NotSupported(
            "library_unsupported", f"no builder for library {library!r} (have: {', '.join(registered_libraries())})"
        )
    module, _, cls = target.partition(":")
    try:
        builder = getattr(importlib.import_module(module), cls)()
    except ImportError as exc:
        raise NotSupported(
            "library_unsupported", f"library {library!r} needs an extra that is not installed: {exc}"
        ) from exc
    _INSTANCES[library] = builder
    return builder
