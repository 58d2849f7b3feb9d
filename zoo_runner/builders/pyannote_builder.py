"""pyannote.audio models (the ``pyannote`` extra): the model its ``config.yaml`` names.

A pyannote model repo publishes a ``config.yaml`` whose ``model`` block names the class
(``_target_: pyannote.audio.models.segmentation.PyanNet``) and its hyper-parameters, and whose
``task`` block names the training task, from which the model's output layer follows (classes,
powerset). The weights are a Lightning checkpoint (``pytorch_model.bin``, pickle), so Zoo runs
pyannote models at the tiny and census tiers only, with seeded weights: recurrent and
feed-forward widths and depths are shrunk, the front end (SincNet, filterbanks) and the output
layer are kept. Only classes under ``pyannote.audio.models`` are imported, never a class a config
names elsewhere. Inputs are seeded waveforms, (batch, channels, samples), of two durations.
pyannote.audio itself is imported only in the model process.
"""
from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import NotSupported
from .base import Built

CONFIG_FILE = "config.yaml"
ALLOWED_PREFIX = "pyannote.audio.models."
DURATIONS_S = (1.0, 1.5)
TINY_HIDDEN, TINY_LAYERS = 32, 2
# Training task → the output its model is built for (data, not a branch per model):
# problem, class names ({n} numbered up to the task's speaker count), powerset key, speaker count key.
TASKS: dict[str, dict[str, Any]] = {
    "pyannote.audio.tasks.SpeakerDiarization": {"problem": "MULTI_LABEL_CLASSIFICATION", "classes": "speaker#{n}", "speakers": "max_speakers_per_chunk", "powerset": "max_speakers_per_frame", "permutation_invariant": True},
    "pyannote.audio.tasks.Segmentation": {"problem": "MULTI_LABEL_CLASSIFICATION", "classes": "speaker#{n}", "speakers": "max_num_speakers", "permutation_invariant": True},
    "pyannote.audio.tasks.VoiceActivityDetection": {"problem": "BINARY_CLASSIFICATION", "classes": ["speech"]},
    "pyannote.audio.tasks.OverlappedSpeechDetection": {"problem": "BINARY_CLASSIFICATION", "classes": ["overlap"]},
}
DEFAULT_SPEAKERS = 3  # what pyannote's published segmentation models detect per chunk when the task leaves it to the data


def _shrink(model_cfg: dict[str, Any]) -> dict[str, Any]:
    cfg = copy.deepcopy(model_cfg)
    for block in ("lstm", "linear"):
        sub = cfg.get(block)
        if isinstance(sub, dict):
            sub["hidden_size"] = min(int(sub.get("hidden_size", TINY_HIDDEN)), TINY_HIDDEN)
            sub["num_layers"] = min(int(sub.get("num_layers", TINY_LAYERS)), TINY_LAYERS)
    return cfg


def specifications_kwargs(task: dict[str, Any] | None) -> dict[str, Any] | None:
    """Keyword arguments of pyannote's ``Specifications`` for a config's ``task`` block, or None
    (an embedding model, whose output does not depend on a task)."""
    if not isinstance(task, dict) or not task.get("_target_"):
        return None
    row = TASKS.get(task["_target_"])
    if row is None:
        raise NotSupported("library_unsupported", f"pyannote task {task['_target_']!r} is not known to Zoo")
    classes = row["classes"]
    if isinstance(classes, str):
        n = int(task.get(row["speakers"]) or DEFAULT_SPEAKERS)
        classes = [classes.format(n=i + 1) for i in range(n)]
    out: dict[str, Any] = {"problem": row["problem"], "resolution": "FRAME", "duration": float(task.get("duration", 5.0)), "classes": classes, "permutation_invariant": row.get("permutation_invariant", False)}
    powerset = task.get(row["powerset"]) if row.get("powerset") else None
    if powerset:
        out["problem"], out["powerset_max_classes"] = "MONO_LABEL_CLASSIFICATION", int(powerset)
    return out


@dataclass
class PyannotePlan:
    architecture: str
    target: str
    model_config: dict[str, Any]
    specifications: dict[str, Any] | None
    config_source: str
    shapes: list[dict] = field(default_factory=list)

    def fingerprint(self, library: str, tier: str) -> str:
        from ..fingerprint import fingerprint

        return fingerprint(library, self.architecture, {"model": self.model_config, "specifications": self.specifications}, tier, self.shapes)


class PyannoteBuilder:
    library = "pyannote-audio"
    config_file = CONFIG_FILE

    def plan(self, request: Any) -> PyannotePlan:
        cfg = dict(request.config or {})
        model_cfg = cfg.get("model")
        if not isinstance(model_cfg, dict) or not isinstance(model_cfg.get("_target_"), str):
            raise NotSupported("library_unsupported", f"{request.model_id}: {CONFIG_FILE} has no model block naming a class (a pipeline?)")
        target = model_cfg["_target_"]
        if not target.startswith(ALLOWED_PREFIX):
            raise NotSupported("library_unsupported", f"{request.model_id}: its model is {target}, outside {ALLOWED_PREFIX[:-1]}; Zoo imports only pyannote.audio's own models")
        if request.tier == "full":
            raise NotSupported("pickle_only", f"{request.model_id}: pyannote weights are a pickled Lightning checkpoint; Zoo loads safetensors only")
        params = {k: v for k, v in model_cfg.items() if k != "_target_"}
        if request.tier in ("tiny", "census"):
            params = _shrink(params)
        rate = int(params.get("sample_rate", 16000))
        shapes = [{"batch": b, "channels": int(params.get("num_channels", 1)), "samples": int(d * rate)} for b, d in zip((1, 2), DURATIONS_S)]
        return PyannotePlan(
            architecture=target.rpartition(".")[2],
            target=target,
            model_config=params,
            specifications=specifications_kwargs(cfg.get("task")),
            config_source=request.config_source or f"hub:{request.model_id}",
            shapes=shapes,
        )

    def build(self, request: Any, plan: PyannotePlan | None = None) -> Built:
        plan = plan or self.plan(request)
        module, _, name = plan.target.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
            from pyannote.audio.core.task import Problem, Resolution, Specifications
        except ImportError as exc:
            raise NotSupported("library_unsupported", f"pyannote models need the pyannote extra (pip install 'zoo[pyannote]'): {exc}") from exc
        except AttributeError as exc:
            raise NotSupported("library_unsupported", f"pyannote.audio has no model {plan.target}") from exc
        import torch

        from ..weights import init_weights

        torch.manual_seed(request.seed)
        model = cls(**plan.model_config)
        if plan.specifications is not None:
            spec = dict(plan.specifications)
            spec["problem"], spec["resolution"] = Problem[spec["problem"]], Resolution[spec["resolution"]]
            model.specifications = Specifications(**spec)
            model.build()  # the task-dependent output layer
        init_weights(model, request.seed)
        model.eval()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            return {"waveforms": 0.1 * torch.randn(shape["batch"], shape["channels"], shape["samples"], generator=gen)}

        return Built(
            model=model,
            config={"model": plan.model_config, "specifications": plan.specifications},
            config_dict={"model": plan.model_config, "specifications": plan.specifications},
            library=self.library,
            architecture=plan.architecture,
            task=request.task or ("speaker-diarization" if plan.specifications else "audio-embedding"),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )
