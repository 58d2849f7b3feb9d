"""SpeechBrain models (the ``speechbrain`` extra): the modules a repo's ``hyperparams.yaml`` declares.

A SpeechBrain repo publishes ``hyperparams.yaml`` in HyperPyYAML: ``!new:speechbrain.lobes.models.
ECAPA_TDNN.ECAPA_TDNN`` with its arguments, ``!ref <n_mels>`` for a value defined above, and a
``modules`` block naming what inference runs. The parent reads it as plain data
(:mod:`zoo_runner.untrusted` turns the tags into ``{"!new": ..., "kwargs": ...}`` and ``{"!ref": ...}``,
never objects), resolves the references and keeps the modules an ``EncoderClassifier`` runs:
features, their normalisation, the embedding model and, where there is one, the classifier. Only
classes under ``speechbrain.`` are instantiated, in the model process; a file naming anything else,
or a reference Zoo cannot resolve (an expression), is ``library_unsupported``, saying what.

The weights are checkpoints (``embedding_model.ckpt``, pickles), so Zoo runs SpeechBrain models at
the tiny and census tiers only, with seeded weights: channel widths, attention and squeeze widths
and per-stage block counts are shrunk; the feature front end, the embedding width and the output
layer are kept. Inputs are seeded 16 kHz waveforms of two durations, (batch, samples).
"""

from __future__ import annotations

import copy
import importlib
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built, ConfigPlan

CONFIG_FILE = "hyperparams.yaml"
ALLOWED_PREFIX = "speechbrain."
# what an EncoderClassifier runs, in order (speechbrain.inference.classifiers): embedding_model is required
INFERENCE_MODULES = ("compute_features", "mean_var_norm", "embedding_model", "classifier")
SAMPLE_RATE = 16000
DURATIONS_S = (1.0, 1.5)
# argument name -> the most a tiny build keeps (lists: each entry); the embedding and output widths stay
TINY_ARGS = {"channels": 32, "attention_channels": 16, "se_channels": 16, "block_sizes": 1}
_REF = re.compile(r"^<([A-Za-z_][A-Za-z0-9_.]*)>$")


def _unsupported(model_id: str, why: str) -> NotSupported:
    return NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{model_id}: {CONFIG_FILE} {why}")


def _resolve(value: Any, top: dict[str, Any], model_id: str, depth: int = 0) -> Any:
    """``value`` with every ``!ref <name>`` replaced by the top-level value it names (resolved too)."""
    if depth > 32:
        raise _unsupported(model_id, "has references that loop")
    if isinstance(value, dict) and len(value) == 1 and next(iter(value)) in ("!ref", "!copy"):
        ref = str(next(iter(value.values())))
        m = _REF.match(ref.strip())
        if not m:
            raise _unsupported(model_id, f"has a reference Zoo does not evaluate ({ref!r})")
        node: Any = top
        for part in m.group(1).split("."):
            if not isinstance(node, dict) or part not in node:
                raise _unsupported(model_id, f"refers to {ref}, which it does not define")
            node = node[part]
        return _resolve(node, top, model_id, depth + 1)
    if isinstance(value, dict):
        return {k: _resolve(v, top, model_id, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, top, model_id, depth + 1) for v in value]
    return value


def _check(node: Any, model_id: str) -> None:
    """Every object the graph would create is a speechbrain class; nothing is called or included."""
    if isinstance(node, dict):
        for tag in ("!name", "!apply", "!include", "!PLACEHOLDER", "!tuple"):
            if tag in node:
                raise _unsupported(model_id, f"uses {tag} ({node[tag]}) in its inference modules")
        target = node.get("!new")
        if target is not None and not (isinstance(target, str) and target.startswith(ALLOWED_PREFIX)):
            raise _unsupported(
                model_id, f"names {target}, outside {ALLOWED_PREFIX[:-1]}; Zoo builds only SpeechBrain's own modules"
            )
        for v in node.values():
            _check(v, model_id)
    elif isinstance(node, list):
        for v in node:
            _check(v, model_id)


def _shrink(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            cap = TINY_ARGS.get(k)
            if cap is not None and isinstance(v, int) and not isinstance(v, bool) and v > 0:
                out[k] = min(v, cap)
            elif cap is not None and isinstance(v, list) and all(isinstance(i, int) for i in v):
                out[k] = [min(i, cap) for i in v]
            else:
                out[k] = _shrink(v)
        return out
    if isinstance(node, list):
        return [_shrink(v) for v in node]
    return node


def inference_graph(model_id: str, config: dict[str, Any], tier: str, embedding_only: bool = False) -> dict[str, Any]:
    """The modules inference runs, ``{name: {"!new": class, "kwargs": ...}}``, references resolved
    (shrunk below the full tier); ``embedding_only`` stops at the embedding (a pipeline's embedder)."""
    modules = config.get("modules")
    source = modules if isinstance(modules, dict) else config
    graph: dict[str, Any] = {}
    for name in INFERENCE_MODULES[:3] if embedding_only else INFERENCE_MODULES:
        if name not in source:
            continue
        node = _resolve(source[name], config, model_id)
        if not (isinstance(node, dict) and isinstance(node.get("!new"), str)):
            raise _unsupported(model_id, f"declares {name} as no module (!new:...)")
        _check(node, model_id)
        graph[name] = _shrink(node) if tier in ("tiny", "census") else copy.deepcopy(node)
    if "embedding_model" not in graph:
        raise _unsupported(model_id, "declares no embedding_model: Zoo builds SpeechBrain's encoder-classifiers only")
    return graph


def _instantiate(node: Any) -> Any:
    if isinstance(node, dict) and isinstance(node.get("!new"), str):
        module, _, name = node["!new"].rpartition(".")
        if not node["!new"].startswith(ALLOWED_PREFIX):  # checked in the plan; never import anything else
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"not a SpeechBrain module: {node['!new']}")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"this speechbrain has no {node['!new']}") from exc
        args = [_instantiate(a) for a in node.get("args", [])]
        kwargs = {k: _instantiate(v) for k, v in (node.get("kwargs") or {}).items()}
        return cls(*args, **kwargs)
    if isinstance(node, dict):
        return {k: _instantiate(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_instantiate(v) for v in node]
    return node


class EncoderClassifier(torch.nn.Module):
    """What ``speechbrain.inference.EncoderClassifier`` runs: features, normalisation, embedding,
    classifier, on (batch, samples) waveforms (or (batch, 1, samples), as pyannote hands them)."""

    def __init__(self, modules: dict[str, torch.nn.Module]) -> None:
        super().__init__()
        self.mods = torch.nn.ModuleDict(modules)

    def forward(self, waveforms: torch.Tensor) -> dict[str, torch.Tensor]:
        if waveforms.dim() == 3:
            waveforms = waveforms.mean(dim=1)
        lengths = torch.ones(waveforms.shape[0], device=waveforms.device)
        feats = self.mods["compute_features"](waveforms) if "compute_features" in self.mods else waveforms
        if "mean_var_norm" in self.mods:
            feats = self.mods["mean_var_norm"](feats, lengths)
        embedding = self.mods["embedding_model"](feats, lengths)
        out = {"embedding": embedding}
        if "classifier" in self.mods:
            out["logits"] = self.mods["classifier"](embedding)
        return out


def build_module(graph: dict[str, Any]) -> EncoderClassifier:
    """The model process's module for an :func:`inference_graph` (speechbrain imported here)."""
    try:
        importlib.import_module("speechbrain")
    except ImportError as exc:
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED,
            f"SpeechBrain models need the speechbrain extra (pip install 'zoo[speechbrain]'): {exc}",
        ) from exc
    return EncoderClassifier({name: _instantiate(node) for name, node in graph.items()})


@dataclass
class SpeechBrainPlan(ConfigPlan):
    graph: dict[str, Any] = field(default_factory=dict)


class SpeechBrainBuilder:
    library = "speechbrain"
    config_files = (CONFIG_FILE,)

    def plan(self, request: Any) -> SpeechBrainPlan:
        if request.tier == "full":
            raise NotSupported(
                Reason.PICKLE_ONLY,
                f"{request.model_id}: SpeechBrain weights are pickled checkpoints (.ckpt); Zoo loads safetensors only",
            )
        graph = inference_graph(request.model_id, dict(request.config or {}), request.tier)
        architecture = graph["embedding_model"]["!new"].rpartition(".")[2]
        rate = SAMPLE_RATE
        shapes = [{"batch": b, "samples": int(d * rate)} for b, d in zip((1, 2), DURATIONS_S)]
        return SpeechBrainPlan(
            architecture=architecture,
            config=graph,
            config_source=request.config_source or f"hub:{request.model_id}",
            shapes=shapes,
            graph=graph,
        )

    def build(self, request: Any, plan: SpeechBrainPlan | None = None) -> Built:
        from ..weights import init_weights

        plan = plan or self.plan(request)
        torch.manual_seed(request.seed)
        model = build_module(plan.graph)
        init_weights(model, request.seed)
        model.eval()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            return {"waveforms": 0.1 * torch.randn(shape["batch"], shape["samples"], generator=gen)}

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=request.task or ("audio-classification" if "classifier" in plan.graph else "audio-embedding"),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )
