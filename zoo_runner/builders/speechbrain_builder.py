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
import inspect
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built, ConfigPlan

CONFIG_FILE = "hyperparams.yaml"
# the packages whose torch.nn.Module classes a graph may name (features, models, layers); never
# speechbrain.utils (superpowers.run_shell), speechbrain.inference (foreign_class) or a function
ALLOWED_MODULES = ("speechbrain.lobes.", "speechbrain.nnet.", "speechbrain.processing.")
MAX_RESOLVED = 100_000  # values references may expand to (a chain of lists of references grows exponentially)
MAX_INT = 1 << 16  # a width, size or count over this is no published model's (and would exhaust memory)
# what an EncoderClassifier runs, in order (speechbrain.inference.classifiers): embedding_model is required
INFERENCE_MODULES = ("compute_features", "mean_var_norm", "embedding_model", "classifier")
SAMPLE_RATE = 16000
DURATIONS_S = (1.0, 1.5)
# argument name -> the most a tiny build keeps (lists: each entry); the embedding and output widths stay
TINY_ARGS = {"channels": 32, "attention_channels": 16, "se_channels": 16, "block_sizes": 1}
# HyperPyYAML's reference: <name>, <name[key]>...; <a.b> (attribute access) and expressions are not evaluated
_REF = re.compile(r"^<([A-Za-z_][A-Za-z0-9_]*)((?:\[[A-Za-z0-9_]+\])*)>$")


def _unsupported(model_id: str, why: str) -> NotSupported:
    return NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{model_id}: {CONFIG_FILE} {why}")


def _resolve(value: Any, top: dict[str, Any], model_id: str) -> Any:
    """``value`` with every ``!ref <name>`` replaced by the top-level value it names (resolved too),
    within :data:`MAX_RESOLVED` values; a reference to itself is refused."""
    budget = [MAX_RESOLVED]

    def walk(node: Any, active: tuple[str, ...]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _unsupported(model_id, f"expands to over {MAX_RESOLVED:,} values through its references")
        if isinstance(node, dict) and len(node) == 1 and next(iter(node)) in ("!ref", "!copy"):
            ref = str(next(iter(node.values()))).strip()
            m = _REF.match(ref)
            if not m:
                raise _unsupported(model_id, f"has a reference Zoo does not evaluate ({ref!r})")
            if ref in active:
                raise _unsupported(model_id, f"has references that loop ({' -> '.join((*active, ref))})")
            target: Any = top
            for part in [m.group(1), *re.findall(r"\[([A-Za-z0-9_]+)\]", m.group(2))]:
                if not isinstance(target, dict) or part not in target:
                    raise _unsupported(model_id, f"refers to {ref}, which it does not define")
                target = target[part]
            return walk(target, (*active, ref))
        if isinstance(node, dict):
            return {k: walk(v, active) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v, active) for v in node]
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_INT:
            raise _unsupported(model_id, f"has a value of {node:,}, over Zoo's limit of {MAX_INT:,} for a size")
        return node

    return walk(value, ())


def _allowed(target: Any) -> bool:
    return (
        isinstance(target, str)
        and target.startswith(ALLOWED_MODULES)
        and all(p.isidentifier() and not p.startswith("_") for p in target.split("."))
    )


def _check(node: Any, model_id: str) -> None:
    """Every object the graph would create is a speechbrain class; nothing is called or included."""
    if isinstance(node, dict):
        for tag in ("!name", "!apply", "!include", "!PLACEHOLDER", "!tuple"):
            if tag in node:
                raise _unsupported(model_id, f"uses {tag} ({node[tag]}) in its inference modules")
        target = node.get("!new")
        if target is not None and not _allowed(target):
            raise _unsupported(
                model_id,
                f"names {target}, outside {', '.join(m[:-1] for m in ALLOWED_MODULES)}; Zoo builds only "
                "SpeechBrain's own feature and model modules",
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
        if not _allowed(node["!new"]):  # checked in the plan; never import anything else
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"not a SpeechBrain module: {node['!new']}")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"this speechbrain has no {node['!new']}") from exc
        if not (inspect.isclass(cls) and issubclass(cls, torch.nn.Module)):  # no function is ever called
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{node['!new']} is not a torch module class")
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

    def task(self, request: Any, plan: SpeechBrainPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or ("audio-classification" if "classifier" in plan.graph else "audio-embedding")

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
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )
