"""Generic shrinking of a transformers config to a tiny one that keeps its structure.

Works on the config's dict form, recursively through nested sub-configs (text/vision/audio,
encoder/decoder), then re-establishes the constraints between sizes (heads divide widths, kv
heads divide heads, ``layer_types`` match the depth, token ids stay inside the vocabulary).
"""

from __future__ import annotations

import copy
import math
from typing import Any

LAYERS = {
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_encoder_layers",
    "num_decoder_layers",
    "num_text_layers",
    "num_vision_layers",
}
WIDTH = {
    "hidden_size",
    "d_model",
    "n_embd",
    "embed_dim",
    "dim",
    "word_embed_proj_dim",
    "embedding_size",
    "pooler_hidden_size",
    "pooler_output_size",  # a ViT pooler's output, which dual encoders (VisionTextDualEncoder) project
    "projection_size",
    "reassemble_hidden_size",
    "fpn_hidden_size",  # SAM 2/3's vision neck: the width the prompt encoder and mask decoder read
    "hidden_size_global",  # a byte-level encoder/decoder's view of the global model's width (BLT)
}
HEADS = {"num_attention_heads", "n_head", "num_heads", "encoder_attention_heads", "decoder_attention_heads", "n_heads"}
KV_HEADS = {
    "num_key_value_heads",
    "n_kv_heads",
    "num_kv_heads",
    "multi_query_group_num",
    "num_key_value_attention_heads",
}
PER_LAYER_KV_HEADS = {"num_key_value_heads_per_layer"}  # one key/value head count a layer (Sapiens 2)
PER_LAYER_HEADS = {"num_attention_heads_per_layer"}  # one query head count a layer (Laguna)
HEAD_DIM = {"head_dim", "d_kv", "kv_channels", "attention_head_size", "d_head"}
FFN = {
    "intermediate_size",
    "ffn_dim",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
    "d_ff",
    "n_inner",
    "moe_intermediate_size",
    "shared_expert_intermediate_size",
}
EXPERTS = {"num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"}
EXPERTS_PER_TOKEN = {"num_experts_per_tok", "num_experts_per_token", "top_k", "moe_topk", "moe_k"}
WIDTH_LISTS = {"hidden_sizes", "conv_dim", "embed_dims", "channels", "filter_sizes"}
DEPTH_LISTS = {"depths", "layers_per_block", "num_blocks_per_stage"}
# EfficientNet-style compound scaling (ALIGN's and EfficientNet's towers): B7's depth coefficient
# 3.1 repeats every stage's blocks; 0.5 keeps each stage, one block of each kind. The width
# coefficient stays: ALIGN's image embedding is the last stage's width, tied to projection_dim.
SCALING = {"depth_coefficient"}
TINY_SCALING = 0.5
# learned queries whose outputs take one text position each (Kosmos-2's image embeddings): the text holds them all
IMAGE_QUERIES = {"latent_query_num"}
TINY_IMAGE_QUERIES = 4
WIDTH_PARTS = {"axial_pos_embds_dim"}  # parts concatenated to the width (Reformer's axial position embeddings)

TINY_WIDTH = 64
TINY_HEADS = 4
TINY_KV_HEADS = 2
TINY_FFN = 128
TINY_LAYERS = 2
TINY_EXPERTS = 4


def _shrink_list(values: list, cap: int) -> list:
    out = []
    for i, v in enumerate(values):
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            out.append(min(v, cap * 2 ** min(i, 2)))
        else:
            out.append(v)
    return out


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def shrink_dict(cfg: dict[str, Any]) -> dict[str, Any]:
    """Shrink one config level (and its nested config dicts) in place; returns it."""
    layers_before = next((cfg[k] for k in LAYERS if _is_int(cfg.get(k)) and cfg[k] > 0), None)
    # the values per-layer overrides are merged into, as they were before shrinking
    unshrunk = {k: copy.deepcopy(v) for k, v in cfg.items() if k != PER_LAYER_CONFIG and not isinstance(v, dict)}
    # stage-list backbones (ResNet, Swin: ``depths``) count stages, not layers, in num_layers
    stage_based = any(isinstance(cfg.get(k), list) for k in DEPTH_LISTS)
    tied = _tied_to_first_stage(cfg)
    # depthwise convolutions (Mimi's upsampler): as many groups as channels, whatever the width becomes
    depthwise = {
        k: w
        for k, v in cfg.items()
        if k.endswith("_groups") and _is_int(v)
        for w in sorted(WIDTH)
        if _is_int(cfg.get(w)) and cfg[w] == v
    }
    # multi-head attention (as many key/value heads as query heads) stays multi-head: some configs refuse
    # grouped-query attention (ESMC)
    one_kv_per_head = {
        kv: h for kv in sorted(KV_HEADS) for h in sorted(HEADS) if _is_int(cfg.get(h)) and cfg.get(kv) == cfg[h] > 0
    }
    vision_layers_before = _depth(cfg.get("vision_config"))
    types_before = cfg.get("layer_types")
    layer_kinds = list(dict.fromkeys(types_before)) if _str_list(types_before) else []
    width_refs = _width_refs(cfg)
    shuffled_before = _shuffled_width(cfg.get("vision_config"))
    shuffled = [k for k in VISION_OUT_WIDTH if shuffled_before and cfg.get(k) == shuffled_before]
    for key, value in list(cfg.items()):
        if key == PER_LAYER_CONFIG:
            continue  # overrides by layer index: after the depth is known
        if isinstance(value, dict) and (
            "model_type" in value or key.endswith("_config") or key in ("encoder", "decoder")
        ):
            shrink_dict(value)
        elif _is_int(value) and value > 0:
            if key in LAYERS:
                if not stage_based:
                    cfg[key] = min(value, TINY_LAYERS)
            elif key in WIDTH:
                cfg[key] = min(value, TINY_WIDTH)
            elif key in HEADS:
                cfg[key] = min(value, TINY_HEADS)
            elif key in KV_HEADS:
                cfg[key] = min(value, TINY_KV_HEADS)
            elif key in FFN:
                cfg[key] = min(value, TINY_FFN)
            elif key in EXPERTS:
                cfg[key] = min(value, TINY_EXPERTS)
            elif key in IMAGE_QUERIES:
                cfg[key] = min(value, TINY_IMAGE_QUERIES)
        elif key in SCALING and isinstance(value, float) and value > TINY_SCALING:
            cfg[key] = TINY_SCALING
        elif isinstance(value, list) and value and all(_is_int(v) for v in value):
            if key in WIDTH_LISTS:
                cfg[key] = _shrink_list(value, 16)
            elif key in DEPTH_LISTS:
                cfg[key] = [min(v, 1) for v in value]
    # per-layer lists (layer types, per-layer FFN widths, hybrid block kinds, sparsity) follow the
    # depth; integer lists other than FFN widths are stage lists (depths, heads) and stay as they are
    layers_after = next((cfg[k] for k in LAYERS if _is_int(cfg.get(k)) and cfg[k] > 0), None)
    if layers_before and layers_after and layers_after < layers_before:
        for key, value in list(cfg.items()):
            if _is_per_layer(key, value, layers_before):
                value = value[:layers_after]
                cfg[key] = [min(v, TINY_FFN) for v in value] if key in FFN and all(_is_int(v) for v in value) else value
        # the global-attention layers of a windowed tower (SAM's ViT: 2, 5, 8, 11 of 12): those that still exist
        # stay; where none does, the last layer is the one global layer among windowed ones
        for key in GLOBAL_LAYER_INDICES:
            if _int_list(cfg.get(key)):
                cfg[key] = [i for i in cfg[key] if 0 <= i < layers_after] or [layers_after - 1]
    heads_now = next((cfg[k] for k in sorted(HEADS) if _is_int(cfg.get(k)) and cfg[k] > 0), None)
    for key in PER_LAYER_KV_HEADS:  # each layer's key/value heads divide the shrunk query heads
        if heads_now and _int_list(cfg.get(key)):
            cfg[key] = [math.gcd(heads_now, min(v, TINY_KV_HEADS)) for v in cfg[key]]
    _keep_layer_kinds(cfg, layer_kinds, types_before if layer_kinds else [])
    if isinstance(cfg.get(PER_LAYER_CONFIG), dict):
        _keep_per_layer_overrides(cfg, layers_after, unshrunk)
    for key, stages in tied.items():  # still the first stage's width, now shrunk
        cfg[key] = cfg[stages][0]
    for key, width in depthwise.items():
        cfg[key] = cfg[width]
    for key in FROM_OWN_WIDTH:
        if _is_int(cfg.get(key)) and _is_int(cfg.get("hidden_size")):
            cfg[key] = cfg["hidden_size"]
    if not stage_based:
        _keep_backbone_outputs(cfg, layers_before)
    _fix_constraints(cfg)
    for kv, heads in one_kv_per_head.items():
        cfg[kv] = cfg[heads]
    _fit_per_layer_heads(cfg)
    for child, key, source, width in width_refs:  # still the width they name, now shrunk
        cfg[child][key] = (cfg if source is None else cfg[source])[width]
    _keep_feature_layers_in_range(cfg, vision_layers_before)
    _fix_vision_language(cfg)
    for key in shuffled:  # the tower's pixel-shuffled output the adapter reads (Muse Glimmer): still width x merge²
        cfg[key] = _shuffled_width(cfg["vision_config"])
    return cfg


def _str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _keep_layer_kinds(cfg: dict[str, Any], kinds: list, types_before: list) -> None:
    """The shrunk stack keeps a layer of every kind the full one has, where it is deep enough (OLMo Hybrid: three
    linear-attention layers, then a full-attention one): the last layers of kinds it repeats become the missing."""
    types = cfg.get("layer_types")
    if not isinstance(types, list) or not types or len(kinds) > len(types):
        return
    for kind in [k for k in kinds if k not in types]:
        i = max(j for j, t in enumerate(types) if types.count(t) > 1)
        types[i] = kind
        _take_overrides_of_kind(cfg, i, types_before.index(kind))


def _take_overrides_of_kind(cfg: dict[str, Any], layer: int, model: int) -> None:
    """A layer that became another kind takes the per-layer overrides of the full stack's first layer of that kind
    (Dots3 Note's sliding-window layers override their query/key head split)."""
    overrides = cfg.get(PER_LAYER_CONFIG)
    if not isinstance(overrides, dict):
        return
    by_index = {}
    for key in overrides:
        try:
            by_index[int(key)] = key
        except (TypeError, ValueError):
            return  # keyed by something else than a layer index
    key = by_index.get(layer)
    if key is not None:
        del overrides[key]
    source = by_index.get(model)
    if source is not None:
        overrides[str(layer).zfill(len(str(source))) if isinstance(source, str) else layer] = copy.deepcopy(
            overrides[source]
        )


def _shuffled_width(vision: Any) -> int | None:
    """A vision tower's output width after pixel-shuffling merge x merge patches into one: hidden size x merge²."""
    if not isinstance(vision, dict) or not _is_int(vision.get("hidden_size")):
        return None
    merge = next((vision[k] for k in ("merge_size", "spatial_merge_size") if _is_int(vision.get(k))), None)
    return vision["hidden_size"] * merge**2 if merge and merge > 1 else None


GLOBAL_LAYER_INDICES = ("global_attn_indexes",)
FORECAST_HORIZON = 4  # steps a forecaster predicts, where its default config leaves that unset
KV_SHARED_LAYERS = ("num_kv_shared_layers",)  # trailing layers that reuse an earlier layer's cache (Gemma 3n)


PER_LAYER_CONFIG = "per_layer_config"  # {layer index: overrides of the config's values for that layer}


def _keep_per_layer_overrides(cfg: dict[str, Any], layers: int | None, unshrunk: dict[str, Any]) -> None:
    """Heterogeneous configs override values layer by layer (Gemma 4: a wider head on its full-attention layers):
    the layers the shrunk depth keeps keep their overrides, shrunk by the same rules as the config around them;
    the overrides of layers that are gone go too."""
    kept = {}
    plain = shrink_dict(copy.deepcopy(unshrunk))  # what the layers without overrides get
    for index, override in cfg[PER_LAYER_CONFIG].items():
        try:
            alive = layers is None or int(index) < layers
        except (TypeError, ValueError):
            alive = True
        if not alive or not isinstance(override, dict):
            continue
        merged = shrink_dict({**copy.deepcopy(unshrunk), **copy.deepcopy(override)})
        kept[index] = {k: merged.get(k, v) for k, v in override.items()}
        # a size the layer's overrides change once shrunk (its head dim, the sum of an overridden split) is its own
        own = {k: v for k, v in merged.items() if k not in kept[index] and _is_int(v) and _is_int(plain.get(k))}
        kept[index].update({k: v for k, v in own.items() if v != plain[k]})
    cfg[PER_LAYER_CONFIG] = kept


