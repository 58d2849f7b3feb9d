"""Deterministic inputs from the config and the model's forward signature.

Generators are keyed by input name (the approach of optimum's dummy input generators) over a
normalized view of the config, so one table serves every architecture.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

DEFAULT_SHAPES = ({"batch": 2, "seq": 16}, {"batch": 1, "seq": 11})
PATCH_GRID = (1, 4, 4)  # one image of 4x4 patches per row (a multiple of every spatial merge size in use)
NAFLEX_GRID = (4, 4)  # a NaFlex image of 4x4 patches
IMAGE_TOKEN_KEYS = ("image_token_id", "image_token_index")
VISUAL_BOXES = 8  # detected regions a row, for text-and-regions models (LXMERT)
DECISION_QUESTIONS = 2  # questions a prompt asks, for decision heads that score each question's options (JEV)


@dataclass
class ConfigView:
    """The handful of config facts input generators need, whatever the architecture calls them."""

    vocab_size: int
    type_vocab_size: int
    image_size: int
    num_channels: int
    num_mel_bins: int
    audio_frames: int
    decoder_vocab_size: int
    num_patches: int
    patch_size: int = 16
    temporal_patch_size: int = 1
    audio_channels: int = 1
    num_codebooks: int = 1
    codebook_vocab_size: int = 1  # the codes of one codebook, where text and audio codes share a step (Kyutai STT)
    code_channels: int = 1  # audio decoders reading one code per channel a step (Dia): (batch, length, channels)
    task_seq_len: int = 77
    image_hw: tuple[int, int] = (224, 224)  # (height, width) where a tower's image_size is a pair
    anyres_tiles: int = 1  # LLaVA-NeXT-style any-resolution: tiles of one square image, plus its overview
    max_num_tiles: int = 4  # Mllama-style tiled images: tiles per image, padded to this many
    video_frames: int = 4  # frames of a video clip (kept small; a multiple of the tubelet size)
    tubelet_size: int = 1  # frames a video patch spans (VideoMAE); 1 for images
    type_vocab_sizes: tuple[int, ...] = ()  # one token-type vocabulary per column (TAPAS: segment, column, row, ...)
    patch_embed_dim: int = 768  # width of one flattened patch (Pix2Struct: patch height x width x channels)
    state_dim: int = 1  # trajectory models (Decision Transformer): one state, one action a step
    act_dim: int = 1
    max_timestep: int = 1000
    pixel_hw: tuple[int, int] = (224, 224)  # (height, width) of the model's own images: image_size, or its pair
    series_channels: int = 0  # multivariate forecasters (PatchTST): channels a step; 0 = one univariate series a row
    context_length: int = 0  # the context those forecasters insist on; 0 = any length
    series_patch: int = 1  # univariate forecasters that cut the context into patches (TimesFM): its length divides
    series_lags: int = 0  # forecasters that read lagged copies of the series (Informer): the context's extra steps
    time_features: int = 0  # ... and the date features each step comes with
    horizon: int = 1  # ... and the steps they forecast
    visual_feat_dim: int = 2048  # region features from an object detector (LXMERT): one vector a box
    num_languages: int = 1  # per-language adapters or embeddings (X-MOD): rows pick one language each
    frame_features: int = 0  # speech encoders fed stacked filter-bank frames (w2v-BERT: 160 a frame); 0 = mel bins
    qformer_vocab_size: int = 30522  # the query transformer's own text vocabulary (InstructBLIP)
    hidden_size: int = 64  # the model's width, for heads that take embeddings rather than ids
    draft_block: int = 16  # block-diffusion drafters (DFlash: Muse Glimmer's assistant): positions drafted at once
    target_layers: int = 1  # ... and the target model's layers whose hidden states they read, side by side
    high_res_size: int = 1024  # the image size of a hybrid model's high-resolution tower (DeepSeek-VL hybrid)
    n_docs: int = 5  # passages a retrieval-augmented generator reads per question (RAG), retrieved beforehand
    generator_vocab_size: int = 1000  # the vocabulary of those passages: the generator's (RAG's BART)
    latent_queries: int = 0  # learned image queries whose embeddings replace text positions (Kosmos-2)
    spatial_merge_size: int = 1  # patches merged per side into one language-model token (Qwen2-VL-style towers)
    audio_per_token: int = 8  # mel frames per text token, for streaming models that add audio to each token (Voxtral)
    noise_channels: int = 64  # vocoders fed a noise sequence beside the spectrogram (UnivNet): its width a frame
    hop_length: int = 320  # waveform samples a codec frame (X-Codec 2: the product of its downsampling ratios)
    min_samples: int = 0  # the shortest waveform a speaker-embedding head's TDNN layers can read (x-vectors); 0 = any
    mask_units: int = 0  # MAE noise entries where masking is by units of several patches (Hiera's); 0 = one a patch
    query_tokens: int = 32  # learned queries a query transformer (BLIP-2's Q-Former) reads, as embeddings
    encoder_hidden_size: int = 64  # the width of the image features such a query transformer cross-attends to

    @classmethod
    def of(cls, config: Any) -> ConfigView:
        text = (
            getattr(config, "text_config", None)
            or getattr(config, "decoder", None)
            or getattr(config, "model_config", None)  # a text-to-speech model wrapped with its vocoder (FastSpeech 2)
            or config
        )
        vision = getattr(config, "vision_config", None) or config
        audio = (
            getattr(config, "audio_config", None)
            or getattr(config, "encoder_config", None)
            or getattr(config, "asr_config", None)  # a speech recognizer's encoder beside other towers (Nemotron 3.5)
            or config
        )

        def first(objs, names, default):
            for obj in objs:
                for name in names:
                    v = getattr(obj, name, None)
                    if isinstance(v, (list, tuple)) and v:
                        v = v[0]
                    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                        return v
            return default

        # an encoder-decoder whose halves are encoder_config/decoder_config (Dia): each its own vocabulary
        halves = [getattr(config, "encoder_config", None)], [getattr(config, "decoder_config", None)]
        vocab = first([config, text, *halves[0]], ["vocab_size"], 1000)
        max_src = first([config], ["max_source_positions"], 1500)
        return cls(
            vocab_size=vocab,
            type_vocab_size=first([config, text], ["type_vocab_size"], 1),
            image_size=first([vision, config], ["image_size", "img_size", "input_size"], 224),
            num_channels=first([vision, config], ["num_channels", "in_channels", "in_chans"], 3),
            num_mel_bins=first(
                [config, audio], ["num_mel_bins", "feature_size", "input_feat_per_channel", "input_feat_size"], 80
            ),
            audio_frames=2 * max_src,
            decoder_vocab_size=first([text, config, *halves[1]], ["decoder_vocab_size", "vocab_size"], vocab),
            code_channels=first(halves[1], ["num_channels"], 1),
            num_patches=(first([vision, config], ["image_size"], 224) // first([vision, config], ["patch_size"], 16))
            ** 2,
            patch_size=first([vision, config], ["patch_size"], 16),
            temporal_patch_size=first([vision], ["temporal_patch_size", "patch_temporal"], 1),
            audio_channels=first([config], ["audio_channels"], 1),
            num_codebooks=first([text, config], ["num_codebooks"], 1),
            codebook_vocab_size=first([text, config], ["codebook_vocab_size"], 1),
            task_seq_len=first([config], ["task_seq_len"], 77),
            image_hw=_image_hw([vision, getattr(config, "backbone_config", None), config]),
            anyres_tiles=_anyres_tiles(config, first([vision, config], ["image_size"], 224)),
            max_num_tiles=first([vision], ["max_num_tiles"], 4),
            # models with per-frame position embeddings fix num_frames; others (RoPE) take a short clip
            video_frames=first([vision, config], ["num_frames"], 2 * first([vision, config], ["tubelet_size"], 2)),
            tubelet_size=first([vision, config], ["tubelet_size"], 1),
            type_vocab_sizes=tuple(getattr(config, "type_vocab_sizes", None) or ()),
            patch_embed_dim=first([vision, config], ["patch_embed_hidden_size"], 768),
            state_dim=first([config], ["state_dim"], 1),
            act_dim=first([config], ["act_dim"], 1),
            max_timestep=first([config], ["max_ep_len"], 1000),
            pixel_hw=_pixel_hw(
                [vision, config], first([vision, config], ["image_size", "img_size", "input_size"], 224)
            ),
            series_channels=first([config], ["num_input_channels"], 0),
            context_length=first([config], ["context_length"], 0),
            series_patch=first([config], ["patch_length"], 1),
            series_lags=max((getattr(config, "lags_sequence", None) or [0]), default=0),
            time_features=first([config], ["num_time_features"], 0),
            horizon=first([config], ["prediction_length"], 1),
            visual_feat_dim=first([config], ["visual_feat_dim"], 2048),
            num_languages=len(getattr(config, "languages", None) or ()) or first([config], ["num_languages"], 1),
            # also where a w2v-BERT encoder is a codec's semantic tower (NeuCodec)
            frame_features=first(
                [config, getattr(config, "semantic_model_config", None)], ["feature_projection_input_dim"], 0
            )
            or _stacked_frame_width([config, audio]),
            qformer_vocab_size=first([getattr(config, "qformer_config", None)], ["vocab_size"], 30522),
            hidden_size=first([config, text], ["hidden_size", "d_model", "n_embd"], 64),
            draft_block=first([config], ["block_size"], 16),
            target_layers=len(getattr(config, "target_layer_ids", None) or ()) or 1,
            audio_per_token=first([config], ["audio_length_per_tok"], 8),
            noise_channels=first([config], ["model_in_channels"], 64),
            min_samples=_tdnn_min_samples(config),
            query_tokens=first([config], ["num_query_tokens"], 32),
            mask_units=_mask_units(config),
            encoder_hidden_size=first([config], ["encoder_hidden_size"], first([config, text], ["hidden_size"], 64)),
            hop_length=first([config], ["hop_length"], 320),
            spatial_merge_size=first([vision], ["spatial_merge_size"], 1),
            latent_queries=first([config], ["latent_query_num"], 0),
            high_res_size=first([getattr(config, "high_res_vision_config", None)], ["image_size"], 1024),
            n_docs=first([config], ["n_docs"], 5),
            generator_vocab_size=first([getattr(config, "generator", None), config], ["vocab_size"], vocab),
        )


def _stacked_frame_width(configs: list[Any]) -> int:
    """Encoders fed low-frame-rate features, num_stacked_frames mel frames side by side a step (Fun-ASR-Nano)."""
    for c in configs:
        stacked, bins = getattr(c, "num_stacked_frames", None), getattr(c, "num_mel_bins", None)
        if isinstance(stacked, int) and isinstance(bins, int) and stacked > 0 and bins > 0:
            return stacked * bins
    return 0


def _mask_units(config: Any) -> int:
    """Models that mask whole units of patches (Hiera: masked_unit_size tokens a side, after the patch_stride
    embedding) draw one noise entry a unit."""
    unit, stride = getattr(config, "masked_unit_size", None), getattr(config, "patch_stride", None)
    size = getattr(config, "image_size", None)
    if not (isinstance(unit, (list, tuple)) and isinstance(stride, (list, tuple)) and isinstance(size, (list, tuple))):
        return 0
    return math.prod(n // p // u for n, p, u in zip(size, stride, unit))


def _time_patches(v: ConfigView) -> int:
    """Patches along time: the clip's frames over the tubelet size for a video model, 1 for an image model."""
    return max(v.video_frames // v.tubelet_size, 1) if v.tubelet_size > 1 else 1


def _tdnn_min_samples(config: Any) -> int:
    """X-vector heads (wav2vec 2.0, WavLM) run dilated TDNN convolutions over the feature encoder's frames: the
    waveform must give at least their receptive field in frames, 1 + sum((kernel - 1) x dilation), counted back
    through the feature encoder's convolutions (kernel, stride)."""
    kernels, dilations = getattr(config, "tdnn_kernel", None), getattr(config, "tdnn_dilation", None)
    conv_k, conv_s = getattr(config, "conv_kernel", None), getattr(config, "conv_stride", None)
    if not all(isinstance(x, (list, tuple)) and x for x in (kernels, dilations, conv_k, conv_s)):
        return 0
    n = 1 + sum((k - 1) * d for k, d in zip(kernels, dilations))
    for k, st in reversed(list(zip(conv_k, conv_s))):
        n = (n - 1) * st + k
    return n


def _image_hw(objs: list[Any]) -> tuple[int, int]:
    for obj in objs:
        size = getattr(obj, "image_size", None) if obj is not None else None
        if isinstance(size, (list, tuple)) and len(size) == 2:
            return int(size[0]), int(size[1])
        if isinstance(size, int) and size > 0:
            return size, size
    return 224, 224


def _pixel_hw(objs: list[Any], size: int) -> tuple[int, int]:
    """The (height, width) pair where the image size a tower reads is one (MGP-STR: 32 x 128), else a square."""
    for obj in objs:
        for name in ("image_size", "img_size", "input_size"):
            v = getattr(obj, name, None)
            if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(i, int) and i > 0 for i in v):
                return int(v[0]), int(v[1])
            if v is not None:
                return size, size
    return size, size


def _anyres_tiles(config: Any, image_size: int) -> int:
    """How many tiles an any-resolution image processor makes of one square image of the tower's
    size, from the config's grid pinpoints (transformers' own helper does the arithmetic)."""
    pinpoints = getattr(config, "image_grid_pinpoints", None)
    if not pinpoints:
        return 1
    from transformers.models.llava_next.modeling_llava_next import image_size_to_num_patches

    return int(image_size_to_num_patches((image_size, image_size), pinpoints, image_size))


Gen = Callable[[ConfigView, dict, torch.Generator], torch.Tensor]


def random_walk(batch: int, length: int, gen: torch.Generator) -> torch.Tensor:
    """Seeded time series, one a row: a random walk away from zero, as real series are."""
    return 10.0 + torch.randn(batch, length, generator=gen).cumsum(dim=-1)


def _ids(high: int, shape, gen) -> torch.Tensor:
    low = min(4, max(high - 1, 0))
    return torch.randint(low, max(high, low + 1), shape, generator=gen)


def _past_values(v: ConfigView, s: dict, g: torch.Generator) -> torch.Tensor:
    """Context series, one a row: (batch, length), or (batch, context_length, channels) for forecasters
    whose config fixes the context and its channels (PatchTST, PatchTSMixer)."""
    if v.series_channels and v.context_length:
        walks = random_walk(s["batch"] * v.series_channels, v.context_length, g)
        return walks.reshape(s["batch"], v.series_channels, v.context_length).transpose(1, 2).contiguous()
    return random_walk(s["batch"], _series_length(v, s), g)


