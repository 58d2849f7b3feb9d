"""The builder interface and its registry.

A *builder* turns a request for one model of one library into a ``torch.nn.Module`` and the inputs
to run it on (:class:`Built`). Builders are registered by library name (the Hub's ``library_name``:
``transformers``, ``timm``, ``chronos-forecasting``, ...) in ``_REGISTRY`` as ``"module:Class"``
strings, so a library's package is imported only when a model of it is built, in the model
process. :func:`get_builder` returns the (cached) instance; :func:`register_builder` adds or
replaces one at run time (a plugin, a test). CONTRIBUTING.md walks through adding one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from ..exceptions import NotSupported
from ..statuses import Reason


@dataclass
class Built:
    """What a builder hands the engine: the model, how to make its inputs, and what it is.

    - ``model``: the module in eval mode, with seeded weights (tiny/census) or the repo's (full).
    - ``library``, ``architecture``, ``task``: the result's fields of the same names.
    - ``config_source``: where the config came from (``hub:<repo>@<rev>``, ``default:<type>``).
    - ``make_inputs(shape, seed)``: one forward's keyword inputs for one entry of ``shapes``;
      the engine calls it with ``req.seed + i`` for the i-th shape, so inputs are reproducible.
    - ``shapes``: the input shapes to run, one forward each (chronos: two lengths, one not a
      multiple of the patch size).
    - ``tolerance_factor``: multiplies the comparison's error budget (1.0 unless a quirk row
      says the architecture's outputs are legitimately noisy).
    - ``details``: facts about how it was built that go into the row's details (``timm_shrink``:
      whether a timm model or tower was shrunk, with which overrides, or built whole and why).
    """

    model: torch.nn.Module
    library: str
    architecture: str
    task: str | None
    config_source: str
    make_inputs: Callable[[dict, int], dict[str, torch.Tensor]]
    shapes: list[dict] = field(default_factory=list)
    tolerance_factor: float = 1.0
    details: dict[str, Any] = field(default_factory=dict)


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
    """The interface of a builder; a class with these members, no base class needed.

    ``library`` is the name it is registered under. ``plan(request)`` decides what will be built
    without building it (cheap: no weights) and returns an object with
    ``fingerprint(library, tier)``, a :class:`ConfigPlan` for most builders; it raises
    :class:`~zoo_runner.exceptions.NotSupported` for a model the builder will not run.
    ``build(request, plan=None)`` builds the model from that plan (planning again if none is
    given) and returns :class:`Built`. ``task(request, plan)`` is the row's task (``build`` uses it
    too). ``plan`` and ``task`` also run in the parent, which takes a row's fingerprint, library,
    architecture (the plan's ``architecture``), task and known failure from them, never from the
    model process; ``build`` runs in the model process only. ``request`` is a
    :class:`~zoo_runner.request.ValidationRequest` with its ``config``, ``files_dir`` and
    ``config_source`` already filled by the parent.
    """

    library: str

    def plan(self, request: Any) -> Any: ...

    def task(self, request: Any, plan: Any) -> str | None: ...

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
    "ultralytics": "zoo_runner.builders.ultralytics_builder:UltralyticsBuilder",
    "speechbrain": "zoo_runner.builders.speechbrain_builder:SpeechBrainBuilder",
    "vocos": "zoo_runner.builders.vocos_builder:VocosBuilder",
}
# Libraries the Hub names that Zoo has no builder for, and why (data, not a branch per library): a
# format that is not a PyTorch module is ``no_pytorch_weights`` (no torch.compile backend can run it);
# a library that cannot share Zoo's venv is ``library_unsupported``, saying what blocks it. Any other
# library without a builder is ``library_unsupported`` with the list of those Zoo has.
LIBRARIES_WITHOUT_BUILDER: dict[str, tuple[Reason, str]] = {
    "ctranslate2": (Reason.NO_PYTORCH_WEIGHTS, "CTranslate2 models are converted for CTranslate2's own C++ runtime"),
    "mlc-llm": (Reason.NO_PYTORCH_WEIGHTS, "MLC LLM weights are converted for MLC's compiled TVM runtime"),
    "whisperkit": (Reason.NO_PYTORCH_WEIGHTS, "WhisperKit models are Core ML packages for Apple devices"),
    "transformers.js": (Reason.NO_PYTORCH_WEIGHTS, "transformers.js models are ONNX files for its JavaScript runtime"),
    "keras": (Reason.NO_PYTORCH_WEIGHTS, "Keras weights that only Keras loads; Zoo builds torch modules"),
    "fasttext": (Reason.NO_PYTORCH_WEIGHTS, "fastText models are its own binary format for its C++ runtime"),
    "flair": (
        Reason.LIBRARY_UNSUPPORTED,
        "flair's releases need transformers 4 (uv resolves transformers 4.57.6 for flair beside Zoo's), and Zoo"
        " runs transformers 5: no builder until flair supports it",
    ),
    "granite-tsfm": (
        Reason.LIBRARY_UNSUPPORTED,
        "granite-tsfm's releases pin an older torch and transformers 4 (uv resolves torch 2.11.0 for it"
        " beside Zoo's 2.14.1): no builder until it can share Zoo's venv",
    ),
}
# For repos whose Hub metadata names no library Zoo has a builder for: which library a
# ``config.json`` belongs to, asked in this order ("module:function" taking the config dict).
_CONFIG_CLAIMS: list[tuple[str, str]] = [
    ("chronos-forecasting", "zoo_runner.builders.chronos_builder:claims"),
    ("transformers", "zoo_runner.builders.base:_transformers_claims"),
]
# the same for a repo without config.json, from its ``config.yaml`` (Vocos's ``from_hparams`` file)
_YAML_CONFIG_CLAIMS: list[tuple[str, str]] = [
    ("vocos", "zoo_runner.builders.vocos_builder:claims"),
]
_INSTANCES: dict[str, Builder] = {}


def register_builder(library: str, target: str | Builder) -> None:
    """Register the builder of ``library``: an instance, or ``"module:Class"`` imported (and
    instantiated once) on first use by :func:`get_builder`. A later registration replaces an
    earlier one; a string drops a cached instance of that library."""
    if isinstance(target, str):
        _REGISTRY[library] = target
        _INSTANCES.pop(library, None)
    else:
        _INSTANCES[library] = target


def registered_libraries() -> list[str]:
    """The libraries that have a builder, sorted (what a ``library_unsupported`` error lists)."""
    return sorted(set(_REGISTRY) | set(_INSTANCES))


def _transformers_claims(config: dict[str, Any]) -> bool:
    """A config.json whose ``model_type`` transformers knows."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES  # a plain dict: no lazy import

    return isinstance(config.get("model_type"), str) and config["model_type"] in CONFIG_MAPPING_NAMES


def library_for_config(config: dict[str, Any], filename: str = "config.json") -> str | None:
    """The library whose builder recognises ``config`` (a repo's config.json, or its config.yaml), or None."""
    for library, target in _YAML_CONFIG_CLAIMS if filename == "config.yaml" else _CONFIG_CLAIMS:
        module, _, fn = target.partition(":")
        if getattr(importlib.import_module(module), fn)(config):
            return library
    return None


def get_builder(library: str) -> Builder:
    """The builder of ``library``, imported and instantiated on first use and cached after.

    Raises :class:`~zoo_runner.exceptions.NotSupported` (reason ``library_unsupported``) when no
    builder is registered for it, or when its module cannot be imported (its extra is not
    installed); the engine records either as an ``unsupported`` result, not an error.
    """
    if library in _INSTANCES:
        return _INSTANCES[library]
    target = _REGISTRY.get(library)
    if target is None and library in LIBRARIES_WITHOUT_BUILDER:
        reason, why = LIBRARIES_WITHOUT_BUILDER[library]
        what = "not PyTorch" if reason == Reason.NO_PYTORCH_WEIGHTS else "no builder"
        raise NotSupported(reason, f"library {library!r}: {what}: {why}")
    if target is None:
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED,
            f"no builder for library {library!r} (have: {', '.join(registered_libraries())})",
        )
    module, _, cls = target.partition(":")
    try:
        builder = getattr(importlib.import_module(module), cls)()
    except ImportError as exc:
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED, f"library {library!r} needs an extra that is not installed: {exc}"
        ) from exc
    _INSTANCES[library] = builder
    return builder