# widths a sub-config reads from another config (a flow head conditioned on the backbone's hidden states, a
# diarization head over its audio encoder's, SAM-HQ's decoder over the ViT's, SuperPoint's descriptors as SuperGlue
# reads them, PP-FormulaNet's vision tower projecting to its text decoder's width); each checked against the width it
# names
WIDTH_REFS = {"condition_dim", "audio_hidden_size", "vit_dim", "descriptor_decoder_dim", "decoder_hidden_size"}


def _width_refs(cfg: dict[str, Any]) -> list[tuple[str, str, str | None, str]]:
    """The references of :data:`WIDTH_REFS` in this level's sub-configs, each to the width of this level (source
    None) or of a sibling sub-config that it equals before shrinking: (sub-config, key, source, width key)."""
    subs = {k: v for k, v in cfg.items() if isinstance(v, dict)}
    refs = []
    for child, node in subs.items():
        for key in sorted(WIDTH_REFS):
            if not _is_int(node.get(key)):
                continue
            sources = [(None, cfg)] + [(k, v) for k, v in subs.items() if k != child]
            found = next(
                ((name, w) for name, src in sources for w in sorted(WIDTH) if src.get(w) == node[key]),
                None,
            )
            if found:
                refs.append((child, key, *found))
    return refs


def _fit_per_layer_heads(cfg: dict[str, Any]) -> None:
    """Per-layer query head counts (already cut to the depth) shrink with the query heads: each at most the shrunk
    head count, and a multiple of the key/value heads it groups over."""
    heads = next((cfg[k] for k in sorted(HEADS) if _is_int(cfg.get(k)) and cfg[k] > 0), None)
    kv = next((cfg[k] for k in sorted(KV_HEADS) if _is_int(cfg.get(k)) and cfg[k] > 0), 1)
    for key in PER_LAYER_HEADS:
        if heads and _int_list(cfg.get(key)):
            cfg[key] = [max(min(v, heads) // kv * kv, kv) for v in cfg[key]]


def _depth(cfg: Any) -> int | None:
    if not isinstance(cfg, dict):
        return None
    return next((cfg[k] for k in sorted(LAYERS) if _is_int(cfg.get(k)) and cfg[k] > 0), None)


FEATURE_LAYERS = ("vision_feature_layer", "vision_feature_layers")  # vision tower layers a VLM's adapter reads


def _keep_feature_layers_in_range(cfg: dict[str, Any], before: int | None) -> None:
    """The vision tower layers an adapter reads (Molmo 2: layers 24 and 18 of 25) are indices into a shrunk
    stack: each keeps its distance from the last layer, as far as the shrunk depth allows (negative indices
    already count from the end, and are clamped to it)."""
    after = _depth(cfg.get("vision_config"))
    if not before or not after or after >= before:
        return

    def fit(i: int) -> int:
        return max(after - (before - i), 0) if i >= 0 else max(i, -after)

    nodes = [cfg] + [v for k, v in cfg.items() if isinstance(v, dict) and k != "vision_config"]
    for node in nodes:
        for key in FEATURE_LAYERS:
            value = node.get(key)
            if _is_int(value):
                node[key] = fit(value)
            elif _int_list(value):
                node[key] = [fit(i) for i in value]


def _tied_to_first_stage(cfg: dict[str, Any]) -> dict[str, str]:
    """Widths that are the first stage's width of a stage-width list (a stem's output channels:
    TextNet): key -> the list they follow."""
    tied = {}
    for stages in sorted(WIDTH_LISTS):
        first = cfg[stages][0] if _int_list(cfg.get(stages)) else None
        for key, value in cfg.items():
            if first and value == first and _is_int(value) and (key in WIDTH or key.endswith("_channels")):
                tied.setdefault(key, stages)
    return tied


SPECIAL_TOKENS = (
    "image_token_id",
    "image_token_index",
    "video_token_id",
    "video_token_index",
    "vision_start_token_id",
    "vision_end_token_id",
)
VISION_OUT_WIDTH = ("projection_dim", "out_hidden_size")  # what a VLM's vision tower hands the text model


TO_TEXT_WIDTH = ("text_hidden_size", "adapter_out_dim")  # a modality tower's output width: the text model's width
FROM_OWN_WIDTH = ("adapter_in_dim", "adapter_input_size")  # a tower's adapter reads the tower's own hidden states


def _fix_vision_language(cfg: dict[str, Any]) -> None:
    """A vision-language model puts image embeddings where its image tokens are: the vision tower's
    output width must be the text width, and every special token id below the text vocabulary."""
    vision, text = cfg.get("vision_config"), cfg.get("text_config")
    if not isinstance(vision, dict) or not isinstance(text, dict):
        return
    width = next((text[k] for k in ("hidden_size", "d_model", "n_embd") if _is_int(text.get(k))), None)
    if width:  # a tower that names the text width it projects to
        for node in [v for k, v in cfg.items() if isinstance(v, dict) and k != "text_config"]:
            for key in TO_TEXT_WIDTH:
                if _is_int(node.get(key)):
                    node[key] = width
    # the composite's own note of the tower's width (Nemotron 3 Omni's projector reads it): the shrunk tower's
    if _is_int(cfg.get("vision_hidden_size")) and _is_int(vision.get("hidden_size")):
        cfg["vision_hidden_size"] = vision["hidden_size"]
    ids = [cfg[k] for k in SPECIAL_TOKENS if _is_int(cfg.get(k)) and cfg[k] >= 0]
    if not ids:
        return
    if width:  # so does an audio tower beside it (Muse Spark's scatters its output onto the text embeddings)
        for node in [n for n in (vision, cfg, cfg.get("audio_config")) if isinstance(n, dict)]:
            for key in VISION_OUT_WIDTH:
                if _is_int(node.get(key)):
                    node[key] = width
    if _is_int(text.get("vocab_size")) and text["vocab_size"] <= max(ids):
        text["vocab_size"] = max(ids) + 1


OUT_KEYS = ("out_features", "out_indices", "_out_features", "_out_indices")


def _is_per_layer(key: str, value: Any, layers: int) -> bool:
    """One entry per layer: layer types, per-layer FFN widths, hybrid block kinds, sparsity.
    Integer lists other than FFN widths are stage lists (depths, heads); backbone outputs and
    stage names are kept by :func:`_keep_backbone_outputs`."""
    if not isinstance(value, list) or len(value) != layers or key in OUT_KEYS or key == "stage_names":
        return False
    return (
        key in FFN
        or key in PER_LAYER_INDICES
        or key in PER_LAYER_KV_HEADS
        or key in PER_LAYER_HEADS
        or all(isinstance(v, str) for v in value)
        or all(isinstance(v, float) for v in value)
    )


# per-layer lists of earlier layer indices (each layer's key/value source, at most the layer itself: Mistral Large 4):
# cut to the shrunk depth, every index still names a layer that exists
PER_LAYER_INDICES = {"kv_source_layers"}


def _int_list(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(_is_int(i) for i in value)


def _keep_backbone_outputs(cfg: dict[str, Any], layers_before: int | None) -> None:
    """Layer-indexed backbones (ViT: ``num_hidden_layers``) expose some layers (``out_indices``/
    ``out_features``, DPT's 0-based ``backbone_out_indices``) to a neck that expects that many
    feature maps: keep one layer per exposed output, the last ``n`` of a depth of at least ``n``.
    (Stage-list backbones keep their stages, each shallower, so their outputs stay as they are.)"""
    layers_key = next((k for k in LAYERS if _is_int(cfg.get(k)) and cfg[k] > 0), None)
    if layers_key is None or layers_before is None:
        return
    zero_based = cfg.get("backbone_out_indices")
    if _int_list(zero_based):
        cfg[layers_key] = max(cfg[layers_key], len(zero_based))
        cfg["backbone_out_indices"] = list(range(cfg[layers_key] - len(zero_based), cfg[layers_key]))
    indices = next(
        (cfg[k] for k in ("out_indices", "_out_indices") if isinstance(cfg.get(k), (list, tuple)) and cfg[k]), None
    )
    if indices is None or not _int_list(indices):
        if any(cfg.get(k) is not None for k in OUT_KEYS):  # named outputs we cannot map: the default
            for key in OUT_KEYS:
                if key in cfg:
                    cfg[key] = None
        return
    n = len(indices)
    depth = max(cfg[layers_key], n)
    cfg[layers_key] = depth
    new = list(range(depth - n + 1, depth + 1))
    for key in ("out_indices", "_out_indices"):
        if key in cfg:
            cfg[key] = new
    for key in ("out_features", "_out_features"):
        if key in cfg:
            cfg[key] = [f"stage{i}" for i in new]
    if isinstance(cfg.get("stage_names"), list):
        cfg["stage_names"] = ["stem"] + [f"stage{i}" for i in range(1, depth + 1)]


def _largest_divisor_at_most(n: int, cap: int) -> int:
    for d in range(min(n, cap), 0, -1):
        if n % d == 0:
            return d
    return 1


def _fix_constraints(cfg: dict[str, Any]) -> None:
    head_dim_before = cfg.get("head_dim")
    # hierarchical (Swin-style) stages double the width each stage: stage heads must divide it
    stage_heads = cfg.get("num_heads")
    if (
        isinstance(stage_heads, list)
        and stage_heads
        and all(_is_int(h) for h in stage_heads)
        and _is_int(cfg.get("embed_dim"))
        and isinstance(cfg.get("depths"), list)
    ):
        cfg["num_heads"] = [_largest_divisor_at_most(cfg["embed_dim"] * 2**i, h) for i, h in enumerate(stage_heads)]
    # per-stage widths with per-stage heads (SegFormer, GLPN): each stage's heads divide its width
    stage_widths, heads_list = cfg.get("hidden_sizes"), cfg.get("num_attention_heads")
    if (
        isinstance(stage_widths, list)
        and isinstance(heads_list, list)
        and len(stage_widths) == len(heads_list)
        and all(_is_int(x) for x in stage_widths + heads_list)
    ):
        cfg["num_attention_heads"] = [_largest_divisor_at_most(w, h) for w, h in zip(stage_widths, heads_list)]
    width_key = next((k for k in WIDTH if _is_int(cfg.get(k))), None)
    heads_key = next((k for k in HEADS if _is_int(cfg.get(k))), None)
    if width_key and heads_key:
        width = cfg[width_key]
        for hk in HEADS:
            if _is_int(cfg.get(hk)):
                cfg[hk] = _largest_divisor_at_most(width, cfg[hk]) if width % cfg[hk] else cfg[hk]
        heads = cfg[heads_key]
        for key in HEAD_DIM:
            if _is_int(cfg.get(key)) and cfg[key] > 0:
                cfg[key] = max(width // heads, 2)
                if cfg[key] % 2:
                    cfg[key] += 1
        head_dim = cfg.get("head_dim") if _is_int(cfg.get("head_dim")) else width // max(heads, 1)
        for key in ("rotary_dim",):
            if _is_int(cfg.get(key)) and cfg[key] > head_dim:
                cfg[key] = head_dim
        for key in KV_HEADS:
            if _is_int(cfg.get(key)) and heads % cfg[key]:
                cfg[key] = math.gcd(heads, cfg[key])
    experts = next((cfg[k] for k in EXPERTS if _is_int(cfg.get(k))), None)
    for key in EXPERTS_PER_TOKEN:
        if experts and _is_int(cfg.get(key)):
            cfg[key] = min(cfg[key], experts)
    if experts and "num_experts_per_tok" in cfg and cfg["num_experts_per_tok"] is None:
        cfg["num_experts_per_tok"] = min(2, experts)  # left unset by a default config (DeepSeek-V2): route to two
    # expert groups: a token's experts come from its best groups; with the experts shrunk, one group of them all
    for key in EXPERT_GROUPS:
        if experts and _is_int(cfg.get(key)) and cfg[key] > 1:
            cfg[key] = 1
    layers = next((cfg[k] for k in ("num_hidden_layers", "num_layers", "n_layer") if _is_int(cfg.get(k))), None)
    if layers and isinstance(cfg.get("layer_types"), list):
        cfg["layer_types"] = cfg["layer_types"][:layers]
    # trailing layers that reuse the cache of the last earlier layer of their kind (Gemma 3n: 15 of 35): the layers
    # before them still hold one layer of every kind the shrunk stack has
    for key in KV_SHARED_LAYERS:
        if layers and _is_int(cfg.get(key)):
            kinds = len(set(cfg["layer_types"])) if isinstance(cfg.get("layer_types"), list) else 1
            cfg[key] = max(min(cfg[key], layers - kinds), 0)
    for key in ("max_window_layers",):
        if layers and _is_int(cfg.get(key)):
            cfg[key] = min(cfg[key], layers)
    for key in ("moe_layer_end_index",):
        if layers and _is_int(cfg.get(key)):
            cfg[key] = min(cfg[key], layers - 1)
    # Mamba-2 mixers: heads x head dim must equal expand x hidden size (names vary by model)
    mh = next((k for k in ("mamba_n_heads", "n_mamba_heads") if _is_int(cfg.get(k))), None)
    md = next((k for k in ("mamba_d_head", "mamba_headdim") if _is_int(cfg.get(k))), None)
    if width_key and mh and md and _is_int(cfg.get("mamba_expand")):
        inner = cfg["mamba_expand"] * cfg[width_key]
        if _is_int(cfg.get("mamba_d_ssm")):  # an explicit inner width (Falcon-H1) shrinks with the model
            cfg["mamba_d_ssm"] = inner
        if inner % cfg[mh] == 0 and inner // cfg[mh] >= 2:  # keep the heads, shrink each
            cfg[md] = inner // cfg[mh]
        else:
            if inner % cfg[md]:
                cfg[md] = _largest_divisor_at_most(inner, cfg[md])
            cfg[mh] = inner // cfg[md]
        for groups in ("mamba_n_groups", "mamba_ngroups"):
            if _is_int(cfg.get(groups)) and cfg[mh] % cfg[groups]:
                cfg[groups] = math.gcd(cfg[mh], cfg[groups])
    # probabilistic forecasters (Time Series Transformer, Informer, Autoformer) leave the horizon unset: a short one,
    # the context as long as it, as their configs default it
    if "prediction_length" in cfg and cfg["prediction_length"] is None:
        cfg["prediction_length"] = FORECAST_HORIZON
        if "context_length" in cfg and cfg["context_length"] is None:
            cfg["context_length"] = FORECAST_HORIZON
    # the decoder starts from the context's last label_length steps (Autoformer): no more than the context has
    if _is_int(cfg.get("label_length")) and _is_int(cfg.get("context_length")):
        cfg["label_length"] = min(cfg["label_length"], cfg["context_length"])
    if "head_dim" in cfg and cfg["head_dim"] is None and width_key and heads_key:
        cfg["head_dim"] = cfg[width_key] // cfg[heads_key]  # "derive it" made explicit: some modeling code reads it raw
    if heads_key:  # an unset kv head count means one per query head; some modeling code reads it raw (Nemotron)
        for key in KV_HEADS:
            if key in cfg and cfg[key] is None:
                cfg[key] = cfg[heads_key]
    _fix_group_norm(cfg)
    _fix_latent_attention(cfg, heads_key, head_dim_before)
    for key in WIDTH_PARTS:  # the parts keep their proportions and add up to the shrunk width
        parts = cfg.get(key)
        if width_key and _int_list(parts) and sum(parts) != cfg[width_key] and cfg[width_key] >= len(parts):
            scaled = [max(cfg[width_key] * p // sum(parts), 1) for p in parts]
            scaled[-1] += cfg[width_key] - sum(scaled)
            cfg[key] = scaled
    # rotary sections (mrope) must sum to half the rotary dims
    rope = cfg.get("rope_scaling") or cfg.get("rope_parameters")
    if isinstance(rope, dict) and isinstance(rope.get("mrope_section"), list):
        rope["mrope_section"] = _mrope_sections(cfg, rope, len(rope["mrope_section"])) or rope["mrope_section"]


def _mrope_sections(cfg: dict[str, Any], rope: dict[str, Any], axes: int) -> list[int] | None:
    """Multimodal rotary sections, one per position axis, that split half the rotary dims (the head dim, or the
    ``partial_rotary_factor`` share of it that GLM-4V-MoE and Qwen 3.5 rotate). The last takes the remainder: the
    others stay equal, as ERNIE 4.5 VL's interleaved height and width sections must be."""
    width = next((cfg[k] for k in ("hidden_size", "d_model", "n_embd", "dim") if _is_int(cfg.get(k))), None)
    heads = next((cfg[k] for k in ("num_attention_heads", "n_head", "num_heads") if _is_int(cfg.get(k))), 0)
    head_dim = cfg["head_dim"] if _is_int(cfg.get("head_dim")) else (width // heads if width and heads > 0 else 0)
    if not head_dim or axes < 1:
        return None
    factor = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor"))
    half = int(head_dim * (factor if isinstance(factor, float) and 0 < factor <= 1 else 1.0)) // 2
    sections = [half // axes] * axes
    sections[-1] += half - sum(sections)
    return sections


MROPE_AXES = 3  # (time, height, width): the axes of every default mrope_section in the modeling code


def fill_mrope_sections(cfg: dict[str, Any], config: Any) -> dict[str, Any]:
    """Multimodal rotary embeddings (Qwen2-VL, GLM-4V, HunYuan-VL) split the rotary dims into sections, one per
    position axis. Default configs leave ``mrope_section`` unset, and the modeling code then falls back to sections
    sized for the full head (Qwen2.5-VL: 16 + 24 + 24 of a 128-wide head), which a tiny head cannot split. A config
    that names the key among its rope parameters (``ignore_keys_at_rope_validation``) gets three sections sized for
    its shrunk head. ``cfg`` is the shrunk dict of ``config``; nested configs are walked alongside."""
    if "mrope_section" in (getattr(config, "ignore_keys_at_rope_validation", None) or ()):
        rope = cfg.get("rope_parameters")
        # one flat set of rope parameters (not one set per layer type) that lacks the sections
        if isinstance(rope, dict) and "rope_type" in rope and rope.get("mrope_section") is None:
            sections = _mrope_sections(cfg, rope, MROPE_AXES)
            if sections:
                rope["mrope_section"] = sections
    for key, value in cfg.items():
        if isinstance(value, dict):
            try:
                sub = getattr(config, key, None)
            except Exception:  # noqa: BLE001  (per-layer configs refuse some global attributes)
                continue
            if sub is not None and hasattr(sub, "to_dict"):
                fill_mrope_sections(value, sub)
    return cfg


EXPERT_GROUPS = ("n_group", "num_expert_group", "topk_group")
LATENT_SIZES = {"kv_lora_rank": 32, "q_lora_rank": 32, "qk_rope_head_dim": 16, "qk_nope_head_dim": 16, "v_head_dim": 16}


def _fix_latent_attention(cfg: dict[str, Any], heads_key: str | None, head_dim_before: Any) -> None:
    """Multi-head latent attention (DeepSeek-V2/V3 and their kin: ``kv_lora_rank``) sizes its own
    ranks and head dims: shrink them, keep one key/value head per query head, the query/key head
    dim the sum of its parts, and ``head_dim`` what it was of them: the rotary part (DeepSeek) or
    the whole query/key head (Mistral 4, whose rotary share of it stays as it was)."""
    if not _is_int(cfg.get("kv_lora_rank")):
        return
    nope, rope = cfg.get("qk_nope_head_dim"), cfg.get("qk_rope_head_dim")
    whole_head = _is_int(nope) and _is_int(rope) and head_dim_before == nope + rope
    for key, cap in LATENT_SIZES.items():
        if _is_int(cfg.get(key)) and cfg[key] > 0:
            cfg[key] = min(cfg[key], cap)
    if heads_key:
        for key in KV_HEADS:
            if _is_int(cfg.get(key)):
                cfg[key] = cfg[heads_key]
    nope, rope = cfg.get("qk_nope_head_dim"), cfg.get("qk_rope_head_dim")
    if _is_int(nope) and _is_int(rope):
        if _is_int(cfg.get("qk_head_dim")):
            cfg["qk_head_dim"] = nope + rope
        if _is_int(cfg.get("head_dim")):
            cfg["head_dim"] = nope + rope if whole_head else rope
        rope_params = cfg.get("rope_parameters") or cfg.get("rope_scaling")
        if whole_head and isinstance(rope_params, dict) and "partial_rotary_factor" in rope_params:
            rope_params["partial_rotary_factor"] = rope / (nope + rope)


def _fix_group_norm(cfg: dict[str, Any]) -> None:
    """Stage-list conv nets with group norm (BiT): the groups must divide every channel count, the
    shrunk stage widths and the bottleneck widths inside a stage alike (``bottle_ratio`` of its width,
    where the config has one, else a quarter: the ResNet/BiT bottleneck, a constructor default there)."""
    widths = [v for k in WIDTH_LISTS if _int_list(cfg.get(k)) for v in cfg[k]]
    if not widths or not _is_int(cfg.get("num_groups")) or cfg["num_groups"] <= 1:
        return
    widths += [cfg[k] for k in WIDTH if _is_int(cfg.get(k)) and cfg[k] > 0]
    ratio = cfg.get("bottle_ratio", 0.25)
    if isinstance(ratio, float) and 0 < ratio < 1:
        widths.append(max(int(min(widths) * ratio), 1))
    cfg["num_groups"] = _largest_divisor_at_most(math.gcd(*widths), cfg["num_groups"])


def apply_overrides(cfg: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Set dotted keys (``vision_config.image_size``) in a config dict."""
    for dotted, value in overrides.items():
        node = cfg
        parts = dotted.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return cfg