def _series_length(v: ConfigView, s: dict) -> int:
    """A univariate context's length: eight steps a token, in whole patches; or, for forecasters that read lagged
    copies of it, the context they insist on and the largest lag before it."""
    if v.series_lags and v.context_length:
        return v.context_length + v.series_lags
    return -(-8 * s["seq"] // v.series_patch) * v.series_patch


def _unit_boxes(batch: int, n: int, gen: torch.Generator) -> torch.Tensor:
    """(batch, n, 4) boxes as (x0, y0, x1, y1) in [0, 1], each corner above and left of the other."""
    corners = torch.rand(batch, n, 2, 2, generator=gen)
    low, high = corners.min(dim=-1).values, corners.max(dim=-1).values
    return torch.cat([low, high], dim=-1)


def _input_features(v: ConfigView, s: dict, g: torch.Generator) -> torch.Tensor:
    """Speech features: (batch, mel bins, frames) as Whisper reads them, or (batch, frames, features)
    for encoders whose config gives the width of a stacked frame (w2v-BERT, SeamlessM4T)."""
    if v.frame_features:
        return torch.randn(s["batch"], 4 * s["seq"], v.frame_features, generator=g)
    return torch.randn(s["batch"], v.num_mel_bins, v.audio_frames, generator=g)


def _mask(view, shape, gen):
    b, s = shape["batch"], shape["seq"]
    mask = torch.ones(b, s, dtype=torch.long)
    if b > 1 and s > 4:
        mask[1, -3:] = 0  # one padded row exercises masking
    return mask


def _token_types(v: ConfigView, s: dict, g: torch.Generator) -> torch.Tensor:
    """One token type a token, or one per type vocabulary where the config lists several (TAPAS)."""
    b, n = s["batch"], s["seq"]
    if v.type_vocab_sizes:
        return torch.stack([torch.randint(0, size, (b, n), generator=g) for size in v.type_vocab_sizes], dim=-1)
    return _ids(v.type_vocab_size, (b, n), g) if v.type_vocab_size > 1 else torch.zeros(b, n, dtype=torch.long)


def _flattened_patches(v: ConfigView, s: dict, g: torch.Generator) -> torch.Tensor:
    """Pix2Struct-style images: rows of (row id, column id, flattened patch), ids 1-based over a grid."""
    rows, cols = NAFLEX_GRID
    ids = torch.tensor([[r + 1, c + 1] for r in range(rows) for c in range(cols)], dtype=torch.float32)
    patches = torch.randn(s["batch"], rows * cols, v.patch_embed_dim, generator=g)
    return torch.cat([ids.expand(s["batch"], -1, -1), patches], dim=-1)


GENERATORS: dict[str, Gen] = {
    "input_ids": lambda v, s, g: _ids(v.vocab_size, (s["batch"], s["seq"]), g),
    "attention_mask": _mask,
    "token_type_ids": _token_types,
    # as long as the encoder input: sequence classifiers (BART) pool decoder states at the EOS of input_ids
    "decoder_input_ids": lambda v, s, g: _ids(v.decoder_vocab_size, (s["batch"], s["seq"]), g),
    "pixel_values": lambda v, s, g: torch.randn(s["batch"], v.num_channels, *v.pixel_hw, generator=g),
    # in-context segmenters (SegGPT) take a prompt image and its mask, each shaped like the image
    "prompt_pixel_values": lambda v, s, g: torch.randn(s["batch"], v.num_channels, *v.pixel_hw, generator=g),
    "prompt_masks": lambda v, s, g: torch.randn(s["batch"], v.num_channels, *v.pixel_hw, generator=g),
    # ... or images half the configured height, for models that stack two of them (prompt above input) to that size
    "half_height": lambda v, s, g: torch.randn(
        s["batch"], v.num_channels, v.pixel_hw[0] // 2, v.pixel_hw[1], generator=g
    ),
    # keypoint matchers (SuperGlue, LightGlue, EfficientLoFTR) match one pair of images a row: (batch, 2, C, H, W)
    "image_pairs": lambda v, s, g: torch.randn(s["batch"], 2, v.num_channels, *v.pixel_hw, generator=g),
    # non-square images (pose estimators: 256 x 192), sized by the (height, width) pair of the config
    "pixels_hw": lambda v, s, g: torch.randn(s["batch"], v.num_channels, *v.image_hw, generator=g),
    # text-line recognizers (PP-OCR rec) read one line of text: 48 px high strips, the height their backbone pools to 1
    "text_line": lambda v, s, g: torch.randn(s["batch"], v.num_channels, 48, 320, generator=g),
    # any-resolution VLMs (LLaVA-NeXT, OneVision) take each image as (tiles, channels, size, size)
    "anyres_tiles": lambda v, s, g: torch.randn(
        s["batch"], v.anyres_tiles, v.num_channels, v.image_size, v.image_size, generator=g
    ),
    # tiled-image VLMs (Mllama): one image a row as (images, tiles, channels, size, size), the
    # first tile used (aspect ratio id 1 is 1 x 1), the rest padding masked out
    "tiled_images": lambda v, s, g: torch.randn(
        s["batch"], 1, v.max_num_tiles, v.num_channels, v.image_size, v.image_size, generator=g
    ),
    # multi-image VLMs (Idefics3, SmolVLM) take (batch, images, channels, size, size)
    "image_rows": lambda v, s, g: torch.randn(s["batch"], 1, v.num_channels, v.image_size, v.image_size, generator=g),
    # where the image embeddings go in the text (Kosmos-2): the latent queries' positions, after the first token
    "image_embeds_position_mask": lambda v, s, g: torch.nn.functional.pad(
        torch.ones(s["batch"], v.latent_queries, dtype=torch.long), (1, s["seq"] - v.latent_queries - 1)
    ),
    # which of a row's images each text token attends to (Idefics' gated cross-attention): (batch, seq, images), all
    "text_image_mask": lambda v, s, g: torch.ones(s["batch"], s["seq"], 1, dtype=torch.long),
    # which of those images (tiles) are real, as tiling processors return it (Granite Docling): all of them
    "tile_mask": lambda v, s, g: torch.ones(s["batch"], 1, dtype=torch.bool),
    # video models (V-JEPA 2): (batch, frames, channels, size, size)
    "pixel_values_videos": lambda v, s, g: torch.randn(
        s["batch"], v.video_frames, v.num_channels, v.image_size, v.image_size, generator=g
    ),
    # NaFlex vision towers (SigLIP 2): rows of flattened patches, their (rows, cols) grid and which are real
    "naflex_patches": lambda v, s, g: torch.randn(
        s["batch"], math.prod(NAFLEX_GRID), v.num_channels * v.patch_size**2, generator=g
    ),
    "spatial_shapes": lambda v, s, g: torch.tensor([list(NAFLEX_GRID)] * s["batch"]),
    "pixel_attention_mask": lambda v, s, g: torch.ones(s["batch"], math.prod(NAFLEX_GRID), dtype=torch.long),
    # ... or, for towers given each patch's (x, y) in the image instead (Gemma 4's), those coordinates
    "pixel_position_ids": lambda v, s, g: torch.tensor(
        [[x, y] for y in range(NAFLEX_GRID[0]) for x in range(NAFLEX_GRID[1])]
    ).expand(s["batch"], -1, -1),
    # time-series forecasters (TimesFM): one context series a row
    "past_values": _past_values,
    # ... which steps of it are padding (none), and its frequency bucket (TimesFM: 0, high frequency)
    "past_values_padding": lambda v, s, g: torch.zeros(s["batch"], _series_length(v, s)),
    "freq": lambda v, s, g: torch.zeros(s["batch"], 1, dtype=torch.long),
    # which tokens attend globally in a sliding-window encoder (Longformer, LED): the first, as for classification
    "global_attention_mask": lambda v, s, g: torch.nn.functional.pad(
        torch.ones(s["batch"], 1, dtype=torch.long), (0, s["seq"] - 1)
    ),
    # probabilistic forecasters (Informer, Autoformer): each step's date features, which steps were observed (all),
    # and the horizon's values and features, which the decoder reads
    "past_time_features": lambda v, s, g: torch.randn(s["batch"], _series_length(v, s), v.time_features, generator=g),
    "past_observed_mask": lambda v, s, g: torch.ones(s["batch"], _series_length(v, s)),
    "future_values": lambda v, s, g: random_walk(s["batch"], v.horizon, g),
    "future_time_features": lambda v, s, g: torch.randn(s["batch"], v.horizon, v.time_features, generator=g),
    "aspect_ratio_ids": lambda v, s, g: torch.ones(s["batch"], 1, dtype=torch.long),
    # which image tiles each text token attends to (Mllama): every token sees the first tile of its image
    "cross_attention_mask": lambda v, s, g: torch.nn.functional.one_hot(
        torch.zeros(s["batch"], s["seq"], 1, dtype=torch.long), v.max_num_tiles
    ),
    "aspect_ratio_mask": lambda v, s, g: torch.nn.functional.one_hot(
        torch.zeros(s["batch"], 1, dtype=torch.long), v.max_num_tiles
    ),
    "input_values": lambda v, s, g: torch.randn(s["batch"], max(400 * s["seq"], v.min_samples), generator=g),
    "input_features": _input_features,
    "spectrogram": lambda v, s, g: torch.randn(s["batch"], 4 * s["seq"], v.num_mel_bins, generator=g),
    # which frames of such a spectrogram are real: all of them
    "spectrogram_mask": lambda v, s, g: torch.ones(s["batch"], 4 * s["seq"], dtype=torch.long),
    # the same under the names Gemma 3n's audio encoder gives them; its mask is True where a frame is padding
    "audio_mel": lambda v, s, g: torch.randn(s["batch"], 4 * s["seq"], v.num_mel_bins, generator=g),
    "audio_mel_mask": lambda v, s, g: torch.zeros(s["batch"], 4 * s["seq"], dtype=torch.bool),
    # encoders fed four stacked mel frames a step, as their feature extractor stacks them (Granite Speech 5)
    "mel_frames_by_four": lambda v, s, g: torch.randn(s["batch"], 4 * s["seq"], 4 * v.num_mel_bins, generator=g),
    # streaming speech models that add one audio embedding to each text token (Voxtral Realtime): (batch, mel, frames)
    "features_per_token": lambda v, s, g: torch.randn(
        s["batch"], v.num_mel_bins, v.audio_per_token * s["seq"], generator=g
    ),
    # audio towers that read a spectrogram as a one-channel image (CLAP's HTS-AT): (batch, 1, frames, mel bins)
    "spectrogram_image": lambda v, s, g: torch.randn(s["batch"], 1, 4 * s["seq"], v.num_mel_bins, generator=g),
    # Qwen2-VL-style vision towers take images as rows of flattened patches plus a (t, h, w) grid per image
    "flat_patches": lambda v, s, g: torch.randn(
        s["batch"] * math.prod(PATCH_GRID), v.num_channels * v.temporal_patch_size * v.patch_size**2, generator=g
    ),
    # towers that embed each flattened-grid patch as a small image (PaddleOCR-VL): (patches, channels, patch, patch)
    "patch_images": lambda v, s, g: torch.randn(
        s["batch"] * math.prod(PATCH_GRID), v.num_channels, v.patch_size, v.patch_size, generator=g
    ),
    # audio codecs take (batch, channels, samples)
    "waveform_channels": lambda v, s, g: torch.randn(s["batch"], v.audio_channels, 400 * s["seq"], generator=g),
    # ... one codec frame (hop_length samples) for each frame of the features read beside it (4 x seq, X-Codec 2's)
    "waveform_per_frame": lambda v, s, g: torch.randn(
        s["batch"], v.audio_channels, v.hop_length * 4 * s["seq"], generator=g
    ),
    # multi-codebook decoders (MusicGen) take one row of codes per codebook per example
    "codebook_ids": lambda v, s, g: _ids(v.decoder_vocab_size, (s["batch"] * v.num_codebooks, s["seq"]), g),
    # ... or a text token and one code per codebook at each step (Kyutai speech-to-text), each in its own vocabulary
    "text_and_codes": lambda v, s, g: torch.cat(
        [
            _ids(v.vocab_size, (s["batch"], s["seq"], 1), g),
            _ids(v.codebook_vocab_size, (s["batch"], s["seq"], v.num_codebooks), g),
        ],
        dim=-1,
    ),
    # ... or one code per channel at each step (Dia)
    "channel_codes": lambda v, s, g: _ids(v.decoder_vocab_size, (s["batch"], s["seq"], v.code_channels), g),
    # OneFormer's task prompt ("the task is semantic"), as token ids of its fixed length
    "task_inputs": lambda v, s, g: _ids(v.vocab_size, (s["batch"], v.task_seq_len), g),
    "image_sizes": lambda v, s, g: torch.tensor([[v.image_size, v.image_size]] * s["batch"]),
    # hybrid vision paths (DeepSeek-VL hybrid) also read each image at their high-resolution tower's size
    "high_res_pixel_values": lambda v, s, g: torch.randn(
        s["batch"], v.num_channels, v.high_res_size, v.high_res_size, generator=g
    ),
    # how many patches a side each image merges into one token (VideoLLaMA 3): the tower's merge size
    "image_merge_sizes": lambda v, s, g: torch.full((s["batch"],), v.spatial_merge_size, dtype=torch.long),
    # ... under the name the tower on its own takes them
    "merge_sizes": lambda v, s, g: torch.full((s["batch"],), v.spatial_merge_size, dtype=torch.long),
    "image_grid_thw": lambda v, s, g: torch.tensor([list(PATCH_GRID)] * s["batch"]),
    "image_grid_hw": lambda v, s, g: torch.tensor([list(PATCH_GRID[1:])] * s["batch"]),
    # vision towers that read raw patch cubes, channels last (Inkling): one (frames, patch, patch, channels) an image
    "patch_cubes": lambda v, s, g: torch.randn(
        s["batch"], v.temporal_patch_size, v.patch_size, v.patch_size, v.num_channels, generator=g
    ),
    # heads that take embeddings only (Nemotron 3.5 Transcribe's word-timestamp head): one vector of the width a token
    "inputs_embeds": lambda v, s, g: torch.randn(s["batch"], s["seq"], v.hidden_size, generator=g),
    # block-diffusion drafters (DFlash): the noised block they denoise, and the target model's hidden states before it
    # from each of its target layers, concatenated
    "noise_embeds": lambda v, s, g: torch.randn(s["batch"], v.draft_block, v.hidden_size, generator=g),
    "context_hidden_states": lambda v, s, g: torch.randn(
        s["batch"], s["seq"], v.hidden_size * v.target_layers, generator=g
    ),
    # towers that take one pixel block per language-model token (Inkling 2): (tokens, patch x merge, patch x merge,
    # channels), with image_grid_thw counted in tokens
    "token_pixel_blocks": lambda v, s, g: torch.randn(
        s["batch"] * math.prod(PATCH_GRID),
        v.patch_size * v.spatial_merge_size,
        v.patch_size * v.spatial_merge_size,
        v.num_channels,
        generator=g,
    ),
    # a Qwen2-VL-style vision tower on its own takes the same grid under the name grid_thw
    "grid_thw": lambda v, s, g: torch.tensor([list(PATCH_GRID)] * s["batch"]),
    # random masking (MAE-style) takes its noise as an input so both runs mask the same patches
    "noise": lambda v, s, g: torch.rand(s["batch"], v.mask_units or v.num_patches, generator=g),
    # a speech decoder's previous mel frames (SpeechT5's text-to-speech and speech-to-speech): (batch, frames, mel bins)
    "decoder_input_values": lambda v, s, g: torch.randn(s["batch"], s["seq"], v.num_mel_bins, generator=g),
    # continuous latents a codec's decoder reads on its own (Mimi's): (batch, hidden size, frames)
    "latents": lambda v, s, g: torch.randn(s["batch"], v.hidden_size, s["seq"], generator=g),
    # a vocoder's Gaussian noise, one vector a frame of the (batch, frames, mel bins) spectrogram it reads (UnivNet)
    "noise_sequence": lambda v, s, g: torch.randn(s["batch"], 4 * s["seq"], v.noise_channels, generator=g),
    # masked-patch pre-training (VideoMAE) takes the mask: every other patch (of each tubelet, for a video), as many in
    # every row, as its loss needs
    "bool_masked_pos": lambda v, s, g: (torch.arange(v.num_patches * _time_patches(v)) % 2 == 0).expand(s["batch"], -1),
    # image-to-text models that take images as flattened patches with their positions (Pix2Struct)
    "flattened_patches": _flattened_patches,
    # trajectories (Decision Transformer): per step a state, an action, a reward, the return to go, a time step
    "states": lambda v, s, g: torch.randn(s["batch"], s["seq"], v.state_dim, generator=g),
    "actions": lambda v, s, g: torch.randn(s["batch"], s["seq"], v.act_dim, generator=g),
    "rewards": lambda v, s, g: torch.randn(s["batch"], s["seq"], 1, generator=g),
    "returns_to_go": lambda v, s, g: random_walk(s["batch"], s["seq"], g).unsqueeze(-1),
    "timesteps": lambda v, s, g: torch.randint(0, v.max_timestep, (s["batch"], s["seq"]), generator=g),
    # one layout box a token: LayoutLM's integer page coordinates (0-1000), or as fractions of the page (UDOP)
    "bbox": lambda v, s, g: (_unit_boxes(s["batch"], s["seq"], g) * 1000).long(),
    "unit_boxes": lambda v, s, g: _unit_boxes(s["batch"], s["seq"], g),
    # text with detected image regions (LXMERT): each region's features and its box
    "visual_feats": lambda v, s, g: torch.randn(s["batch"], VISUAL_BOXES, v.visual_feat_dim, generator=g),
    "visual_pos": lambda v, s, g: _unit_boxes(s["batch"], VISUAL_BOXES, g),
    # which language each row is in, for models with per-language adapters (X-MOD)
    "lang_ids": lambda v, s, g: torch.randint(0, v.num_languages, (s["batch"],), generator=g),
    # a retrieval-augmented generator without its retriever: the passages and their scores are inputs (RAG)
    "context_input_ids": lambda v, s, g: _ids(v.generator_vocab_size, (s["batch"] * v.n_docs, s["seq"]), g),
    "context_attention_mask": lambda v, s, g: torch.ones(s["batch"] * v.n_docs, s["seq"], dtype=torch.long),
    "doc_scores": lambda v, s, g: torch.randn(s["batch"], v.n_docs, generator=g),
    # the instruction as the query transformer reads it (InstructBLIP), in its own vocabulary
    "qformer_input_ids": lambda v, s, g: _ids(v.qformer_vocab_size, (s["batch"], s["seq"]), g),
    "qformer_attention_mask": lambda v, s, g: torch.ones(s["batch"], s["seq"], dtype=torch.long),
    # a query transformer on its own (BLIP-2's Q-Former) takes its learned queries as embeddings, and the image
    # features its cross-attention layers read: (batch, patches, encoder hidden size)
    "query_embeds": lambda v, s, g: torch.randn(s["batch"], v.query_tokens, v.hidden_size, generator=g),
    "encoder_hidden_states": lambda v, s, g: torch.randn(s["batch"], s["seq"], v.encoder_hidden_size, generator=g),
    # decision heads (JEV) score each question of a prompt at the token before its mark: the marks' positions (1-based,
    # spread over the text), each question's option count (two, as a yes/no question has) and type (the first, yes/no)
    "marks": lambda v, s, g: (
        torch.linspace(s["seq"] // DECISION_QUESTIONS, s["seq"], DECISION_QUESTIONS).long().expand(s["batch"], -1)
    ),
    "num_options": lambda v, s, g: torch.full((s["batch"], DECISION_QUESTIONS), 2, dtype=torch.long),
    "question_type_ids": lambda v, s, g: torch.zeros(s["batch"], DECISION_QUESTIONS, dtype=torch.long),
    # which speech frames are real (AudioFlamingo 3's encoder counts them): every frame of the generated features
    "input_features_mask": lambda v, s, g: torch.ones(
        s["batch"], 4 * s["seq"] if v.frame_features else v.audio_frames, dtype=torch.long
    ),
}

# Inputs filled only when the forward needs them or they change the graph meaningfully.
OPTIONAL_WANTED = ("attention_mask", "token_type_ids", "decoder_input_ids", "noise", "visual_feats", "lang_ids")
# Inputs that come with a main input: a model taking the first takes the others where it has them.
CO_INPUTS = {
    "states": ("actions", "rewards", "returns_to_go", "timesteps"),
    "past_time_features": ("past_observed_mask", "future_values", "future_time_features"),
    "visual_feats": ("visual_pos",),
    "qformer_input_ids": ("qformer_attention_mask",),
    "query_embeds": ("encoder_hidden_states",),
    "input_features": ("input_features_mask",),
    "pixel_values": ("image_embeds_position_mask",),
}


def forward_params(model: torch.nn.Module) -> list[inspect.Parameter]:
    return list(inspect.signature(model.forward).parameters.values())


def make_inputs(
    model: torch.nn.Module,
    config: Any,
    shape: dict,
    seed: int,
    is_encoder_decoder: bool = False,
    kinds: dict[str, str] | None = None,
    extra: tuple[str, ...] = (),
) -> dict[str, torch.Tensor]:
    """Inputs for one shape. Raises ``KeyError`` listing required inputs nobody can generate."""
    view = ConfigView.of(config)
    gen = torch.Generator().manual_seed(seed)
    params = {p.name: p for p in forward_params(model)}
    main = getattr(model, "main_input_name", "input_ids")
    wanted: list[str] = [m for m in (main if isinstance(main, (list, tuple)) else [main]) if m in params]
    if not wanted and "input_ids" in params:  # a text tower under a vision model's main input name (SAM 3's)
        wanted.append("input_ids")
    # multimodal models (CLIP-like) take text and pixels together
    for name, sub in (("input_ids", "text_config"), ("pixel_values", "vision_config")):
        if name in params and name not in wanted and getattr(config, sub, None) is not None:
            wanted.append(name)
    for name, p in params.items():
        if name in wanted or p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL):
            continue
        if p.default is inspect.Parameter.empty:
            wanted.append(name)
        elif name in OPTIONAL_WANTED and (name != "decoder_input_ids" or is_encoder_decoder):
            wanted.append(name)
    wanted += [name for name in extra if name in params and name not in wanted]
    wanted += [co for name in list(wanted) for co in CO_INPUTS.get(name, ()) if co in params and co not in wanted]
    if "pixel_values" in wanted:  # what the vision path requires with the pixels: image sizes, a high-res view
        known = {**GENERATORS, **dict.fromkeys(kinds or {})}
        wanted += [n for n in _vision_path_needs(model) if n in params and n not in wanted and n in known]
    if "input_ids" not in wanted:
        wanted = [w for w in wanted if w not in ("attention_mask", "token_type_ids")]
    kinds = dict(kinds or {})
    # a wrapper's generic main input (Speech Encoder-Decoder's inputs) is what its encoder reads: input_values, ...
    encoder = getattr(model, "encoder", None)
    if "inputs" in wanted and "inputs" not in kinds and isinstance(encoder, torch.nn.Module):
        kinds["inputs"] = getattr(encoder, "main_input_name", "inputs")
    grid = _patch_grid_input(model, params, wanted)
    if "pixel_values" in wanted and grid:  # a (t, h, w) grid per image: images are rows of flattened patches
        kinds.setdefault("pixel_values", "flat_patches")
        if grid not in wanted:
            wanted.append(grid)
    # a Qwen2-VL-style vision tower on its own (GLM-5 Next's, Cohere Compass's) names its flattened patches
    # hidden_states, next to their grid
    if "hidden_states" in wanted and any(g in wanted for g in GRID_INPUTS):
        kinds.setdefault("hidden_states", "flat_patches")
    if "pixel_values" in wanted and "pixel_position_ids" in wanted:  # patch coordinates: rows of flattened patches
        kinds.setdefault("pixel_values", "naflex_patches")
    if "pixel_values" in wanted and "pixel_values" not in kinds and _is_video(config):
        kinds["pixel_values"] = "pixel_values_videos"  # a video model's pixel_values is a clip
    if "pixel_values" in wanted and "pixel_values" not in kinds and getattr(config, "image_grid_pinpoints", None):
        kinds["pixel_values"] = "anyres_tiles"  # any-resolution VLMs (LLaVA-NeXT): each image as its tiles
    missing = [w for w in wanted if kinds.get(w, w) not in GENERATORS]
    if missing:
        raise KeyError(f"no input generator for {', '.join(missing)}")
    out = {name: GENERATORS[kinds.get(name, name)](view, shape, gen) for name in wanted}
    if "input_ids" in out and "input_ids" not in kinds:
        _end_with_eos(out, config)
        _ask_question(out, config)
    _insert_image_tokens(model, config, out, params)
    return out


# the (t, h, w) patch grid of each image, Qwen2-VL style, or its (h, w) for image-only towers (Nemotron 3 Omni)
GRID_INPUTS = ("image_grid_thw", "grid_thw", "image_grid_hw")


def _patch_grid_input(model: torch.nn.Module, params: dict[str, Any], wanted: list[str]) -> str | None:
    """The name of the patch-grid input, where the model (or its vision path) reads images as rows of
    flattened patches with a (t, h, w) grid each: a required forward argument, or one the vision path takes."""
    image_features = _image_features_fn(model)
    image_params = inspect.signature(image_features).parameters if image_features is not None else {}
    for name in GRID_INPUTS:
        if name in params and (name in wanted or name in image_params):
            return name
    return None


def _is_video(config: Any) -> bool:
    """Video models (TimeSformer, ViViT, VideoMAE) say how many frames a clip has in their own config."""
    return isinstance(getattr(config, "num_frames", None), int) and getattr(config, "vision_config", None) is None


def _vision_path_needs(model: torch.nn.Module) -> list[str]:
    """The required arguments of the model's vision path and of the VLM's it wraps (VideoLLaMA 3's passes its
    keyword arguments on): (height, width) of each image, per-image merge sizes, a high-resolution view."""
    names: list[str] = []
    for obj in (model, getattr(model, "model", None)):
        fn = getattr(obj, "get_image_features", None)
        if not callable(fn):
            continue
        for p in inspect.signature(fn).parameters.values():
            if p.default is p.empty and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name not in names:
                names.append(p.name)
    return names


def _image_features_fn(model: torch.nn.Module) -> Callable | None:
    """The model's vision path, or that of the VLM it wraps (ShieldGemma 2 wraps Gemma 3 as ``model``)."""
    for obj in (model, getattr(model, "model", None)):
        fn = getattr(obj, "get_image_features", None)
        if callable(fn):
            return fn
    return None


def _image_token_id(config: Any) -> int | None:
    for key in IMAGE_TOKEN_KEYS:
        v = getattr(config, key, None)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            return v
    return None


def _features_per_image(feats: Any, images: int) -> list[int] | None:
    """How many embeddings the vision tower made for each image, from get_image_features' output."""
    if not isinstance(feats, (torch.Tensor, list, tuple)):  # a ModelOutput: the projected features
        feats = next(
            (
                v
                for v in (getattr(feats, "pooler_output", None), getattr(feats, "last_hidden_state", None))
                if v is not None
            ),
            None,
        )
    if isinstance(feats, (list, tuple)) and feats and all(isinstance(t, torch.Tensor) for t in feats):
        if len(feats) == images:
            return [int(t.shape[0]) if t.ndim == 2 else int(t.shape[-2]) for t in feats]
        feats = torch.cat([t.reshape(-1, t.shape[-1]) for t in feats])
    if isinstance(feats, torch.Tensor):
        if feats.ndim == 3 and feats.shape[0] == images:
            return [int(feats.shape[1])] * images
        if feats.ndim == 2 and feats.shape[0] % images == 0:
            return [int(feats.shape[0]) // images] * images
    return None


def _insert_image_tokens(
    model: torch.nn.Module, config: Any, out: dict[str, torch.Tensor], params: dict[str, Any]
) -> None:
    """Vision-language models replace image placeholder tokens in the text by image embeddings, one
    per embedding. Count the embeddings the vision tower makes for these pixels and put that many
    placeholders (between the vision start/end tokens, where the config has them) before each row's
    text, as the model's processor would."""
    tok = _image_token_id(config)
    ids = out.get("input_ids")
    if (
        tok is None
        or ids is None
        or "pixel_values" not in out
        or _image_features_fn(model) is None
        or bool((ids == tok).any())
    ):
        return
    image_features = _image_features_fn(model)
    image_params = set(inspect.signature(image_features).parameters)
    if any(p.kind == p.VAR_KEYWORD for p in inspect.signature(image_features).parameters.values()):
        image_params |= set(_vision_path_needs(model))  # passed on to the wrapped VLM's vision path
    kwargs = {
        k: v for k, v in out.items() if k in image_params and k not in ("input_ids", "attention_mask", "token_type_ids")
    }
    with torch.no_grad():
        feats = image_features(**kwargs)
    counts = _features_per_image(feats, ids.shape[0])
    if not counts or len(set(counts)) != 1:
        return
    prefix = [tok] * counts[0]
    start, end = getattr(config, "vision_start_token_id", None), getattr(config, "vision_end_token_id", None)
    if isinstance(start, int) and isinstance(end, int):
        prefix = [start, *prefix, end]
    head = torch.tensor(prefix, dtype=ids.dtype).expand(ids.shape[0], -1)
    out["input_ids"] = torch.cat([head, ids], dim=1)
    for name, fill in (("attention_mask", 1), ("token_type_ids", 0)):
        if name in out:
            t = out[name]
            out[name] = torch.cat([torch.full((t.shape[0], len(prefix)), fill, dtype=t.dtype), t], dim=1)
    if "mm_token_type_ids" in params:  # which tokens are image (1) and which text (0), as processors return it
        out["mm_token_type_ids"] = (out["input_ids"] == tok).to(torch.int32)


def _end_with_eos(inputs: dict[str, torch.Tensor], config: Any) -> None:
    """Text ends with the end-of-sequence token, exactly once per row, as tokenizers produce it
    (sequence classifiers such as BART's pool at the EOS position and check that)."""
    text = getattr(config, "text_config", None) or config
    eos = getattr(text, "eos_token_id", None)
    eos = eos[0] if isinstance(eos, (list, tuple)) and eos else eos
    ids = inputs["input_ids"]
    vocab = getattr(text, "vocab_size", None) or int(ids.max()) + 1
    if not isinstance(eos, int) or isinstance(eos, bool) or not 0 <= eos < vocab:
        return
    ids[ids == eos] = (eos + 1) % vocab if (eos + 1) % vocab != eos else 0
    mask = inputs.get("attention_mask")
    lengths = mask.sum(dim=1) if mask is not None else torch.full((ids.shape[0],), ids.shape[1])
    for row, n in enumerate(lengths.tolist()):
        ids[row, max(int(n) - 1, 0)] = eos


def _ask_question(inputs: dict[str, torch.Tensor], config: Any) -> None:
    """Span selectors that answer at question tokens (Splinter's ``question_token_id``, [QUESTION]) find
    one in every row, as their tokenizer puts it after the question: the second position here."""
    qid = getattr(config, "question_token_id", None)
    ids = inputs["input_ids"]
    if isinstance(qid, int) and not isinstance(qid, bool) and ids.dim() == 2 and ids.shape[1] > 2:
        ids[ids == qid] = (qid + 1) % max(int(getattr(config, "vocab_size", 0) or 0), qid + 2)
        ids[:, 1] = qid


def describe(inputs: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in inputs.items()}
