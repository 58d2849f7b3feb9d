"""Vocos vocoders (the ``vocos`` extra): mel or EnCodec features to a waveform.

A Vocos repo (``charactr/vocos-mel-24khz``) names no library on the Hub; its ``config.yaml`` says
what it is: three blocks, ``feature_extractor``, ``backbone`` and ``head``, each a ``class_path``
under ``vocos.`` with its ``init_args`` (what ``Vocos.from_hparams`` instantiates). The parent reads
it as data (:func:`claims` recognises it); only classes of the vocos package's feature, model and
head modules are instantiated, in the model process, and nothing is called but their constructors.

What runs in a TTS pipeline is ``Vocos.decode``: the backbone (ConvNeXt blocks) and the head (an
inverse STFT, or inverse MDCT), on features of shape (batch, channels, frames). That is the module
validated, with seeded features. Weights are a pickle (``pytorch_model.bin``), so Zoo runs Vocos at
the tiny and census tiers only, with seeded weights: the backbone's width, its intermediate width
and its depth are shrunk; the feature channels, FFT size and hop (the head's signal path) are kept.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import math
from dataclasses import dataclass, field
from typing import Any

import torch

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built, ConfigPlan

CONFIG_FILE = "config.yaml"
BLOCKS = ("feature_extractor", "backbone", "head")
# the modules whose torch.nn.Module classes a config may name (vocos.pretrained.instantiate_class
# would import any module: Zoo imports only these)
ALLOWED_MODULES = ("vocos.feature_extractors.", "vocos.models.", "vocos.heads.")
# the backbone's and head's widths and depth (ConvNeXt layers, or a ResNet backbone's blocks)
TINY_ARGS = {"dim": 32, "intermediate_dim": 64, "num_layers": 1, "num_blocks": 1}
MAX_INT = 1 << 16  # a width, size or count over this is no published model's (and would exhaust memory)
FRAMES = (16, 24)  # feature frames per shape


def claims(config: dict[str, Any]) -> bool:
    """A config.yaml of Vocos: its three blocks, each a class under ``vocos.``."""
    return all(
        isinstance(config.get(b), dict) and str(config[b].get("class_path", "")).startswith("vocos.") for b in BLOCKS
    )


def _unsupported(model_id: str, why: str) -> NotSupported:
    return NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{model_id}: {CONFIG_FILE} {why}")


def _allowed(target: Any) -> bool:
    return (
        isinstance(target, str)
        and target.startswith(ALLOWED_MODULES)
        and all(p.isidentifier() and not p.startswith("_") for p in target.split("."))
    )


def graph_of(model_id: str, config: dict[str, Any], tier: str) -> dict[str, dict[str, Any]]:
    """``{block: {"class_path": ..., "init_args": {...}}}`` for the three blocks, checked (classes of
    vocos only, plain values only) and shrunk below the full tier."""
    graph: dict[str, dict[str, Any]] = {}
    for name in BLOCKS:
        block = config.get(name)
        if not isinstance(block, dict) or not _allowed(block.get("class_path")):
            raise _unsupported(
                model_id,
                f"names {name} as {block.get('class_path') if isinstance(block, dict) else block!r}, not a class of "
                f"{', '.join(m[:-1] for m in ALLOWED_MODULES)}; Zoo builds only Vocos's own modules",
            )
        args = block.get("init_args") or {}
        if not isinstance(args, dict):
            raise _unsupported(model_id, f"gives {name} init_args that are not a mapping")
        for key, value in args.items():
            if not isinstance(key, str) or not (value is None or isinstance(value, (bool, int, float, str))):
                raise _unsupported(model_id, f"gives {name} an argument Zoo does not pass ({key!r}: not a plain value)")
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if number and (abs(value) > MAX_INT or not math.isfinite(value)):  # abs first: 10**400 is no float
                raise _unsupported(model_id, f"gives {name}.{key} {value!r}, over Zoo's size limit of {MAX_INT:,}")
            if isinstance(value, int) and not isinstance(value, bool) and value < 0:
                raise _unsupported(model_id, f"gives {name}.{key} {value}: no size or count is negative")
        if tier in ("tiny", "census"):
            args = {
                k: min(v, TINY_ARGS[k]) if k in TINY_ARGS and isinstance(v, int) and not isinstance(v, bool) else v
                for k, v in args.items()
            }
        graph[name] = {"class_path": block["class_path"], "init_args": copy.deepcopy(args)}
    channels = graph["backbone"]["init_args"].get("input_channels")
    if not isinstance(channels, int) or isinstance(channels, bool) or channels <= 0:
        raise _unsupported(model_id, f"gives the backbone input_channels {channels!r}, not a count of feature channels")
    return graph


def _module_class(block: dict[str, Any]) -> type[torch.nn.Module]:
    """The vocos class a block names: defined in vocos itself (not a class vocos imports from another
    package, ``vocos.feature_extractors.EncodecModel``) and a torch module; nothing is called."""
    module, _, name = block["class_path"].rpartition(".")
    if not _allowed(block["class_path"]):  # checked in the plan; never import anything else
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"not a Vocos module: {block['class_path']}")
    try:
        cls = getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED, f"Vocos models need the vocos extra (pip install 'zoo[vocos]'): {exc}"
        ) from exc
    except AttributeError as exc:
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"this vocos has no {block['class_path']}") from exc
    if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module) and cls.__module__ == module):
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{block['class_path']} is not a torch module class of vocos")
    return cls


def _instantiate(block: dict[str, Any]) -> torch.nn.Module:
    cls = _module_class(block)
    try:
        return cls(**block["init_args"])
    except Exception as exc:  # noqa: BLE001  (arguments its constructor refuses: the config's, not Zoo's)
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED, f"{block['class_path']} refuses the config's arguments: {exc}"
        ) from exc


class VocosDecoder(torch.nn.Module):
    """What ``Vocos.decode`` runs: the backbone, then the head, features (B, C, L) to audio (B, T)."""

    def __init__(self, backbone: torch.nn.Module, head: torch.nn.Module) -> None:
        super().__init__()
        self.backbone, self.head = backbone, head

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(features))


def _channels(graph: dict[str, dict[str, Any]]) -> int:
    """The feature channels the backbone takes (its ``input_channels``; mel bands by default)."""
    return int(graph["backbone"]["init_args"]["input_channels"])  # checked in graph_of


@dataclass
class VocosPlan(ConfigPlan):
    graph: dict[str, dict[str, Any]] = field(default_factory=dict)


class VocosBuilder:
    library = "vocos"
    config_files = (CONFIG_FILE,)

    def plan(self, request: Any) -> VocosPlan:
        if request.tier == "full":
            raise NotSupported(
                Reason.PICKLE_ONLY,
                f"{request.model_id}: Vocos weights are a pickle (pytorch_model.bin); Zoo loads safetensors only",
            )
        graph = graph_of(request.model_id, dict(request.config or {}), request.tier)
        channels = _channels(graph)
        return VocosPlan(
            architecture="+".join(graph[b]["class_path"].rpartition(".")[2] for b in ("backbone", "head")),
            config=graph,
            config_source=request.config_source or f"hub:{request.model_id}",
            shapes=[{"batch": b, "channels": channels, "frames": f} for b, f in zip((1, 2), FRAMES)],
            graph=graph,
        )

    def task(self, request: Any, plan: VocosPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or "text-to-speech"

    def build(self, request: Any, plan: VocosPlan | None = None) -> Built:
        from ..weights import init_weights

        plan = plan or self.plan(request)
        torch.manual_seed(request.seed)
        model = VocosDecoder(_instantiate(plan.graph["backbone"]), _instantiate(plan.graph["head"]))
        # the repo's front end must exist in this vocos too; not built (EncodecFeatures downloads a checkpoint)
        _module_class(plan.graph["feature_extractor"])
        init_weights(model, request.seed)
        model.eval()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            return {"features": torch.randn(shape["batch"], shape["channels"], shape["frames"], generator=gen)}

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )
