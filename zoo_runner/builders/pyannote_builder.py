"""pyannote.audio models (the ``pyannote`` extra): the model its ``config.yaml`` names.

A pyannote model repo publishes a ``config.yaml`` whose ``model`` block names the class
(``_target_: pyannote.audio.models.segmentation.PyanNet``) and its hyper-parameters, and whose
``task`` block names the training task, from which the model's output layer follows (classes,
powerset). The weights are a Lightning checkpoint (``pytorch_model.bin``, pickle), so Zoo runs
pyannote models at the tiny and census tiers only, with seeded weights: recurrent and
feed-forward widths and depths are shrunk, the front end (SincNet, filterbanks) and the output
layer are kept. Only classes under ``pyannote.audio.models`` are imported, never a class a config
names elsewhere. Inputs are seeded waveforms, (batch, channels, samples), of two durations.

A pipeline repo's ``config.yaml`` names its models' repos (``segmentation``, ``embedding``); the
parent fetches their ``config.yaml`` and Zoo validates those models together on the same
waveforms, as the pipeline runs them on the accelerator (clustering runs on CPU anyway). An
embedding that is a SpeechBrain model (``speechbrain/spkrec-ecapa-voxceleb``, as
``pyannote/speaker-diarization`` 2.1 names it) is read from its ``hyperparams.yaml`` and built by
:mod:`.speechbrain_builder`, as pyannote's ``SpeechBrainPretrainedSpeakerEmbedding`` runs it.
pyannote.audio itself is imported only in the model process.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from ..exceptions import NotSupported
from ..statuses import Reason
from . import speechbrain_builder as speechbrain
from .base import Built, ConfigPlan

CONFIG_FILE = "config.yaml"
ALLOWED_PREFIX = "pyannote.audio.models."
DURATIONS_S = (1.0, 1.5)
PIPELINE_MODELS = ("segmentation", "embedding")  # pipeline parameters that name model repos
SPEECHBRAIN = "speechbrain"  # a part's target: a SpeechBrain embedder (its model_config is the inference graph)
TINY_HIDDEN, TINY_LAYERS = 32, 2
# Training task → the output its model is built for (data, not a branch per model):
# problem, class names ({n} numbered up to the task's speaker count), powerset key, speaker count key.
TASKS: dict[str, dict[str, Any]] = {
    "pyannote.audio.tasks.SpeakerDiarization": {
        "problem": "MULTI_LABEL_CLASSIFICATION",
        "classes": "speaker#{n}",
        "speakers": "max_speakers_per_chunk",
        "powerset": "max_speakers_per_frame",
        "permutation_invariant": True,
    },
    "pyannote.audio.tasks.Segmentation": {
        "problem": "MULTI_LABEL_CLASSIFICATION",
        "classes": "speaker#{n}",
        "speakers": "max_num_speakers",
        "permutation_invariant": True,
    },
    "pyannote.audio.tasks.VoiceActivityDetection": {"problem": "BINARY_CLASSIFICATION", "classes": ["speech"]},
    "pyannote.audio.tasks.OverlappedSpeechDetection": {"problem": "BINARY_CLASSIFICATION", "classes": ["overlap"]},
}
# tasks that train an embedding model: its output is the embedding, whatever the task (no Specifications)
EMBEDDING_TASKS = {
    "pyannote.audio.tasks.SupervisedRepresentationLearningWithArcFace",
    "pyannote.audio.tasks.SpeakerEmbedding",
}
DEFAULT_SPEAKERS = (
    3  # what pyannote's published segmentation models detect per chunk when the task leaves it to the data
)


class PipelineModels(torch.nn.Module):
    """A pipeline's models on the same waveforms: what the pipeline runs on the accelerator."""

    def __init__(self, models: dict[str, torch.nn.Module]) -> None:
        super().__init__()
        self.models = torch.nn.ModuleDict(models)

    def forward(self, waveforms: torch.Tensor) -> dict[str, torch.Tensor]:
        return {role: model(waveforms) for role, model in self.models.items()}


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
    if task["_target_"] in EMBEDDING_TASKS:
        return None
    row = TASKS.get(task["_target_"])
    if row is None:
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"pyannote task {task['_target_']!r} is not known to Zoo")
    classes = row["classes"]
    if isinstance(classes, str):
        n = int(task.get(row["speakers"]) or DEFAULT_SPEAKERS)
        classes = [classes.format(n=i + 1) for i in range(n)]
    out: dict[str, Any] = {
        "problem": row["problem"],
        "resolution": "FRAME",
        "duration": float(task.get("duration", 5.0)),
        "classes": classes,
        "permutation_invariant": row.get("permutation_invariant", False),
    }
    powerset = task.get(row["powerset"]) if row.get("powerset") else None
    if powerset:
        out["problem"], out["powerset_max_classes"] = "MONO_LABEL_CLASSIFICATION", int(powerset)
    return out


def pipeline_model_repos(config: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    """``{role: (repo, revision)}`` of the models a pipeline's config.yaml names (``segmentation:
    pyannote/segmentation-3.0``, ``embedding: org/name@revision``)."""
    pipe = config.get("pipeline")
    params = pipe.get("params") if isinstance(pipe, dict) else None
    out: dict[str, tuple[str, str | None]] = {}
    for role in PIPELINE_MODELS:
        value = params.get(role) if isinstance(params, dict) else None
        if isinstance(value, str) and "/" in value:
            repo, _, revision = value.partition("@")
            out[role] = (repo, revision or None)
    return out


def _class_name(part: Part) -> str:
    target = part.model_config["embedding_model"]["!new"] if part.target == SPEECHBRAIN else part.target
    return target.rpartition(".")[2]


@dataclass
class Part:
    """One pyannote model: its class, its (shrunk) hyper-parameters and its output specifications."""

    target: str
    model_config: dict[str, Any]
    specifications: dict[str, Any] | None


@dataclass
class PyannotePlan(ConfigPlan):
    # {"model": ...} for a model repo; {"segmentation": ..., "embedding": ...} for a pipeline
    parts: dict[str, Part] = field(default_factory=dict)


class PyannoteBuilder:
    library = "pyannote-audio"
    config_files = (CONFIG_FILE,)

    def extra_repo_files(self, config: dict[str, Any]) -> list[tuple[str, str | None, str]]:
        """Files of other repos a plan reads: a pipeline's models' config.yaml, and an embedding's
        SpeechBrain hyperparams.yaml where it is one (fetched by the parent; None where absent)."""
        out = []
        for role, (repo, revision) in pipeline_model_repos(config).items():
            out.append((repo, revision, CONFIG_FILE))
            if role == "embedding":
                out.append((repo, revision, speechbrain.CONFIG_FILE))
        return out

    def plan(self, request: Any) -> PyannotePlan:
        cfg = dict(request.config or {})
        if request.tier == "full":
            raise NotSupported(
                Reason.PICKLE_ONLY,
                f"{request.model_id}: pyannote weights are pickled Lightning checkpoints; Zoo loads safetensors only",
            )
        if isinstance(cfg.get("pipeline"), dict):
            parts = self._pipeline_parts(request, cfg)
            name = str(cfg["pipeline"].get("name", "Pipeline")).rpartition(".")[2]
            architecture = f"{name}[{'+'.join(_class_name(p) for p in parts.values())}]"
        else:
            parts = {"model": self._part(request.model_id, cfg, request.tier)}
            architecture = parts["model"].target.rpartition(".")[2]
        rates = {int(p.model_config.get("sample_rate", 16000)) for p in parts.values()}
        channels = {int(p.model_config.get("num_channels", 1)) for p in parts.values()}
        if len(rates) > 1 or len(channels) > 1:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"{request.model_id}: its models disagree on sample "
                f"rate or channels ({sorted(rates)}, {sorted(channels)})",
            )
        rate, chans = rates.pop(), channels.pop()
        shapes = [{"batch": b, "channels": chans, "samples": int(d * rate)} for b, d in zip((1, 2), DURATIONS_S)]
        config = {role: asdict(part) for role, part in parts.items()}  # the graph: what the fingerprint covers
        return PyannotePlan(
            architecture=architecture,
            config=config,
            config_source=request.config_source or f"hub:{request.model_id}",
            shapes=shapes,
            parts=parts,
        )

    def _pipeline_parts(self, request: Any, cfg: dict[str, Any]) -> dict[str, Part]:
        repos = pipeline_model_repos(cfg)
        if not repos:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"{request.model_id}: its pipeline names no model repos ({', '.join(PIPELINE_MODELS)})",
            )
        extras = request.extras or {}
        parts: dict[str, Part] = {}
        for role, (repo, _) in repos.items():
            sub = extras.get(f"{repo}/{CONFIG_FILE}")
            brain = extras.get(f"{repo}/{speechbrain.CONFIG_FILE}") if role == "embedding" else None
            if not isinstance(sub, dict) and isinstance(brain, dict):  # SpeechBrain's embedder, features to embedding
                graph = speechbrain.inference_graph(repo, brain, request.tier, embedding_only=True)
                parts[role] = Part(target=SPEECHBRAIN, model_config=graph, specifications=None)
                continue
            if not isinstance(sub, dict):
                raise NotSupported(
                    Reason.LIBRARY_UNSUPPORTED,
                    f"{request.model_id}: its {role} model {repo} has no pyannote "
                    f"{CONFIG_FILE} (a model of another library, or not reachable)",
                )
            parts[role] = self._part(repo, sub, request.tier)
        return parts

    def _part(self, model_id: str, cfg: dict[str, Any], tier: str) -> Part:
        model_cfg = cfg.get("model")
        if not isinstance(model_cfg, dict) or not isinstance(model_cfg.get("_target_"), str):
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"{model_id}: {CONFIG_FILE} has no model block naming a class"
            )
        target = model_cfg["_target_"]
        if not target.startswith(ALLOWED_PREFIX):
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"{model_id}: its model is {target}, outside {ALLOWED_PREFIX[:-1]}; "
                "Zoo imports only pyannote.audio's own models",
            )
        params = {k: v for k, v in model_cfg.items() if k != "_target_"}
        if tier in ("tiny", "census"):
            params = _shrink(params)
        return Part(target=target, model_config=params, specifications=specifications_kwargs(cfg.get("task")))

    def task(self, request: Any, plan: PyannotePlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or (
            "speaker-diarization" if any(p.specifications for p in plan.parts.values()) else "audio-embedding"
        )

    def build(self, request: Any, plan: PyannotePlan | None = None) -> Built:
        plan = plan or self.plan(request)
        try:
            from pyannote.audio.core.task import Problem, Resolution, Specifications
        except ImportError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"pyannote models need the pyannote extra (pip install 'zoo[pyannote]'): {exc}",
            ) from exc
        import torch

        from ..weights import init_weights

        def instantiate(part: Part) -> torch.nn.Module:
            if part.target == SPEECHBRAIN:
                return speechbrain.build_module(part.model_config)
            module, _, name = part.target.rpartition(".")
            try:
                cls = getattr(importlib.import_module(module), name)
            except (ImportError, AttributeError) as exc:
                raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"pyannote.audio has no model {part.target}") from exc
            model = cls(**part.model_config)
            if part.specifications is not None:
                spec = dict(part.specifications)
                spec["problem"], spec["resolution"] = Problem[spec["problem"]], Resolution[spec["resolution"]]
                model.specifications = Specifications(**spec)
                model.build()  # the task-dependent output layer
            return model

        torch.manual_seed(request.seed)
        models = {role: instantiate(part) for role, part in plan.parts.items()}
        model = models["model"] if list(models) == ["model"] else PipelineModels(models)
        init_weights(model, request.seed)
        model.eval()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            return {"waveforms": 0.1 * torch.randn(shape["batch"], shape["channels"], shape["samples"], generator=gen)}

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )
