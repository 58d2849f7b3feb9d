"""transformers models: the architecture class, its (real or default) config, shrunk for `tiny`."""

from __future__ import annotations

import copy
import logging
import threading
from dataclasses import dataclass
from typing import Any

import torch

from .. import inputs as inputs_mod
from ..exceptions import NotSupported, UnknownModel
from ..quirks import quirk_for
from ..shrink import apply_overrides, fill_mrope_sections, shrink_dict
from ..statuses import Reason
from ..weights import init_weights
from .base import Built

log = logging.getLogger(__name__)

# Class-name suffix → pipeline task (data, not a code path per model).
TASK_BY_SUFFIX = (
    ("ForMaskedLM", "fill-mask"),
    ("ForCausalLM", "text-generation"),
    ("LMHeadModel", "text-generation"),
    ("ForConditionalGeneration", "text2text-generation"),
    ("ForSequenceClassification", "text-classification"),
    ("ForTokenClassification", "token-classification"),
    ("ForQuestionAnswering", "question-answering"),
    ("ForMultipleChoice", "multiple-choice"),
    ("ForImageClassification", "image-classification"),
    ("ForObjectDetection", "object-detection"),
    ("ForSemanticSegmentation", "image-segmentation"),
    ("ForCTC", "automatic-speech-recognition"),
    ("ForAudioClassification", "audio-classification"),
    ("ForSpeechSeq2Seq", "automatic-speech-recognition"),
    ("ForMaskedImageModeling", "image-feature-extraction"),
    ("Model", "feature-extraction"),
)
# Pipeline task → Auto class, for Hub models whose config names no usable architecture.
AUTO_BY_TASK = {
    "fill-mask": "AutoModelForMaskedLM",
    "text-generation": "AutoModelForCausalLM",
    "text2text-generation": "AutoModelForSeq2SeqLM",
    "translation": "AutoModelForSeq2SeqLM",
    "summarization": "AutoModelForSeq2SeqLM",
    "text-classification": "AutoModelForSequenceClassification",
    "zero-shot-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
    "question-answering": "AutoModelForQuestionAnswering",
    "image-classification": "AutoModelForImageClassification",
    "object-detection": "AutoModelForObjectDetection",
    "automatic-speech-recognition": "AutoModelForSpeechSeq2Seq",
    "audio-classification": "AutoModelForAudioClassification",
}


# Heads that pool at each row's last real token find it through pad_token_id: decoder-only
# sequence classifiers (GPT-2, Llama, Mistral, Qwen reward models) refuse a batch without one.
PADDED_TASKS = ("text-classification",)


def _ensure_pad_token(cfg: dict[str, Any]) -> None:
    """A default config with no pad token gets one: its eos token where that lies in the
    vocabulary, else 0 (the text config's, for configs that nest one)."""
    for node in (cfg, cfg.get("text_config")):
        if (
            not isinstance(node, dict)
            or node.get("pad_token_id") is not None
            or not isinstance(node.get("vocab_size"), int)
        ):
            continue  # no vocabulary yet (ESM's default): a quirk row sets it with its pad token
        eos = node.get("eos_token_id")
        eos = eos[0] if isinstance(eos, list) and eos else eos
        node["pad_token_id"] = eos if isinstance(eos, int) and 0 <= eos < int(node["vocab_size"]) else 0


CHOICES = 2  # answers per question for multiple-choice heads


