"""Per-architecture quirks: the one table of everything that is not generic.

Each row names a transformers ``model_type`` (or an architecture class name) and says what the
generic machinery cannot know: config overrides after shrinking, tolerance factors, input shapes,
and known failures with a reason and an expiry date. Code never branches on model names; it
looks rows up here.
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class KnownFailure:
    """A failure Zoo sees and cannot fix yet: why, where to read more, and when to look again.

    A result it matches keeps its status and says so in ``details.known_failure``; the report and
    the dashboard count it apart from new failures, and after ``expires`` as "expired: re-check".
    """

    reason: str
    link: str
    expires: _dt.date

    def details(self, today: _dt.date | None = None) -> dict[str, Any]:
        expired = (today or _dt.date.today()) > self.expires
        return {"reason": self.reason, "link": self.link, "expires": self.expires.isoformat(), "expired": expired}


@dataclass(frozen=True)
class Quirk:
    reason: str
    config: dict[str, Any] = field(default_factory=dict)  # applied after shrinking (dotted keys reach sub-configs)
    tolerance_factor: float = 1.0  # multiplies the error budget, for architectures with legitimately noisy outputs
    seq_lens: tuple[int, ...] | None = None  # text lengths to run instead of the defaults
    input_kinds: dict[str, str] = field(default_factory=dict)  # input name -> generator name, where the name misleads
    extra_inputs: tuple[str, ...] = ()  # optional inputs the model needs all the same
    known_failure: KnownFailure | None = None  # a failure seen and not fixed yet, with its expiry
    # A model_type row only: why transformers' own classes of this model_type stand for the code of
    # the custom-code repos that carry it (transformers ported the architecture from those repos, and
    # ``from_pretrained`` without ``trust_remote_code`` loads their checkpoints in its own classes).
    # Under ZOO_REMOTE_CODE=never such a repo is validated on them instead of refused (SPEC: custom code).
    native_for_custom_code: str = ""
    # With it: the repos' own config keys for a value transformers' config names otherwise
    # (``(theirs, transformers')``, a dotted key reaching into a dict), which the repo must set, to the
    # value transformers builds from (its key, else its default); and options of their code of which
    # transformers ported one value (``(key, ported value, their code's default)``), the repo's (its
    # code's default where it sets none) must be that one. A repo failing either is refused as any
    # other custom-code repo, never built as a different model.
    custom_code_agree: tuple[tuple[str, str], ...] = ()
    custom_code_fixed: tuple[tuple[str, Any, Any], ...] = ()


_RESNET_BACKBONE = {
    "model_type": "resnet",
    "depths": [1, 1, 1, 1],
    "hidden_sizes": [16, 32, 64, 64],
    "embedding_size": 16,
    "out_features": ["stage4"],
}

_FLAT_PATCH_VLM = Quirk(
    "images as flattened patches with their grid; the modeling code's default "
    "mrope_section (16, 24, 24) needs head_dim 128, so the tiny one (head_dim 16) is set",
    config={"text_config.rope_parameters.mrope_section": [2, 3, 3]},
    input_kinds={"pixel_values": "flat_patches"},
    extra_inputs=("image_grid_thw",),
)
_ANYRES_VLM = Quirk(
    "any-resolution images are (tiles, channels, size, size) over grid pinpoints in multiples of the tower's size",
    config={"vision_config.image_size": 56, "image_grid_pinpoints": [[56, 56], [56, 112], [112, 56], [112, 112]]},
    input_kinds={"pixel_values": "anyres_tiles"},
)
_IMAGE_ROWS_VLM = Quirk(
    "images are (batch, images, channels, size, size); patches per side must divide by the pixel-shuffle scale factor",
    config={"vision_config.image_size": 128},
    input_kinds={"pixel_values": "image_rows"},
)
_FLAT_PATCH_IMAGES = Quirk(
    "images as rows of flattened patches with their (t, h, w) grid, which the vision path requires",
    input_kinds={"pixel_values": "flat_patches"},
    extra_inputs=("image_grid_thw",),
)
_NAFLEX_IMAGES = Quirk(
    "NaFlex images: flattened patches, their (rows, cols) grid and a patch mask",
    input_kinds={"pixel_values": "naflex_patches"},
    extra_inputs=("spatial_shapes", "pixel_attention_mask"),
)
_FRAMES_FIRST = Quirk("input features are (batch, frames, mel bins)", input_kinds={"input_features": "spectrogram"})
_HGNET_V2 = {
    "stem_channels": [3, 16, 16],
    "stage_in_channels": [16, 32, 64, 128],
    "stage_mid_channels": [16, 24, 32, 48],
    "stage_out_channels": [32, 64, 128, 256],
    "hidden_sizes": [32, 64, 128, 256],
}
_HGNET_V2_DETECTOR = Quirk(
    "the HGNetV2 backbone's stage channel lists chain and hidden_sizes repeats the outputs; the encoder's input"
    " channels are those of the backbone stages it reads",
    config={**{f"backbone_config.{k}": v for k, v in _HGNET_V2.items()}, "encoder_in_channels": [64, 128, 256]},
)
# CLVP's encoders rotate max(projection_dim // (2 x heads), 32) dims of each head: a head must be 32 wide at least
_CLVP_ROTARY = {"hidden_size": 128, "projection_dim": 256, "num_attention_heads": 4}
_CODEC_INPUT = {"input_values": "waveform_channels"}
_PER_CODEBOOK_DECODER = Quirk(
    "decoder input ids are (batch * num_codebooks, length)", input_kinds={"decoder_input_ids": "codebook_ids"}
)
_OWL = Quirk(
    "class head width (text hidden size) must equal projection_dim; 768-960 px images are slow",
    config={"projection_dim": 64, "vision_config.image_size": 96},
)

_SAPIENS2_HEAD = {
    "head_config.upsample_out_channels": [32],
    "head_config.upsample_kernel_sizes": [4],
    "head_config.use_pixel_shuffle": False,
    "head_config.conv_out_channels": [32],
    "head_config.conv_kernel_sizes": [1],
}
_SAPIENS2_DENSE_HEAD = "the default head_config has no layers (upsample/conv channel and kernel lists are None)"

_SAM2_VISION = {
    "backbone_config.hidden_size": 16,
    "backbone_config.embed_dim_per_stage": [16, 32, 64, 128],
    "backbone_config.blocks_per_stage": [1, 1, 2, 1],
    "backbone_config.global_attention_blocks": [3],
    "backbone_config.image_size": [224, 224],
    "backbone_channel_list": [128, 64, 32, 16],
    "backbone_feature_sizes": [[56, 56], [28, 28], [14, 14]],
}

_QWEN4_EXP_INDEXER = Quirk(
    "indexed-attention layers read their indexer settings from the config",
    known_failure=KnownFailure(
        "the default Qwen4ExpTextConfig puts indexed_attention layers in layer_types (every fourth) but leaves"
        " indexer_n_heads, indexer_kv_heads, indexer_head_dim, indexer_budget and indexer_compress_ratio None, so"
        " Qwen4ExpTextQSAIndexer fails to build (token_budget // compress_ratio on None) at any size; Zoo's tiny"
        " stack keeps one layer of every kind, so it meets this; a transformers default-config gap, not Zoo's",
        "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen4_exp/configuration_qwen4_exp.py",
        _dt.date(2027, 3, 1),
    ),
)


def _known(reason: str, link: str) -> Quirk:
    """A row that is only a known failure: its reason, where to read more, re-checked on the usual date."""
    return Quirk("a known failure, see its reason", known_failure=KnownFailure(reason, link, _dt.date(2027, 3, 1)))


_KNOWN_DEPTH_PRO = _known(
    "DepthPro scales each image by scaled_images_ratios (0.25, 0.5, 1) and cuts patch_size (384) patches"
    " from every scale, so it needs images of at least 1536 px; Zoo's tiny tier makes 224 px images and"
    " does not yet shrink patch_size with them (a Zoo gap)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/depth_pro/modeling_depth_pro.py",
)

_KNOWN_PI0 = _known(
    "PI0 needs robot-policy inputs Zoo has no generators for yet: state (batch, max_state_dim), action"
    " noise (batch, chunk_size, max_action_dim), a timestep, action_embeds for the base model and"
    " multi-camera pixel_values with a camera mask (a Zoo gap)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/pi0/modeling_pi0.py",
)

_KNOWN_GRANITE4_VISION = _known(
    "the default Granite4VisionConfig leaves deepstack_layer_map None and the model takes its len() while"
    " it is built; only a published config sets it (a transformers default-config gap)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/granite4_vision/configuration_granite4_vision.py",
)

_KNOWN_MINICPM_VISION = _known(
    "the vision tower's forward takes target_sizes (each image's patch grid) as optional but calls"
    " get_vision_nearest_position_ids on it unconditionally, so None fails; Zoo has no target_sizes"
    " generator yet (a Zoo gap beside a misleading signature)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/minicpm_ocr/modeling_minicpm_ocr.py",
)

_KNOWN_PP_OCRV5_SERVER_DET = _known(
    "PP-OCRv5 server det's default config leaves intraclass_block_config unset (None) and the neck"
    " indexes it while it is built (modeling line 51); only the published config.json defines it",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/pp_ocrv5_server_det/modeling_pp_ocrv5_server_det.py",
)

_KNOWN_EOMT_DINOV3 = _known(
    "Zoo's tiny config breaks a channel coupling of its mask upscaler (a transposed conv of 64 channels"
    " gets the 56-channel shrunk hidden states); not yet diagnosed which config key couples them (a Zoo"
    " gap)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/eomt_dinov3/modeling_eomt_dinov3.py",
)

_KNOWN_GLM_IMAGE = _known(
    "with Zoo's generated text and image inputs the forward indexes a second image grid that is not there"
    " (index 1 out of bounds for a dimension of size 1); not yet diagnosed (a Zoo gap in its image inputs)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/glm_image/modeling_glm_image.py",
)

_KNOWN_PP_DOCLAYOUT_V2 = _known(
    "Zoo's tiny config breaks the coupling of the backbone's output channels (512) and the encoder's"
    " input projection (32); the PP-DocLayout-V4 row's fix does not carry over; not yet diagnosed (a Zoo"
    " gap)",
    "https://github.com/huggingface/transformers/blob/main/src/transformers/models/pp_doclayout_v2/modeling_pp_doclayout_v2.py",
)


QUIRKS: dict[str, Quirk] = {
    # Whisper's encoder insists on 2 * max_source_positions mel frames; shrink it so inputs stay small.
    "whisper": Quirk("encoder input length must equal 2*max_source_positions", config={"max_source_positions": 64}),
    # Swin-style hierarchies need embed_dim * 2**stage divisible by the heads of each stage.
    "swin": Quirk(
        "stage widths must divide by stage heads",
        config={"embed_dim": 32, "num_heads": [2, 2, 2, 2], "depths": [1, 1, 1, 1]},
    ),
    "donut-swin": Quirk(
        "stage widths must divide by stage heads",
        config={"embed_dim": 32, "num_heads": [2, 2, 2, 2], "depths": [1, 1, 1, 1]},
    ),
    # Longformer's attention window must be even and cover the sequence in whole windows.
    # Its question-answering and multiple-choice heads otherwise put global attention on the question, found by
    # exactly three separator tokens a row; the first token global, as for classification, is given instead.
    "longformer": Quirk(
        "sequence must be a multiple of the attention window; global attention is given (on the first token)",
        config={"attention_window": [8, 8]},
        seq_lens=(16, 24),
        extra_inputs=("global_attention_mask",),
    ),
    # Reformer-like chunking and BigBird block sparsity need lengths in whole blocks.
    # ESM's default config leaves the vocabulary unset (it comes with each checkpoint).
    "esm": Quirk("default config has no vocab_size", config={"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 32}),
    "rag": Quirk(
        "its retriever (a passage index) is not part of the model: the retrieved passages and their scores are "
        "inputs, as RAG's forward takes them without a retriever",
        extra_inputs=("context_input_ids", "context_attention_mask", "doc_scores"),
    ),
    # w2v-BERT's and the wav2vec 2.0 Conformer's default configs leave the CTC vocabulary unset (wav2vec 2.0's: 32)
    "wav2vec2-bert": Quirk("default config has no vocab_size for the CTC head", config={"vocab_size": 32}),
    "wav2vec2-conformer": Quirk("default config has no vocab_size for the CTC head", config={"vocab_size": 32}),
    # DETR-like detectors default to a timm backbone; the transformers ResNet keeps them in one library.
    "detr": Quirk("default backbone is timm's", config={"backbone_config": _RESNET_BACKBONE}),
    "table-transformer": Quirk("default backbone is timm's", config={"backbone_config": _RESNET_BACKBONE}),
    # DETR's panoptic mask head reads hidden_size + encoder heads channels through GroupNorm(8) (64 + 8 heads), and
    # the backbone's last three stages below the last one as its FPN
    "DetrForSegmentation": Quirk(
        "default backbone is timm's; the mask head's d_model + encoder_attention_heads must divide by 8, and its FPN"
        " reads every backbone stage",
        config={
            "backbone_config": {**_RESNET_BACKBONE, "out_features": ["stage1", "stage2", "stage3", "stage4"]},
            "encoder_attention_heads": 8,
        },
    ),
    "conditional_detr": Quirk("default backbone is timm's", config={"backbone_config": _RESNET_BACKBONE}),
    # AST takes a (batch, frames, mel bins) spectrogram under the name input_values.
    "audio-spectrogram-transformer": Quirk(
        "input_values is a spectrogram of exactly max_length frames",
        config={"max_length": 64},
        input_kinds={"input_values": "spectrogram"},
        seq_lens=(16, 16),
    ),
    # GPT-Neo lists its attention pattern per layer group; it must add up to the shrunk depth.
    "gpt_neo": Quirk(
        "attention_types must cover num_layers",
        config={"attention_types": [[["global", "local"], 1]], "attention_layers": ["global", "local"]},
    ),
    # ViLT is a text+image model whose config has no vision sub-config: it needs pixels too.
    # ViLT samples max_image_length patches at random in its forward; -1 keeps every patch.
    "vilt": Quirk(
        "text and image inputs together; random patch sampling off",
        config={"max_image_length": -1},
        extra_inputs=("pixel_values",),
    ),
    # VITS draws noise for its latents and durations: zero noise makes the forward deterministic.
    "vits": Quirk(
        "noise in latents and durations makes outputs random", config={"noise_scale": 0.0, "noise_scale_duration": 0.0}
    ),
    # LayoutLMv3 concatenates 4 coordinate and 2 shape embeddings to the hidden size.
    # Known failures: each seen by Zoo, with why and when to look again.
    "layoutlmv2": Quirk(
        "visual backbone from detectron2",
        known_failure=KnownFailure(
            "LayoutLMv2's visual backbone is built by detectron2, which "
            "Zoo does not install (no wheels on PyPI; a C++/CUDA build)",
            "https://github.com/facebookresearch/detectron2/blob/main/INSTALL.md",
            _dt.date(2027, 3, 1),
        ),
    ),
    "GlmImageVQVAE": Quirk(
        "a VQ-VAE used through its encode/decode methods",
        known_failure=KnownFailure(
            "GlmImageVQVAE defines no forward (the GLM-Image model calls its encode and quantize methods); there is"
            " no forward pass to validate",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/glm_image/modeling_glm_image.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    "bark": Quirk(
        "a composite of three generation models",
        known_failure=KnownFailure(
            "BarkModel has no forward (generation only); its semantic, "
            "coarse and fine sub-models need validating one by one",
            "https://huggingface.co/docs/transformers/model_doc/bark",
            _dt.date(2027, 3, 1),
        ),
    ),
    "layoutlmv3": Quirk(
        "4*coordinate_size + 2*shape_size must equal hidden_size", config={"coordinate_size": 8, "shape_size": 16}
    ),
    # EfficientNet's default resolution (600 px) makes even a shrunk model take minutes on CPU.
    "efficientnet": Quirk(
        "default image_size 600 is too slow for a tiny model (shrinking caps B7's scaling coefficients)",
        config={"image_size": 64, "width_coefficient": 0.5, "hidden_dim": 640},
    ),
    "align": Quirk(
        "EfficientNet vision tower at 600 px is too slow for a tiny model", config={"vision_config.image_size": 64}
    ),
    # Qwen2-VL-style vision towers take rows of flattened patches and a (t, h, w) grid per image.
    "qwen2_vl": _FLAT_PATCH_VLM,
    "qwen2_5_vl": _FLAT_PATCH_VLM,
    "qwen3_vl": _FLAT_PATCH_VLM,
    "glm4v": _FLAT_PATCH_VLM,
    "qwen3_5": _FLAT_PATCH_VLM,
    "qwen3_5_moe": _FLAT_PATCH_VLM,
    # Pixtral's vision tower takes any size up to 1540 px; at 1540 px the text would hold 12,100 image tokens.
    "mistral3": Quirk(
        "default image size 1540 px makes thousands of image tokens", config={"vision_config.image_size": 112}
    ),
    # Mamba-2 names its SSM heads num_heads/head_dim, which the attention rules would size:
    # heads x head dim = expand x width.
    "mamba2": Quirk(
        "SSM heads x head dim must equal expand x hidden size", config={"num_heads": 8, "head_dim": 16, "n_groups": 1}
    ),
    # Gemma 3 pools the vision patches to mm_tokens_per_image tokens: its square root must divide the patches per side.
    "gemma3": Quirk(
        "image tokens per side must divide the vision patches per side (224 px / 16 = 14)",
        config={"mm_tokens_per_image": 49},
    ),
    # BLIP-2's default config has no image token (the published checkpoints set 50265): without one no
    # query embedding reaches the language model.
    "blip-2": Quirk(
        "the default config has no image_token_index; the published checkpoints use 50265",
        config={"image_token_index": 50265},
    ),
    # BLIP-2's retrieval model has no language model: its Q-Former reads the text, in the Q-Former's vocabulary, and
    # with an image token set it drops the first num_query_tokens (32) positions as image placeholders. The Q-Former
    # builds its text layers only with use_qformer_text_input, which the default config leaves off.
    "Blip2ForImageTextRetrieval": Quirk(
        "input_ids are Q-Former tokens; text without image placeholders (the default image_token_index None);"
        " the Q-Former's text layers need use_qformer_text_input (False by default)",
        config={"qformer_config.use_qformer_text_input": True},
        input_kinds={"input_ids": "qformer_input_ids"},
    ),
    # LLaVA-NeXT / OneVision tile each image over a grid of pinpoints in multiples of the tower's size:
    # a small tower (56 px, 4 x 4 patches) with pinpoints in its multiples keeps the tiling and the token count small.
    "llava_next": _ANYRES_VLM,
    "llava_next_video": _ANYRES_VLM,
    "llava_onevision": _ANYRES_VLM,
    # Mllama: tiled images with aspect-ratio ids and masks; cross-attention layers and the vision tower's
    # intermediate outputs are layer indices, which must exist in the shrunk stacks
    # (vision output = hidden x (1 + intermediates)).
    "mllama": Quirk(
        "tiled images with aspect-ratio inputs; cross-attention "
        "and intermediate-layer indices must exist after shrinking",
        config={
            "vision_config.image_size": 56,
            "vision_config.intermediate_layers_indices": [0],
            "vision_config.vision_output_dim": 128,
            "vision_config.num_global_layers": 1,
            "vision_config.attention_heads": 2,
            "text_config.cross_attention_layers": [1],
        },
        input_kinds={"pixel_values": "tiled_images"},
        extra_inputs=("aspect_ratio_ids", "aspect_ratio_mask", "cross_attention_mask"),
    ),
    # ... and its vision tower on its own (its config is the vision config)
    "mllama_vision_model": Quirk(
        "tiled images with aspect-ratio inputs; intermediate-layer indices must exist after shrinking",
        config={
            "image_size": 56,
            "intermediate_layers_indices": [0],
            "vision_output_dim": 128,
            "num_global_layers": 1,
            "attention_heads": 2,
        },
        input_kinds={"pixel_values": "tiled_images"},
        extra_inputs=("aspect_ratio_ids", "aspect_ratio_mask"),
    ),
    # Idefics3 / SmolVLM take several images a row: (batch, images, channels, size, size).
    "idefics3": _IMAGE_ROWS_VLM,
    "smolvlm": _IMAGE_ROWS_VLM,
    "modernvbert": _IMAGE_ROWS_VLM,
    "ultravbert": _IMAGE_ROWS_VLM,
    # Idefics and Idefics2 (perceiver resamplers, no pixel shuffle) also take (batch, images, channels, size, size).
    "idefics": Quirk(
        "images are (batch, images, channels, size, size); the cross-attention needs image_attention_mask, which"
        " text token sees which image",
        input_kinds={"pixel_values": "image_rows", "image_attention_mask": "text_image_mask"},
        extra_inputs=("image_attention_mask",),
    ),
    "idefics2": Quirk("images are (batch, images, channels, size, size)", input_kinds={"pixel_values": "image_rows"}),
    # SigLIP 2 (NaFlex) takes images as rows of flattened patches with their grid and a patch mask.
    "siglip2": Quirk(
        "NaFlex images: flattened patches, their (rows, cols) grid and a patch mask",
        input_kinds={"pixel_values": "naflex_patches"},
        extra_inputs=("spatial_shapes", "pixel_attention_mask"),
    ),
    "siglip2_vision_model": _NAFLEX_IMAGES,  # its vision tower on its own
    # Parakeet's conformer takes (batch, frames, mel bins) features.
    "parakeet_ctc": _FRAMES_FIRST,
    "parakeet_encoder": _FRAMES_FIRST,
    "parakeet_rnnt": _FRAMES_FIRST,
    "parakeet_tdt": _FRAMES_FIRST,
    # LASR's conformer (a linear subsampler over mel bins) and Gemma 4's audio tower (a conv stem over
    # (frames, mel bins)) read the same layout
    "lasr_encoder": _FRAMES_FIRST,
    "lasr_ctc": _FRAMES_FIRST,
    # Gemma 4's audio config names no mel bin count: the projection after its two stride-2 convs is
    # subsampling_conv_channels[0] // 4 * [1] wide, so features are subsampling_conv_channels[0] (128) bins wide
    "gemma4_audio": Quirk(
        "input_features are (batch, frames, 128 mel bins); the config has no num_mel_bins, the subsampler's"
        " projection assumes subsampling_conv_channels[0] (128) bins",
        config={"num_mel_bins": 128},
        input_kinds={"input_features": "spectrogram"},
    ),
    # speech models over a Parakeet/FastConformer encoder (its config as encoder_config) read the same features
    "canary": _FRAMES_FIRST,
    "cohere_asr": _FRAMES_FIRST,
    "nemotron3_5_asr": _FRAMES_FIRST,
    # Nemotron 3.5 Transcribe runs its recognizer and diarizer on one (batch, frames, mel bins) spectrogram, in whole
    # subsampling steps (8 frames) with its frame mask
    "nemotron3_5_transcribe_audio": Quirk(
        "input_features are (batch, frames, mel bins), a multiple of subsampling_factor (8) frames, with their mask",
        input_kinds={"input_features": "spectrogram", "input_features_mask": "spectrogram_mask"},
        seq_lens=(16, 12),
    ),
    # Speech2Text's convolutional subsampler reads (batch, frames, input_feat_per_channel) filter banks.
    "speech_to_text": _FRAMES_FIRST,
    # UnivNet's vocoder reads (batch, frames, mel bins) and draws a noise sequence the same length unless given one
    "univnet": Quirk(
        "input_features are (batch, frames, mel bins); the noise sequence is an input, else drawn at random",
        input_kinds={"input_features": "spectrogram"},
        extra_inputs=("noise_sequence",),
    ),
    # FastConformer-style encoders that subsample (batch, frames, mel bins) themselves (a conv stem, frame stacking)
    "nemotron_asr_streaming": _FRAMES_FIRST,
    "nemotron3_diarization_audio": _FRAMES_FIRST,
    # ... and the models whose top config is the encoder itself or wraps it (their model_type is not the sub-config's)
    "nemotron3_diarization": _FRAMES_FIRST,
    "nemotron_asr_streaming_encoder": _FRAMES_FIRST,
    "nemotron3_5_transcribe_asr_audio": _FRAMES_FIRST,
    # Granite Speech 5's encoder reads its feature extractor's output, four mel frames stacked a step
    # (input_linear: num_mel_bins x 4 wide).
    "granite_speech5_ctc": Quirk(
        "input_features are (batch, steps, 4 x num_mel_bins): four stacked mel frames a step",
        input_kinds={"input_features": "mel_frames_by_four"},
    ),
    "granite_speech5_encoder": Quirk(
        "input_features are (batch, steps, 4 x num_mel_bins): four stacked mel frames a step",
        input_kinds={"input_features": "mel_frames_by_four"},
    ),
    # Video models take (batch, frames, channels, size, size) under the name pixel_values.
    "videomae": Quirk(
        "pixel_values is a video clip (batch, frames, channels, size, "
        "size); 16 frames of 224 px are slow, 4 of 64 px keep the tubelets",
        config={"num_frames": 4, "image_size": 64},
        input_kinds={"pixel_values": "pixel_values_videos"},
    ),
    "timesformer": Quirk(
        "8 frames of 224 px are slow; 4 of 64 px keep the divided space-time attention",
        config={"num_frames": 4, "image_size": 64},
    ),
    "vivit": Quirk(
        "32 frames of 224 px are slow; 4 of 64 px keep whole tubelets (2 x 16 x 16)",
        config={"num_frames": 4, "image_size": 64},
    ),
    "xclip": Quirk(
        "pixel_values is a video clip (batch, frames, channels, size, size)",
        input_kinds={"pixel_values": "pixel_values_videos"},
    ),
    # ViTPose's backbone takes 256 x 192 person crops: a non-square image size, kept non-square and small.
    "vitpose": Quirk(
        "pose crops are non-square (height, width); the backbone checks the size",
        config={"backbone_config.image_size": [64, 48]},
        input_kinds={"pixel_values": "pixels_hw"},
    ),
    # BLIP's VQA head decodes an answer: without decoder ids its forward refuses to run.
    "BlipForQuestionAnswering": Quirk(
        "the answer decoder needs decoder_input_ids", extra_inputs=("decoder_input_ids",)
    ),
    # CLVP conditions its speech decoder on a reference voice's mel spectrogram, optional in the signature only; the
    # decoder's argmax tokens (8194 of them) feed the speech encoder, whose default vocabulary has 256 (the published
    # checkpoint's has the decoder's); the encoders' rotary embedding needs heads at least 32 wide.
    "ClvpModelForConditionalGeneration": Quirk(
        "the conditioning encoder reads input_features (a mel spectrogram), optional in the signature; the speech"
        " encoder reads the decoder's tokens, so its vocabulary is the decoder's",
        config={
            "speech_config.vocab_size": 8194,
            **{f"{tower}.{k}": v for tower in ("text_config", "speech_config") for k, v in _CLVP_ROTARY.items()},
            "projection_dim": 256,
        },
        extra_inputs=("input_features",),
    ),
    # Audio codecs take (batch, channels, samples), not (batch, samples).
    "encodec": Quirk(
        "codec input is (batch, channels, samples); codebook_dim is the hidden size",
        config={"codebook_dim": 64},
        input_kinds=_CODEC_INPUT,
    ),
    "dac": Quirk("codec input is (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    # Perception Encoder Audio reads waveforms through a DAC encoder: (batch, channels, samples) as well.
    "pe_audio": Quirk("the DAC audio encoder reads (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    "pe_audio_encoder": Quirk("the DAC audio encoder reads (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    "pocket_tts_audio_tokenizer_encoder": Quirk("codec input is (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    "pocket_tts_audio_tokenizer": Quirk("codec input is (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    # VibeVoice's acoustic tokenizer encoder takes the waveform under the name hidden_states.
    "vibevoice_acoustic_tokenizer_encoder": Quirk(
        "hidden_states is the waveform, (batch, channels, samples)", input_kinds={"hidden_states": "waveform_channels"}
    ),
    # ... its decoder reads the latents under that name, (batch, hidden_size, frames); the whole tokenizer adds
    # Gaussian noise to the latents (a sigma-VAE, scale vae_std): zero noise makes the forward deterministic
    "vibevoice_acoustic_tokenizer_decoder": Quirk(
        "hidden_states is the latents, (batch, hidden_size, frames)", input_kinds={"hidden_states": "latents"}
    ),
    "vibevoice_acoustic_tokenizer": Quirk(
        "codec input is (batch, channels, samples); the latents get noise of scale vae_std, random in the forward",
        config={"vae_std": 0.0},
        input_kinds=_CODEC_INPUT,
    ),
    # Muse Spark's audio encoder reads whole frames of 1920 samples (its feature extractor pads to them): 400 samples
    # a token, 24 and 48 tokens.
    "muse_spark_audio": Quirk("input_values must be a multiple of 1920 samples", seq_lens=(24, 48)),
    "mimi": Quirk("codec input is (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    "mimi_encoder": Quirk("codec input is (batch, channels, samples)", input_kinds=_CODEC_INPUT),
    # X-Codec's codebooks are as wide as its acoustic and semantic towers together (64 + 64 shrunk); the default
    # config spells that sum out (1024) before shrinking
    "xcodec": Quirk(
        "codec input is (batch, channels, samples), one channel; codebook_dim is acoustic + semantic hidden_size",
        config={"codebook_dim": 128},
        input_kinds=_CODEC_INPUT,
    ),
    # X-Codec 2 encodes the waveform (batch, channels, samples) beside its semantic tower's stacked filter banks
    "xcodec2": Quirk(
        "codec input is (batch, channels, samples), one channel; the acoustic and semantic frames are concatenated,"
        " so the waveform holds one hop_length of samples per feature frame; quantization_dim is hidden_size +"
        " semantic hidden_size (64 + 64 shrunk)",
        config={"quantization_dim": 128},
        input_kinds={"input_values": "waveform_per_frame"},
    ),
    # NeuCodec encodes the waveform (batch, channels, samples) beside its semantic tower's w2v-BERT features; the
    # quantizer reads both concatenated: quantization_dim = hidden_size + the semantic tower's (64 + 64 shrunk)
    "neucodec": Quirk(
        "codec input is (batch, channels, samples); quantization_dim is hidden_size + semantic hidden_size",
        config={"quantization_dim": 128},
        input_kinds=_CODEC_INPUT,
    ),
    # MusicGen's decoder reads one row of codes per codebook.
    "musicgen": _PER_CODEBOOK_DECODER,
    "musicgen_melody": _PER_CODEBOOK_DECODER,
    # ... and the decoder alone (MusicgenModel, MusicgenForCausalLM) takes them as its input ids.
    "musicgen_decoder": Quirk(
        "input ids are (batch * num_codebooks, length)", input_kinds={"input_ids": "codebook_ids"}
    ),
    "musicgen_melody_decoder": Quirk(
        "input ids are (batch * num_codebooks, length)", input_kinds={"input_ids": "codebook_ids"}
    ),
    # TVP's forward takes pixel_values as optional but always reads them: a clip of frames.
    "tvp": Quirk(
        "pixel_values (a clip: batch, frames, channels, size, size) are optional in the signature but required; the"
        " visual prompt is max_img_size square (448: the frames are that size), made 224 with a short clip",
        config={"max_img_size": 224, "num_frames": 4},
        input_kinds={"pixel_values": "pixel_values_videos"},
        extra_inputs=("pixel_values",),
        known_failure=KnownFailure(
            "TvpVisualInputEmbedding.add_2d_positional_embeddings views the (width, hidden) column position embeddings"
            " as (batch_size, 1, width, hidden), which fails for every batch of more than one clip (shape"
            " [2, 1, 3, 64] is invalid for input of size 192); a transformers bug, not Zoo's to fix",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/tvp/modeling_tvp.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    # SpeechT5's speech decoder reads the previous mel frames (decoder_input_values), optional in the signature only;
    # the base model has no pre-nets: both its encoder and its decoder read (batch, length, hidden size) embeddings.
    "speecht5": Quirk(
        "the speech decoder needs decoder_input_values (mel frames), optional in the signature",
        extra_inputs=("decoder_input_values",),
    ),
    "SpeechT5Model": Quirk(
        "no pre-nets: input_values and decoder_input_values are (batch, length, hidden size) embeddings",
        input_kinds={"input_values": "inputs_embeds", "decoder_input_values": "inputs_embeds"},
        extra_inputs=("decoder_input_values",),
    ),
    # Kyutai's speech-to-text LM reads a text token and one audio code per codebook at each step, summed embeddings.
    "kyutai_speech_to_text": Quirk(
        "input_ids are (batch, length, 1 + num_codebooks): a text token, then one code per codebook",
        input_kinds={"input_ids": "text_and_codes"},
    ),
    # Dia's decoder reads one audio code per channel at each step.
    "dia": Quirk(
        "decoder input ids are (batch, length, channels); the decoder's cross-attention sizes (cross_*) name the"
        " encoder's width and heads, which the shrinking rules do not know",
        config={
            "decoder_config.cross_hidden_size": 64,
            "decoder_config.cross_num_attention_heads": 4,
            "decoder_config.cross_num_key_value_heads": 4,
            "decoder_config.cross_head_dim": 16,
        },
        input_kinds={"decoder_input_ids": "channel_codes"},
    ),
    # DBRX's attention reads attn_config.rope_theta, which its default attention config does not define, and clamps
    # q/k/v to clip_qkv unconditionally (None, the default, fails): the released checkpoints' 8.
    "dbrx": Quirk(
        "the default attention config has no rope_theta, and clip_qkv None breaks the unconditional clamp",
        config={"attn_config.rope_theta": 10000.0, "attn_config.clip_qkv": 8.0},
    ),
    # LFM2-MoE's layers index layer_types, which its default config leaves None; one dense layer keeps a MoE one.
    "lfm2_moe": Quirk(
        "the default config leaves layer_types None (the layers index it); the first num_dense_layers are dense",
        config={"layer_types": ["conv", "full_attention"], "num_dense_layers": 1},
    ),
    # Pixtral vision towers (as in mistral3): at the default 1540 px the text would hold 12,100 image tokens.
    "mistral_large4": Quirk(
        "default image size 1540 px makes thousands of image tokens", config={"vision_config.image_size": 112}
    ),
    "lighton_ocr": Quirk(
        "default image size 1540 px makes thousands of image tokens", config={"vision_config.image_size": 112}
    ),
    # T5Gemma 2's encoder reads text_config.dropout_rate, which only the encoder-decoder config sets on it.
    "t5gemma2_encoder": Quirk(
        "the text config's dropout_rate is set by the parent config only; image tokens per side must divide the"
        " vision patches per side (224 px / 16 = 14), as for Gemma 3",
        config={"text_config.dropout_rate": 0.0, "mm_tokens_per_image": 49},
    ),
    # Voxtral Realtime's text decoder alone: its layers scale by a time conditioning the parent model computes.
    "VoxtralRealtimeTextModel": Quirk(
        "the decoder layers need t_cond, passed in by VoxtralRealtimeModel",
        known_failure=KnownFailure(
            "VoxtralRealtimeTextModel's decoder layers multiply by ada_rms_norm(t_cond), a time-conditioning"
            " embedding that only VoxtralRealtimeModel computes and passes through **kwargs; on its own (an internal"
            " class transformers does not export) t_cond is None and the first layer fails",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/voxtral_realtime/"
            "modeling_voxtral_realtime.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    # X-MOD's multiple-choice head repeats lang_ids batch x choices times: only one shared language id fits.
    "XmodForMultipleChoice": Quirk(
        "lang_ids are repeated batch x choices times",
        known_failure=KnownFailure(
            "XmodForMultipleChoice.forward flattens lang_ids with lang_ids.repeat(batch * num_choices), so a"
            " per-example lang_ids (batch,) becomes batch^2 x choices ids and the adapter mask no longer matches"
            " the hidden states; a transformers bug (its docstring says (batch, choices, seq)), not Zoo's to fix",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/xmod/modeling_xmod.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    # Qwen4-Exp's default config has indexed-attention layers but leaves their indexer unset.
    "qwen4_exp_text": _QWEN4_EXP_INDEXER,
    "qwen4_exp": _QWEN4_EXP_INDEXER,
    # failures not fixed yet, each with its reason (the class census lists them)
    "DepthProModel": _KNOWN_DEPTH_PRO,
    "DepthProForDepthEstimation": _KNOWN_DEPTH_PRO,
    "PI0Model": _KNOWN_PI0,
    "PI0ForConditionalGeneration": _KNOWN_PI0,
    "Granite4VisionModel": _KNOWN_GRANITE4_VISION,
    "Granite4VisionForConditionalGeneration": _KNOWN_GRANITE4_VISION,
    "MiniCPMOcrVisionModel": _KNOWN_MINICPM_VISION,
    "MiniCPMV4_7VisionModel": _KNOWN_MINICPM_VISION,
    "PPOCRV5ServerDetForObjectDetection": _KNOWN_PP_OCRV5_SERVER_DET,
    "EomtDinov3ForUniversalSegmentation": _KNOWN_EOMT_DINOV3,
    "GlmImageModel": _KNOWN_GLM_IMAGE,
    "PPDocLayoutV2ForObjectDetection": _KNOWN_PP_DOCLAYOUT_V2,
    # T5Gemma's encoder-only class refuses the default (encoder-decoder) config.
    "T5GemmaEncoderModel": Quirk(
        "the encoder alone needs is_encoder_decoder off", config={"is_encoder_decoder": False}
    ),
    # OWL-ViT/OWLv2's class head compares image embeddings of the text width with projected text queries.
    "owlvit": _OWL,
    "owlv2": _OWL,
    # SAM's vision neck hands the mask decoder embeddings of the decoder's width.
    "sam": Quirk(
        "vision output channels (and half of them as positional "
        "features) must match the prompt encoder and mask decoder width",
        config={"vision_config.output_channels": 64, "vision_config.num_pos_feats": 32},
    ),
    # SAM-HQ as SAM (its HQ decoder's vit_dim follows the vision hidden size by the generic width references).
    "sam_hq": Quirk(
        "vision output channels (and half of them as positional features) must match the mask decoder width",
        config={"vision_config.output_channels": 64, "vision_config.num_pos_feats": 32},
    ),
    # DeepSeek's multi-head latent attention has its own head and rank sizes; rotary runs on qk_rope_head_dim.
    "deepseek_v3": Quirk(
        "latent attention: its own ranks and head dims, one key/value head per query head, expert groups",
        native_for_custom_code="transformers' DeepSeek-V3 classes are a port of deepseek-ai's modeling_deepseek.py "
        "for the V3 and R1 checkpoints, which load in them",
        config={
            "kv_lora_rank": 32,
            "q_lora_rank": 32,
            "qk_rope_head_dim": 16,
            "qk_nope_head_dim": 16,
            "qk_head_dim": 32,
            "v_head_dim": 16,
            "head_dim": 16,
            "n_group": 1,
            "topk_group": 1,
            "num_key_value_heads": 4,
        },
    ),
    "big_bird": Quirk("block sparse attention needs whole blocks", config={"attention_type": "original_full"}),
    # Custom-code repos whose architecture transformers has ported from their own code (see Quirk).
    "phi3": Quirk(
        "custom-code repos of a ported architecture",
        native_for_custom_code="transformers' Phi-3 classes are Microsoft's Phi-3 code, merged upstream; the "
        "Phi-3, Phi-3.5 and Phi-4-mini checkpoints load in them",
    ),
    "deepseek_v2": Quirk(
        "custom-code repos of a ported architecture",
        native_for_custom_code="transformers' DeepSeek-V2 classes are a port of deepseek-ai's modeling_deepseek.py "
        "for the V2 and Coder-V2 checkpoints, which load in them",
    ),
    "nomic_bert": Quirk(
        "custom-code repos of a ported architecture",
        native_for_custom_code="transformers' NomicBert classes are a port of nomic-ai's NomicBertModel (its docs "
        "checkpoint is nomic-ai/nomic-embed-text-v1.5, and its weight conversion renames that code's Wqkv, fc11/fc12 "
        "and emb_ln); the sizes nomic's config names its own way agree with it, and its MoE layers are not ported",
        # nomic's NomicBertConfig (contrastors' configuration_hf_nomic_bert.py, a GPT2Config) has defaults
        # of its own: a repo relying on one the port does not share is refused
        custom_code_agree=(
            ("n_embd", "hidden_size"),
            ("n_layer", "num_hidden_layers"),
            ("n_head", "num_attention_heads"),
            ("n_inner", "intermediate_size"),  # None in nomic's code means 4 x n_embd
            ("rotary_emb_base", "rope_parameters.rope_theta"),
            ("layer_norm_epsilon", "layer_norm_eps"),
        ),
        custom_code_fixed=(
            ("moe_every_n_layers", 0, 0),  # nomic-embed-text-v2-moe's expert layers
            ("num_experts", 0, 0),
            ("rotary_emb_fraction", 1.0, 0.0),  # rotary over the whole head
            ("rotary_emb_interleaved", False, False),
            ("rotary_scaling_factor", None, None),  # no dynamic NTK scaling
            ("activation_function", "swiglu", "gelu_new"),  # the gated MLP (fc11, fc12)
            ("prenorm", False, False),  # post-norm layers, as BERT
            ("qkv_proj_bias", False, True),  # the port's projections have no biases
            ("mlp_fc1_bias", False, True),
            ("mlp_fc2_bias", False, True),
            ("use_rms_norm", False, False),
            ("causal", False, False),
        ),
    ),
    "falcon": Quirk(
        "custom-code repos of a ported architecture",
        native_for_custom_code="transformers' Falcon classes replaced the RefinedWeb code of tiiuae's repos, "
        "whose checkpoints load in them",
    ),
    # BEiT's default config exposes its last layer only; the UperNet segmentation head reads four
    # (the published ADE20k checkpoints expose layers 3, 5, 7, 11 of 12).
    "BeitForSemanticSegmentation": Quirk(
        "the segmentation head takes four backbone layers; the default config exposes one",
        config={
            "num_hidden_layers": 4,
            "out_indices": [1, 2, 3, 4],
            "out_features": ["stage1", "stage2", "stage3", "stage4"],
            "stage_names": ["stem", "stage1", "stage2", "stage3", "stage4"],
        },
    ),
    # InstructBLIP's default config, like BLIP-2's, has no image token (its OPT text model's vocabulary holds 50265).
    "instructblip": Quirk(
        "the default config has no image_token_index; without one no query embedding reaches the language model",
        config={"image_token_index": 50265},
    ),
    # ShieldGemma 2 is Gemma 3 underneath: its pooled image tokens per side must divide the patches per side.
    "shieldgemma2": Quirk(
        "image tokens per side must divide the vision patches per side (224 px / 16 = 14)",
        config={"mm_tokens_per_image": 49},
    ),
    # Perceiver's text heads read token ids under the name ``inputs`` (its image heads read pixels there).
    "PerceiverForMaskedLM": Quirk("inputs are token ids", input_kinds={"inputs": "input_ids"}),
    "PerceiverForSequenceClassification": Quirk("inputs are token ids", input_kinds={"inputs": "input_ids"}),
    # Perceiver's conv-processing image head feeds its cross-attention 64 conv channels + 258 Fourier position
    # features (322, which the default 8 cross-attention heads do not divide; the published checkpoint has 1 head).
    "PerceiverForImageClassificationConvProcessing": Quirk(
        "the cross-attention reads 322 channels (64 conv + 258 position features): one head, as published",
        config={"num_cross_attention_heads": 1, "d_latents": 64, "num_self_attends_per_block": 2},
        input_kinds={"inputs": "pixel_values"},
    ),
    # ... its Fourier head reads the 3 pixel channels + 258 Fourier position features (261), the learned-position head
    # pixels under ``inputs`` too.
    "PerceiverForImageClassificationFourier": Quirk(
        "the cross-attention reads 261 channels (3 pixel + 258 position features): one head, as published",
        config={"num_cross_attention_heads": 1, "d_latents": 64, "num_self_attends_per_block": 2},
        input_kinds={"inputs": "pixel_values"},
    ),
    "PerceiverForImageClassificationLearned": Quirk("inputs are pixels", input_kinds={"inputs": "pixel_values"}),
    # HGNetV2 sizes its stages by their own in/mid/out channel lists; the classifier reads hidden_sizes.
    "hgnet_v2": Quirk(
        "stage channel lists chain (stem out = first stage in, stage out = next in); hidden_sizes repeats the outputs",
        config=_HGNET_V2,
    ),
    # DETR-likes over an HGNetV2 backbone (D-FINE, DEIMv2, PP-DocLayoutV3): the backbone shrunk as above, and the
    # encoder reading the channels of the stages it takes (stages 2-4).
    "d_fine": _HGNET_V2_DETECTOR,
    "deimv2": _HGNET_V2_DETECTOR,
    "pp_doclayout_v4": _HGNET_V2_DETECTOR,
    # PP-DocLayoutV3's mask head also reads the first stage's output (x4_feat_dim channels).
    "pp_doclayout_v3": Quirk(
        _HGNET_V2_DETECTOR.reason + "; the mask head reads the first stage's output channels (x4_feat_dim)",
        config={**_HGNET_V2_DETECTOR.config, "x4_feat_dim": _HGNET_V2["stage_out_channels"][0]},
    ),
    # SAM 2's Hiera backbone: hidden_size is the first stage's width, global attention blocks are indices
    # into all the stages' blocks, and 1024 px images make a tiny model slow.
    "sam2_hiera_det_model": Quirk(
        "hidden_size must equal the first stage width; global-attention block indices must exist after shrinking",
        config={
            "hidden_size": 16,
            "embed_dim_per_stage": [16, 32, 64, 128],
            "blocks_per_stage": [1, 1, 2, 1],
            "global_attention_blocks": [3],
            "image_size": [256, 256],
        },
    ),
    # ... the same backbone nested in SAM 2's vision tower, whose neck reads each stage's width (last first) and
    # feature map size (the generated 224 px images: 56, 28, 14 px maps).
    "sam2_vision_model": Quirk(
        "the Hiera backbone as above; the FPN neck's channel list and feature sizes follow its stages",
        config=_SAM2_VISION,
    ),
    "sam2": Quirk(
        "the vision tower as above; the prompt encoder reads the same image size",
        config={
            **{f"vision_config.{k}": v for k, v in _SAM2_VISION.items()},
            "prompt_encoder_config.image_size": 224,
        },
    ),
    # LW-DETR's ViT backbone cuts the patch grid into num_windows_side x num_windows_side windows: the generated
    # 224 px images make 14 x 14 patches, which 4 a side do not divide; 2 a side (7 x 7 windows) do. Its default
    # config has no projector scales (no feature level for the decoder): one, at scale 1, as the small checkpoints.
    "lw_detr": Quirk(
        "the patch grid (14 x 14 at 224 px) must split into whole windows, num_windows_side a side; the default"
        " projector_scale_factors is empty (no feature levels)",
        config={
            "backbone_config.num_windows_side": 2,
            "backbone_config.num_windows": 4,
            "projector_scale_factors": [1.0],
            # what the config derives from the scales when built, which a stored dict's own values override
            "num_feature_levels": 1,
            "projector_in_channels": [64],
            "projector_out_channels": 64,
            "num_queries": 64,  # the top proposals of 196 feature positions (300 by default)
        },
    ),
    # Nemotron 3 Omni's default config leaves the image placeholder token unset (each checkpoint sets its own); a
    # small id inside the tiny vocabulary stands in.
    "nemotron_h_omni": Quirk(
        "image_token_id is None in the default config, so no text position receives the image embeddings",
        config={"image_token_id": 10},
    ),
    # InstructBLIP Video puts num_query_tokens embeddings per frame where its video tokens are.
    "instructblipvideo": Quirk(
        "pixel_values is a video clip (batch, frames, channels, size, size), with video placeholder tokens",
        input_kinds={"pixel_values": "pixel_values_videos"},
        known_failure=KnownFailure(
            "the default config has no video_token_index, and inputs get image placeholders only (one per query"
            " token per frame would be needed), so no video embedding reaches the language model",
            "https://huggingface.co/docs/transformers/model_doc/instructblipvideo",
            _dt.date(2027, 3, 1),
        ),
    ),
    # VLMs over NaFlex (LFM2-VL: a SigLIP 2 tower) or flat-patch towers (LFM3-VL, MiniMax-M3-VL) take their images
    # the way their towers do; their vision paths require the grid (and mask) with the pixels.
    "lfm2_vl": _NAFLEX_IMAGES,
    "lfm3_vl": _FLAT_PATCH_IMAGES,
    "minimax_m3_vl": _FLAT_PATCH_IMAGES,
    # LiLT's layout stream concatenates six position embeddings of hidden_size // 6 each.
    "lilt": Quirk(
        "hidden_size must divide by 6 (six layout embeddings); the layout stream reads each token's box",
        config={"hidden_size": 96},
        extra_inputs=("bbox",),
    ),
    # BROS embeds each token's box (its forward refuses to run without one), as fractions of the page; its config
    # derives the box embedding widths from the width and heads in __post_init__, and the derived values saved in
    # the unshrunk dict would win over the recomputed ones: set for the tiny width (64) and heads (4).
    "bros": Quirk(
        "bbox is required, as (x0, y0, x1, y1) fractions of the page; the box embedding widths are derived from"
        " hidden_size and the heads",
        config={"dim_bbox_sinusoid_emb_2d": 16, "dim_bbox_sinusoid_emb_1d": 2, "dim_bbox_projection": 16},
        input_kinds={"bbox": "unit_boxes"},
        extra_inputs=("bbox",),
    ),
    # The Perceiver base model has no preprocessor: its inputs are embeddings of d_model channels.
    "PerceiverModel": Quirk("inputs are (batch, length, d_model) embeddings", input_kinds={"inputs": "inputs_embeds"}),
    # UDOP's relative position biases read each token's box, as fractions of the page.
    "udop": Quirk(
        "bbox is required, as (x0, y0, x1, y1) fractions of the page",
        input_kinds={"bbox": "unit_boxes"},
        extra_inputs=("bbox",),
    ),
    # Moonshine Streaming's decoder reads num_key_value_heads, which its config class does not declare (the
    # published checkpoints' config.json carries it): the default config needs it spelled out, as many as the query
    # heads (its cross-attention splits the queries by it).
    "moonshine_streaming": Quirk(
        "the decoder reads num_key_value_heads, which the default config lacks; cross-attention splits queries by it",
        config={"num_key_value_heads": 4},
    ),
    # CLAP's HTS-AT audio tower is a Swin over the spectrogram as a one-channel image of spec_size pixels; its output
    # width (patch embed width x 2**(stages - 1)) is the audio hidden_size the projection reads.
    "clap": Quirk(
        "audio features are a (batch, 1, frames, mel bins) image of at most spec_size; the tower's last stage width"
        " (patch_embeds_hidden_size x 8) must equal the audio hidden_size; windows must fit the last stage",
        config={
            "audio_config.patch_embeds_hidden_size": 16,
            "audio_config.hidden_size": 128,
            "audio_config.num_attention_heads": [2, 2, 4, 4],
            "audio_config.spec_size": 128,
            "audio_config.window_size": 4,
        },
        input_kinds={"input_features": "spectrogram_image"},
        extra_inputs=("input_features",),
    ),
    # Qwen3-Omni's thinker finds each image by the vision start token before it (3-D rotary positions), which its
    # config class does not declare (the talker's does: 151652, and Qwen's vision end token is the next id).
    "qwen3_omni_moe_thinker": Quirk(
        "the rotary position index reads vision_start_token_id, which the thinker's default config lacks",
        config={"vision_start_token_id": 151652, "vision_end_token_id": 151653},
    ),
    # Qwen2.5-Omni's thinker: the same (its Qwen2.5-VL vision start and end tokens, 151652 and 151653)
    "qwen2_5_omni_thinker": Quirk(
        "the rotary position index reads vision_start_token_id, which the thinker's default config lacks",
        config={"vision_start_token_id": 151652, "vision_end_token_id": 151653},
    ),
    # Fun-ASR-Nano's audio adaptor narrows to a quarter of the text width (its config validator checks it).
    "fun_asr_nano": Quirk(
        "the adaptor's intermediate size must be a quarter of the text hidden size",
        config={"adaptor_config.intermediate_size": 16},
    ),
    "molmo2": Quirk(
        "images are the processor's crops with pooling indices and crop grids",
        known_failure=KnownFailure(
            "Molmo2's vision path (get_image_features) requires the processor's image_token_pooling indices and"
            " image_grids (crop layouts) with its crops, which Zoo does not generate",
            "https://huggingface.co/docs/transformers/model_doc/molmo2",
            _dt.date(2027, 3, 1),
        ),
    ),
    # Llama 4's vision adapter pixel-shuffles the patches (ratio 0.5: 4x the width) into an MLP that reads
    # intermediate_size channels and hands projector_output_dim to the projector, which reads vision_output_dim.
    "llama4": Quirk(
        "the vision adapter's input width (intermediate_size) must be hidden_size / pixel_shuffle_ratio**2, and its"
        " output (projector_output_dim) the projector's input (vision_output_dim); 448 px images are slow",
        config={
            "vision_config.intermediate_size": 256,
            "vision_config.projector_input_dim": 64,
            "vision_config.projector_output_dim": 64,
            "vision_config.vision_output_dim": 64,
            "vision_config.image_size": 112,
        },
    ),
    "llama4_vision_model": Quirk(
        "the vision adapter's input width (intermediate_size) must be hidden_size / pixel_shuffle_ratio**2, and its"
        " output (projector_output_dim) its own; 448 px images are slow",
        config={
            "intermediate_size": 256,
            "projector_input_dim": 64,
            "projector_output_dim": 64,
            "vision_output_dim": 64,
            "image_size": 112,
        },
    ),
    # Granite Docling takes each row's image as tiles (batch, tiles, channels, size, size) with a mask of the real
    # tiles, which its vision path requires; 512 px tiles are slow, 128 px keep whole pixel-shuffle blocks.
    "granite_docling": Quirk(
        "images are (batch, tiles, channels, size, size) with pixel_attention_mask marking the real tiles",
        config={"vision_config.image_size": 128},
        input_kinds={"pixel_values": "image_rows", "pixel_attention_mask": "tile_mask"},
        extra_inputs=("pixel_attention_mask",),
    ),
    # Step 3.7 builds a sliding-window mask for every forward, whether or not a layer slides; the default config
    # (all full attention) leaves the window unset (the published checkpoints set it).
    "step3p7": Quirk(
        "the attention masks need a sliding_window, which the default config leaves unset",
        config={"text_config.sliding_window": 8},
    ),
    # Inkling's vision tower folds raw patch cubes (frames, patch, patch, channels) into one embedding each.
    "inkling_mm_model": Quirk(
        "pixel_values are raw patch cubes (patches, temporal_patch_size, patch, patch, channels), one embedding each",
        input_kinds={"pixel_values": "patch_cubes"},
    ),
    # GLM-4V-MoE's and GLM-Image's text models default mrope_section to (8, 12, 12) in their modeling code (half of a
    # 128-wide rotary head, GLM-4V-MoE's a 0.5 share of it): the tiny heads (16 wide) need their own.
    "glm4v_moe_text": Quirk(
        "the modeling code's default mrope_section (8, 12, 12) needs head_dim 128; tiny rotary dims are 16 x 0.5",
        config={"rope_parameters.mrope_section": [2, 1, 1]},
    ),
    "glm_image_text": Quirk(
        "the modeling code's default mrope_section (8, 12, 12) needs head_dim 64; the tiny head_dim is 16",
        config={"rope_parameters.mrope_section": [2, 3, 3]},
    ),
    # xLSTM names its width twice (hidden_size, embedding_dim) and its depth twice (num_hidden_layers, num_blocks);
    # the modeling code reads the second names.
    "xlstm": Quirk(
        "embedding_dim and num_blocks repeat hidden_size and num_hidden_layers, and the blocks are built from them",
        config={"embedding_dim": 64, "num_blocks": 2},
    ),
    # Voxtral Realtime adds one audio embedding to each text token: the features are audio_length_per_tok mel frames a
    # token, and the forward requires them.
    "voxtral_realtime": Quirk(
        "input_features are required, audio_length_per_tok mel frames per text token",
        input_kinds={"input_features": "features_per_token"},
        extra_inputs=("input_features",),
    ),
    # Hiera's default config leaves the MAE decoder unsized (decoder_hidden_size, depth and heads all None): only
    # HieraForPreTraining builds that decoder, and it cannot without them; these are small ones.
    "hiera": Quirk(
        "the pre-training decoder's width, depth and heads default to None",
        config={"decoder_hidden_size": 32, "decoder_depth": 1, "decoder_num_heads": 2},
    ),
    # SegGPT stacks the prompt image above the input image (and the prompt mask above itself) before patching: the
    # configured image_size (896 x 448) is the stacked size, each input half its height. Its decoder reads the layers of
    # intermediate_hidden_state_indices (5, 11, 17, 23 of 24), all after the merge_index (2) layer where prompt and
    # input merge: in the tiny stack, a merge after the first layer and the second read.
    "seggpt": Quirk(
        "prompt and input images are stacked in height to image_size, so each is half as high; the decoder's"
        " intermediate layers must exist in the shrunk stack",
        config={"merge_index": 0, "intermediate_hidden_state_indices": [1]},
        input_kinds={
            "pixel_values": "half_height",
            "prompt_pixel_values": "half_height",
            "prompt_masks": "half_height",
        },
    ),
    "sam2_video": Quirk(
        "a stateful video tracker",
        known_failure=KnownFailure(
            "Sam2VideoModel's forward runs one frame of a tracking session: it requires a Sam2VideoInferenceSession"
            " (built by the processor from a video, with prompts) and a frame index, not tensors Zoo can generate",
            "https://huggingface.co/docs/transformers/model_doc/sam2_video",
            _dt.date(2027, 3, 1),
        ),
    ),
    "sam3_tracker_video": Quirk(
        "a stateful video tracker",
        known_failure=KnownFailure(
            "Sam3TrackerVideoModel's forward runs one frame of a tracking session: it requires a"
            " Sam3TrackerVideoInferenceSession (built by the processor from a video, with prompts) and a frame index,"
            " not tensors Zoo can generate",
            "https://huggingface.co/docs/transformers/model_doc/sam3_tracker_video",
            _dt.date(2027, 3, 1),
        ),
    ),
    "sam3_video": Quirk(
        "a stateful video tracker",
        known_failure=KnownFailure(
            "Sam3VideoModel's forward runs one frame of a tracking session: it requires a Sam3VideoInferenceSession"
            " (built by the processor from a video, with prompts) and a frame index, not tensors Zoo can generate",
            "https://huggingface.co/docs/transformers/model_doc/sam3_video",
            _dt.date(2027, 3, 1),
        ),
    ),
    "edgetam_video": Quirk(
        "a stateful video tracker",
        known_failure=KnownFailure(
            "EdgeTamVideoModel's forward runs one frame of a tracking session: it requires an"
            " EdgeTamVideoInferenceSession (built by the processor from a video, with prompts) and a frame index,"
            " not tensors Zoo can generate",
            "https://huggingface.co/docs/transformers/model_doc/edgetam_video",
            _dt.date(2027, 3, 1),
        ),
    ),
    # Aya Vision pixel-shuffles the vision patches by downsample_factor 2: the patches per side must be even
    # (384 px / 14 = 27 is not; 112 px / 14 = 8 is).
    "aya_vision": Quirk(
        "patches per side must divide by downsample_factor (2); the default 384 px / 14 px patches leaves 27",
        config={"vision_config.image_size": 112},
    ),
    # RF-DETR picks its num_queries best proposals among the encoder's positions: at 224 px (16 x 16 patches) there
    # are 256 of them, fewer than the default 300 queries.
    "rf_detr": Quirk(
        "two-stage query selection takes the top num_queries of the feature positions; a small image has under 300",
        config={"num_queries": 100},
    ),
    # Keypoint matchers take one pair of images a row.
    "superglue": Quirk("pixel_values is a pair of images a row", input_kinds={"pixel_values": "image_pairs"}),
    "lightglue": Quirk("pixel_values is a pair of images a row", input_kinds={"pixel_values": "image_pairs"}),
    # EfficientLoFTR's attention width is its conv backbone's last stage width (out_features, a channel list its
    # validator checks against hidden_size); the backbone is small already, so the width stays.
    "efficientloftr": Quirk(
        "pixel_values is a pair of images a row; hidden_size must equal the last backbone stage width"
        " (out_features[-1], 256), and the rotary embedding (head_dim x partial_rotary_factor 4) half of it",
        config={"hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 8},
        input_kinds={"pixel_values": "image_pairs"},
    ),
    # EoMT adds its queries to the tokens before the last num_blocks layers (4 by default): in the shrunk 2-layer
    # stack that index is never reached, and the mask head reads queries as image tokens.
    "eomt": Quirk(
        "the last num_blocks layers see the queries; they must exist after shrinking", config={"num_blocks": 1}
    ),
    # PP-OCRv6 small det's config class declares a PP-LCNetV3 backbone (scale 0.75, stages 2-5 out) as its default,
    # but its __post_init__ builds a default PP-LCNetV4 (the recognizer's, stage 4 out only) before that applies; its
    # neck reads the backbone's maps as they are (no projection, unlike PP-OCRv5 mobile det), so its input channels
    # are those of the declared backbone's four stages.
    # UVDoc's head fuses every backbone stage (bridge_connector reads 128 channels x 6 stages), but the backbone's
    # default out_features is its last stage only: the published checkpoint's config lists all six.
    "uvdoc": Quirk(
        "the head concatenates all six backbone stages; the default backbone config outputs only the last",
        config={
            "backbone_config.out_features": [f"stage{i}" for i in range(1, 7)],
            "backbone_config.out_indices": list(range(1, 7)),
        },
    ),
    "pp_ocrv6_small_det": Quirk(
        "the default backbone is not the declared one (PP-LCNetV3, stages 2-5); the neck reads its stage channels",
        config={
            "backbone_config": {
                "model_type": "pp_lcnet_v3",
                "scale": 0.75,
                "divisor": 16,
                "out_features": ["stage2", "stage3", "stage4", "stage5"],
                "out_indices": [2, 3, 4, 5],
            },
            "layer_list_out_channels": [48, 96, 192, 384],
        },
    ),
    "pp_ocrv6_medium_det": Quirk(
        "the neck's block layout comes with the checkpoint",
        known_failure=KnownFailure(
            "PP-OCRv6 medium det's default config leaves intraclass_block_config, scale_factor_list and kernel_list"
            " unset (None), and the neck indexes them while it is built; only the published config.json defines them",
            "https://huggingface.co/docs/transformers/model_doc/pp_ocrv6_medium_det",
            _dt.date(2027, 3, 1),
        ),
    ),
    # Sapiens 2's default head config leaves every layer list unset (each task's checkpoint sets its own): the pose
    # head gets one deconvolution and one 1x1 conv, the layout of the published pose heads, small.
    "Sapiens2ForPoseEstimation": Quirk(
        "the default head_config has no layers (upsample/conv channel and kernel lists are None)",
        config={
            "head_config.upsample_out_channels": [32],
            "head_config.upsample_kernel_sizes": [4],
            "head_config.use_pixel_shuffle": False,
            "head_config.conv_out_channels": [32],
            "head_config.conv_kernel_sizes": [1],
        },
    ),
    # Sapiens 2's dense heads (normals, pointmaps, segmentation), as the pose head above: the default layer lists are
    # None; one deconvolution and one 1x1 conv each, normals and points as 3 channels (the pointmap's scale head off)
    "Sapiens2ForNormalEstimation": Quirk(_SAPIENS2_DENSE_HEAD, config={"num_labels": 3, **_SAPIENS2_HEAD}),
    "Sapiens2ForPointmapEstimation": Quirk(_SAPIENS2_DENSE_HEAD, config={"num_labels": 3, **_SAPIENS2_HEAD}),
    "Sapiens2ForSemanticSegmentation": Quirk(_SAPIENS2_DENSE_HEAD, config=_SAPIENS2_HEAD),
    # Sapiens 2's matting head, as the pose head above (its default layer lists are None too): a pixel-shuffle decoder,
    # one upsampling conv and one conv, predicting a foreground (3 channels) and an alpha matte (1).
    "Sapiens2ForImageMatting": Quirk(
        "the default head_config has no layers (upsample/conv channel and kernel lists are None); 4 outputs"
        " (RGB, alpha)",
        config={
            "num_labels": 4,
            "head_config.upsample_out_channels": [32],
            "head_config.upsample_kernel_sizes": [3],
            "head_config.use_pixel_shuffle": True,
            "head_config.conv_out_channels": [32],
            "head_config.conv_kernel_sizes": [3],
        },
    ),
    # Cohere Compass's text model reads rotary parameters per layer type, with an mrope_section that defaults to
    # (24, 20, 20) in its modeling code (half of a 128-wide head); its default config has none.
    "cohere_compass_text": Quirk(
        "the default config has no rope_parameters (the rotary embedding reads one set per layer type); the default"
        " mrope_section needs head_dim 128, the tiny head_dim is 16",
        config={
            "rope_parameters": {
                kind: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
                for kind in ("full_attention", "sliding_attention")
            }
        },
    ),
    "cohere_compass": Quirk(
        "the composite's text config, as cohere_compass_text above: no rope_parameters by default",
        config={
            "text_config.rope_parameters": {
                kind: {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [4, 2, 2]}
                for kind in ("full_attention", "sliding_attention")
            }
        },
    ),
    # PP-OCRv6's recognizer reads text lines (48 x 320 px) and its head needs the height pooled down to one row.
    "pp_ocrv6_tiny_rec": Quirk(
        "images are 48 px high text lines; the sequence head reads a feature map one row high",
        input_kinds={"pixel_values": "text_line"},
    ),
    "pp_ocrv5_server_rec": Quirk(
        "images are 48 px high text lines; the sequence head reads a feature map one row high",
        input_kinds={"pixel_values": "text_line"},
    ),
    # PP-OCRv5 mobile rec's config class declares the detector's PP-LCNetV3 (stride 2 in both directions at every
    # stage): a 48 px text line comes out 2 rows high, and the (3, 2) pooling after it must leave one row for the
    # sequence head. A recognizer's backbone halves the height, not the width, in its later stages (PaddleOCR's
    # PPLCNetV3 rec layout): 48 x 320 px -> 3 x 80 -> pooled 1 x 40 steps.
    "pp_ocrv5_mobile_rec": Quirk(
        "images are 48 px high text lines; the default backbone is the detector's, which halves the height once too"
        " often for the (3, 2) pooling: the recognizer's stage strides are set",
        config={
            "backbone_config.block_configs": [
                [[3, 16, 32, 1, False]],
                [[3, 32, 64, [2, 1], False], [3, 64, 64, 1, False]],
                [[3, 64, 128, [2, 1], False], [3, 128, 128, 1, False]],
                [[3, 128, 256, [1, 2], False], [5, 256, 256, 1, False]],
                [[5, 256, 512, [2, 1], True], [5, 512, 512, 1, False]],
            ]
        },
        input_kinds={"pixel_values": "text_line"},
    ),
    "pp_ocrv6_small_rec": Quirk(
        "images are 48 px high text lines; the sequence head reads a feature map one row high",
        input_kinds={"pixel_values": "text_line"},
    ),
    # Qwen2.5-Omni's top-level class only generates: it chains a thinker, a talker and a token-to-waveform model.
    "Qwen2_5OmniForConditionalGeneration": Quirk(
        "a composite of generation models",
        known_failure=KnownFailure(
            "Qwen2_5OmniForConditionalGeneration has no forward (generate() only, chaining thinker, talker and"
            " token2wav); the thinker and the talker are classes of their own, each with a forward",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    # Qwen3-Omni's top-level class, likewise (and its default talker text config lacks the shared expert's width).
    "Qwen3OmniMoeForConditionalGeneration": Quirk(
        "a composite of generation models",
        known_failure=KnownFailure(
            "Qwen3OmniMoeForConditionalGeneration has no forward (generate() only, chaining thinker, talker and"
            " code2wav), and at the default config the talker does not build: Qwen3OmniMoeTalkerTextConfig declares"
            " no shared_expert_intermediate_size, which its sparse MoE block reads; the thinker is a class of its own",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/qwen3_omni_moe/modeling_qwen3_omni_moe.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    # Gemma 4's assistants (speculative drafters) reuse the target model's key/value states in every layer; their
    # default configs are invalid, and the forward takes the target's shared_kv_states, which Zoo cannot make alone.
    "Gemma4AssistantForCausalLM": Quirk(
        "a drafter over the target model's key/value states",
        known_failure=KnownFailure(
            "Gemma4AssistantConfig() fails its own validate_architecture: the default Gemma 4 text config has"
            " hidden_size_per_layer_input 256, which the assistant requires to be 0; and the forward needs the"
            " target model's shared_kv_states",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/gemma4_assistant/configuration_gemma4_assistant.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    "Gemma4UnifiedAssistantForCausalLM": Quirk(
        "a drafter over the target model's key/value states",
        known_failure=KnownFailure(
            "every layer of the default assistant config is kv-shared (num_kv_shared_layers = num_hidden_layers), so"
            " Gemma4UnifiedTextConfig.kv_sharing_modes finds no layer producing a cache and raises while the"
            " attention layers are built; the forward also needs the target model's shared_kv_states",
            "https://github.com/huggingface/transformers/blob/main/src/transformers/models/gemma4_unified/configuration_gemma4_unified.py",
            _dt.date(2027, 3, 1),
        ),
    ),
    # NeoMME's config insists on at least one full-attention layer; its default stack opens with five sliding-window
    # layers, so the first two (the shrunk depth) have none.
    "neomme": Quirk(
        "layer_types must include a full_attention layer; the shrunk depth keeps only sliding-window ones",
        config={"layer_types": ["sliding_attention", "full_attention"]},
    ),
    # Aria's projector maps each image's patch count to a number of learned queries, for its published resolutions
    # (490 and 980 px: 1225 and 4900 patches); the tiny tower's 224 px / 32 px patches make 49.
    "aria": Quirk(
        "projector_patch_to_query_dict lists only the published resolutions' patch counts (1225, 4900)",
        config={"projector_patch_to_query_dict": {"49": 16}},
    ),
    # DeepSeek-VL hybrid also reads each image through a SAM tower at 1024 px (4096 patches); its features are
    # resized to the low-resolution grid whatever their size, so a 256 px view keeps the path and is fast.
    "deepseek_vl_hybrid": Quirk(
        "the high-resolution SAM view defaults to 1024 px (4096 patches), slow for a tiny model",
        config={"high_res_vision_config.image_size": 256},
    ),
    # DeepSeek-OCR 2's text config leaves mlp_layer_types unset (the published config lists one per layer: the first
    # dense, the rest mixture-of-experts) and the decoder layers index it while they are built.
    # Its SAM neck's last downsampling width is the vision encoder's width (896 = 896), which the shrunk encoder
    # (64) must match.
    "deepseek_ocr2": Quirk(
        "the default text config has no mlp_layer_types, which every decoder layer reads; the SAM neck's last"
        " downsample channel count must be the vision encoder's width",
        config={
            "text_config.mlp_layer_types": ["dense", "sparse"],
            "vision_config.sam_config.downsample_channels": [32, 64],
        },
    ),
    # Unlimited OCR's SAM neck feeds a CLIP encoder the same way: its last downsample width is the encoder's (1024).
    "unlimited_ocr": Quirk(
        "the SAM neck's last downsample channel count must be the vision encoder's width",
        config={"vision_config.sam_config.downsample_channels": [32, 64]},
    ),
    "deepseek_ocr2_text": Quirk(
        "the default config has no mlp_layer_types, which every decoder layer reads",
        config={"mlp_layer_types": ["dense", "sparse"]},
    ),
    # Chameleon and Emu3 map VQ image codes to text tokens through a vocabulary map that comes with the checkpoint's
    # tokenizer; the default config leaves it None and the model reads it while it is built. A map of the image
    # placeholder alone (an id inside the vocabulary) builds it; Zoo's inputs for these are text only.
    "chameleon": Quirk(
        "vocabulary_map (image token names -> ids) comes with the checkpoint and is read at build time",
        config={"vocabulary_map": {"<image>": 8711}},
    ),
    "emu3": Quirk(
        "vocabulary_map (image token names -> ids) comes with the checkpoint and is read at build time",
        config={"vocabulary_map": {"<image>": 151851}},
    ),
    # PaddleOCR-VL embeds each patch of the flattened grid as a (channels, patch, patch) image; its text model's
    # mrope_section defaults to (16, 24, 24) in the modeling code (half of a 128-wide head), and its config does not
    # declare the key, so the generic sizing cannot see it.
    "paddleocr_vl": Quirk(
        "pixel_values are (patches, channels, patch, patch) with their (t, h, w) grid; the modeling code's default"
        " mrope_section needs head_dim 128, the tiny head_dim is 16",
        config={"text_config.rope_parameters.mrope_section": [4, 2, 2]},
        input_kinds={"pixel_values": "patch_images"},
        extra_inputs=("image_grid_thw",),
    ),
    # Kimi K2.5's MoonViT tower takes the same (patches, channels, patch, patch) images with their grid; its
    # projector normalizes the tower's features over projection_hidden_size, the tower's width (1152 = 1152).
    "kimi_k25": Quirk(
        "pixel_values are (patches, channels, patch, patch) with their (t, h, w) grid; projection_hidden_size is"
        " the vision tower's width",
        config={"projection_hidden_size": 64},
        input_kinds={"pixel_values": "patch_images"},
    ),
    "kimi_k25_vision": Quirk(
        "the tower on its own, as the composite above: pixel_values are (patches, channels, patch, patch)",
        input_kinds={"pixel_values": "patch_images"},
    ),
    # Inkling 2 takes one (patch x merge)-square pixel block per image token, channels last, and its grid in tokens.
    "inkling2": Quirk(
        "pixel_values are one (patch x merge, patch x merge, channels) block per image token; the grid counts tokens",
        input_kinds={"pixel_values": "token_pixel_blocks"},
        extra_inputs=("image_grid_thw",),
    ),
    "inkling2_vision": Quirk(
        "pixel_values are one (patch x merge, patch x merge, channels) block per image token; the grid counts tokens",
        input_kinds={"pixel_values": "token_pixel_blocks"},
    ),
    # Dots1's default config leaves its mixture unset (n_routed_experts None) while every layer builds experts.
    "dots1": Quirk(
        "every layer builds routed experts; the default config leaves n_routed_experts unset",
        config={"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1},
    ),
    # Diffusion Gemma's encoder layers always build a router and experts, which its default config leaves unset
    # (num_experts None): a small mixture spelled out.
    "diffusion_gemma": Quirk(
        "every encoder layer builds a router and experts; the default config leaves num_experts unset",
        config={
            "text_config.num_experts": 4,
            "text_config.top_k_experts": 2,
            "text_config.moe_intermediate_size": 128,
        },
    ),
}


def native_for_custom_code(model_type: str | None) -> str:
    """Why transformers' own classes of ``model_type`` stand for its custom-code repos' code, or ""."""
    row = QUIRKS.get(model_type or "")
    return row.native_for_custom_code if row else ""


def custom_code_guards(model_type: str | None) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, Any, Any], ...]]:
    """``(custom_code_agree, custom_code_fixed)`` of ``model_type``'s row (empty where none)."""
    row = QUIRKS.get(model_type or "")
    return (row.custom_code_agree, row.custom_code_fixed) if row else ((), ())


def quirk_for(*keys: str | None) -> Quirk | None:
    """The first row matching any key (architecture class name first, then model_type)."""
    for key in keys:
        if key and key in QUIRKS:
            return QUIRKS[key]
    return None