def _as_choices(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Multiple-choice heads take (batch, choices, seq) text: each row's text paired with a second,
    shifted answer so the choices differ."""
    text = ("input_ids", "attention_mask", "token_type_ids", "position_ids", "global_attention_mask")
    return {
        k: torch.stack([v, v.roll(1, dims=-1)], dim=1) if k in text and v.dim() == 2 else v for k, v in inputs.items()
    }


def remote_reference(cfg: dict, task: str | None, base_model: bool = False) -> str | None:
    """The ``module.Class`` a custom-code repo's ``auto_map`` names for ``task`` (the parent reads the
    class name from it without importing anything; the model process loads it)."""
    auto_map = cfg.get("auto_map") or {}
    if not isinstance(auto_map, dict):
        return None
    auto = "AutoModel" if base_model else AUTO_BY_TASK.get(task or "", "AutoModel")
    ref = auto_map.get(auto) or auto_map.get("AutoModel")
    ref = ref or next((v for k, v in sorted(auto_map.items()) if k.startswith("AutoModel")), None)
    return ref if isinstance(ref, str) else None


def task_for(architecture: str) -> str | None:
    for suffix, task in TASK_BY_SUFFIX:
        if architecture.endswith(suffix):
            return task
    return None


# transformers imports model modules lazily; two threads resolving at once can see a half-imported
# module (seen as "no such class"). Parent-side resolution is serialized.
_RESOLVE_LOCK = threading.RLock()


def resolve_class(architecture: str):
    with _RESOLVE_LOCK:
        return _resolve_class(architecture)


def _resolve_class(architecture: str):
    import transformers

    try:
        cls = getattr(transformers, architecture)
    except (AttributeError, ImportError, RuntimeError) as exc:
        cls = _mapped_class(architecture)
        if cls is None:
            raise UnknownModel(
                f"unknown model arch:{architecture}: transformers {transformers.__version__} has no such class"
            ) from exc
    if isinstance(cls, type) and getattr(cls, "_backends", None) and not issubclass(cls, transformers.PreTrainedModel):
        # transformers' placeholder for a class whose optional dependency is missing
        raise NotSupported(
            Reason.LIBRARY_UNSUPPORTED,
            f"arch:{architecture} needs {', '.join(cls._backends)}, not installed here "
            f"(pip install {' '.join(cls._backends)})",
        )
    auto = cls.__module__.startswith("transformers.models.auto.") if isinstance(cls, type) else True
    if not (isinstance(cls, type) and issubclass(cls, transformers.PreTrainedModel)) or auto:
        raise UnknownModel(f"unknown model arch:{architecture}: not a transformers model class")
    return cls


def _mapped_class(architecture: str):
    """A class that transformers' Auto mappings name but its top-level namespace does not export
    (left out of its modeling module's ``__all__``): looked up in that model type's modeling module."""
    import importlib

    from transformers.models.auto import modeling_auto
    from transformers.models.auto.configuration_auto import model_type_to_module_name

    for name in dir(modeling_auto):
        mapping = getattr(modeling_auto, name)
        if not (name.endswith("_MAPPING_NAMES") and isinstance(mapping, dict)):
            continue
        for model_type, names in mapping.items():
            if architecture not in (names if isinstance(names, (list, tuple)) else (names,)):
                continue
            module = model_type_to_module_name(model_type)
            try:
                modeling = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
            except ImportError:
                continue
            cls = getattr(modeling, architecture, None)
            if cls is not None:
                return cls
    return None


def _class_for_config(config_class: type, task: str | None):
    """The model class for a config that no Auto class maps (VitMatte, VitPose, VisionEncoderDecoder
    without ``architectures``): the classes of the config's own modeling module, the one whose
    suffix matches the task first, else the first task head in TASK_BY_SUFFIX order."""
    import importlib

    import transformers

    # transformers.models.<type>.configuration_<type> -> its sibling modeling_<type>
    modeling = importlib.import_module(config_class.__module__.replace(".configuration_", ".modeling_"))
    candidates = []
    for name in getattr(modeling, "__all__", None) or dir(modeling):
        obj = getattr(modeling, name, None)
        if (
            isinstance(obj, type)
            and issubclass(obj, transformers.PreTrainedModel)
            and obj.config_class is config_class
            and not name.endswith("PreTrainedModel")
        ):
            candidates.append(obj)
    if not candidates:
        raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"transformers has no model class for {config_class.__name__}")
    rank = {suffix: i for i, (suffix, _) in enumerate(TASK_BY_SUFFIX)}

    def key(cls: type) -> tuple[int, int, str]:
        suffix = next((sfx for sfx, _ in TASK_BY_SUFFIX if cls.__name__.endswith(sfx)), None)
        wanted = suffix is not None and task is not None and dict(TASK_BY_SUFFIX)[suffix] == task
        return (0 if wanted else 1, rank.get(suffix, len(rank)) if suffix else len(rank) + 1, cls.__name__)

    return sorted(candidates, key=key)[0]


@dataclass
class Plan:
    """What will be built, decided without instantiating the model (so the parent can fingerprint)."""

    cls: Any
    config: Any
    architecture: str
    config_source: str
    quirk: Any
    shapes: list[dict]
    graph_extras: dict = None  # type: ignore[assignment]  # builder-specific graph facts (pooling ...)
    fixed_fingerprint: str | None = None  # custom code's: what the parent computed without importing it

    def fingerprint(self, library: str, tier: str) -> str:
        from ..fingerprint import fingerprint

        if self.fixed_fingerprint:
            return self.fixed_fingerprint
        return fingerprint(
            library, self.architecture, {**self.config.to_dict(), **(self.graph_extras or {})}, tier, self.shapes
        )


# Sample text for full-tier inputs through the model's real tokenizer.
SAMPLE_TEXTS = ("Zoo checks that the most downloaded models run correctly on every accelerator.", "A short one.")


class TransformersBuilder:
    library = "transformers"

    def plan(self, request: Any, base_model: bool = False) -> Plan:
        with _RESOLVE_LOCK:
            return self._plan(request, base_model)

    def _plan(self, request: Any, base_model: bool) -> Plan:
        import transformers

        model_id: str = request.model_id
        if model_id.startswith("arch:"):
            architecture = model_id[len("arch:") :]
            cls = resolve_class(architecture)
            config = cls.config_class()
            source = f"default:{config.model_type}"
        else:
            if not request.config:
                raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{model_id}: no config.json was fetched")
            cfg = dict(request.config)
            if "model_type" not in cfg:
                raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{model_id}: config.json has no model_type")
            if request.remote_code:  # the repo's own classes (model process only)
                return self._remote_plan(request, cfg, base_model)
            try:
                auto_config = transformers.AutoConfig.for_model(**cfg)
            except (ValueError, KeyError) as exc:
                raise NotSupported(
                    Reason.LIBRARY_UNSUPPORTED,
                    f"{model_id}: transformers {transformers.__version__} "
                    f"does not know model_type {cfg['model_type']!r}",
                ) from exc
            archs = [] if base_model else (cfg.get("architectures") or [])
            architecture = next((a for a in archs if hasattr(transformers, a)), None)
            if architecture is None:
                auto = "AutoModel" if base_model else AUTO_BY_TASK.get(request.task or "", "AutoModel")
                mapping = getattr(transformers, auto)._model_mapping
                if type(auto_config) not in mapping:
                    mapping = transformers.AutoModel._model_mapping
                cls = (
                    mapping[type(auto_config)]
                    if type(auto_config) in mapping
                    else _class_for_config(type(auto_config), request.task)
                )
                architecture = cls.__name__
            else:
                cls = resolve_class(architecture)
            config = cls.config_class.from_dict(cfg)
            source = request.config_source or "hub"
        return self._finish_plan(request, cls, cls.config_class, config, architecture, source)

    def _remote_plan(self, request: Any, cfg: dict, base_model: bool) -> Plan:
        """A custom-code repo's plan: the classes its config's ``auto_map`` names, loaded from the
        code files the parent fetched and hashed (zoo_runner.remote_code), in the model process."""
        import transformers

        from .. import remote_code

        auto_map = cfg.get("auto_map") or {}
        ref = remote_reference(cfg, request.task, base_model)
        if not isinstance(ref, str) or not request.files_dir:
            raise NotSupported(Reason.REMOTE_CODE, f"{request.model_id}: its auto_map names no model class")
        cls = remote_code.load_class(ref, request.files_dir)
        if isinstance(auto_map.get("AutoConfig"), str):
            config_class = remote_code.load_class(auto_map["AutoConfig"], request.files_dir)
        elif isinstance(getattr(cls, "config_class", None), type):
            config_class = cls.config_class
        else:
            config_class = type(transformers.AutoConfig.for_model(**cfg))
        config = config_class.from_dict(cfg)
        plan = self._finish_plan(request, cls, config_class, config, cls.__name__, request.config_source or "hub")
        plan.fixed_fingerprint = remote_code.fingerprint(request)
        return plan

    def _finish_plan(
        self, request: Any, cls: Any, config_class: Any, config: Any, architecture: str, source: str
    ) -> Plan:
        """The tier's config (tiny and census: shrunk), the quirk and the input shapes."""
        quirk = quirk_for(architecture, getattr(config, "model_type", None))
        if request.tier in ("tiny", "census"):
            cfg_dict = fill_mrope_sections(shrink_dict(copy.deepcopy(config.to_dict())), config)
            if task_for(architecture) in PADDED_TASKS:
                _ensure_pad_token(cfg_dict)
            lm_head = task_for(architecture) == "text-generation" or architecture.endswith("WithLMHead")
            if lm_head and cfg_dict.get("is_decoder") is False:
                # a causal LM head is a decoder: encoder models' LM heads (Reformer's, BERT's) read is_decoder
                cfg_dict["is_decoder"] = True
            if quirk and quirk.config:
                apply_overrides(cfg_dict, quirk.config)
            config = config_class.from_dict(cfg_dict)
        for sub in [config] + [
            getattr(config, k) for k in getattr(config, "sub_configs", {}) or {} if getattr(config, k, None) is not None
        ]:
            if hasattr(sub, "use_cache"):
                sub.use_cache = False
        shapes = [dict(s) for s in inputs_mod.DEFAULT_SHAPES]
        if quirk and quirk.seq_lens:
            for shape, seq in zip(shapes, quirk.seq_lens):
                shape["seq"] = seq
        return Plan(cls=cls, config=config, architecture=architecture, config_source=source, quirk=quirk, shapes=shapes)

    def task(self, request: Any, plan: Plan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or task_for(plan.architecture)

    def build(self, request: Any, plan: Plan | None = None, base_model: bool = False) -> Built:
        plan = plan or self.plan(request, base_model=base_model)
        cls, config, architecture, quirk = plan.cls, plan.config, plan.architecture, plan.quirk
        torch.manual_seed(request.seed)
        gguf_file = (request.extras or {}).get("gguf_file") if request.tier == "full" else None
        if gguf_file:  # a GGUF-only repo: transformers dequantises the file to float32 (gguf package)
            model = cls.from_pretrained(request.files_dir, config=config, gguf_file=gguf_file, local_files_only=True)
        elif request.tier == "full":
            model = cls.from_pretrained(request.files_dir, config=config, use_safetensors=True, local_files_only=True)
        else:
            model = cls._from_config(config, dtype=torch.float32)
            init_weights(model, request.seed)
        model.eval()
        is_enc_dec = bool(getattr(config, "is_encoder_decoder", False))
        kinds = dict(quirk.input_kinds) if quirk else {}
        tokenizer = _tokenizer(request.files_dir) if request.tier == "full" else None

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            try:
                inputs = inputs_mod.make_inputs(
                    model, config, shape, seed, is_enc_dec, kinds, quirk.extra_inputs if quirk else ()
                )
            except KeyError as exc:
                raise NotSupported(Reason.NO_INPUTS, f"{architecture}: {exc.args[0]}") from exc
            if task_for(architecture) == "multiple-choice":
                inputs = _as_choices(inputs)
            if tokenizer is not None and "input_ids" in inputs:
                texts = list(SAMPLE_TEXTS[: shape["batch"]])
                enc = tokenizer(texts, padding=True, truncation=True, max_length=shape["seq"] * 4, return_tensors="pt")
                for key in ("input_ids", "attention_mask", "token_type_ids"):
                    if key in inputs and key in enc:
                        inputs[key] = enc[key]
            return inputs

        return Built(
            model=model,
            library=self.library,
            architecture=architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
            tolerance_factor=quirk.tolerance_factor if quirk else 1.0,
        )


def _tokenizer(files_dir: str | None):
    """The model's real tokenizer, when the repo ships one (full tier)."""
    if not files_dir:
        return None
    try:
        from transformers import AutoTokenizer

        return AutoTokenizer.from_pretrained(files_dir, local_files_only=True)
    except Exception as exc:  # no tokenizer files: generated ids stand in
        log.info("no tokenizer in %s: %s", files_dir, exc)
        return None
