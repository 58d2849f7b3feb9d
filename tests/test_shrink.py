"""Generic shrinking keeps every constraint between sizes."""

from __future__ import annotations

from transformers import CONFIG_MAPPING

from zoo_runner.shrink import shrink_dict


def test_heads_divide_width_and_kv_heads_divide_heads():
    cfg = shrink_dict(
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_hidden_layers": 32,
            "intermediate_size": 11008,
            "head_dim": 128,
        }
    )
    assert cfg["hidden_size"] % cfg["num_attention_heads"] == 0
    assert cfg["num_attention_heads"] % cfg["num_key_value_heads"] == 0
    assert cfg["head_dim"] == cfg["hidden_size"] // cfg["num_attention_heads"]
    assert cfg["num_hidden_layers"] == 2 and cfg["intermediate_size"] <= 128


def test_odd_heads_are_fixed_to_a_divisor():
    cfg = shrink_dict({"d_model": 384, "encoder_attention_heads": 6, "decoder_attention_heads": 6})
    assert cfg["d_model"] % cfg["encoder_attention_heads"] == 0


def test_layer_types_follow_depth_and_nested_configs_shrink():
    cfg = shrink_dict(
        {
            "text_config": {
                "model_type": "x",
                "num_hidden_layers": 26,
                "layer_types": ["sliding"] * 5 + ["full"] * 21,
                "hidden_size": 2304,
                "num_attention_heads": 8,
            },
            "vision_config": {
                "model_type": "y",
                "hidden_size": 1152,
                "num_hidden_layers": 27,
                "num_attention_heads": 16,
            },
        }
    )
    assert cfg["text_config"]["num_hidden_layers"] == 2 and len(cfg["text_config"]["layer_types"]) == 2
    assert cfg["vision_config"]["hidden_size"] == 64 and cfg["vision_config"]["num_attention_heads"] == 4


def test_mrope_sections_sum_to_half_head_dim():
    cfg = shrink_dict(
        {
            "hidden_size": 3584,
            "num_attention_heads": 28,
            "num_key_value_heads": 4,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
        }
    )
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    assert sum(cfg["rope_scaling"]["mrope_section"]) == head_dim // 2


def test_experts_and_backbone_stages():
    cfg = shrink_dict(
        {"num_local_experts": 8, "num_experts_per_tok": 2, "hidden_size": 4096, "num_attention_heads": 32}
    )
    assert cfg["num_local_experts"] == 4 and cfg["num_experts_per_tok"] <= cfg["num_local_experts"]
    # a layer-indexed backbone keeps one shrunk layer per exposed output, the neck gets as many maps
    cfg = shrink_dict({"num_hidden_layers": 12, "out_features": ["stage12"], "out_indices": [12]})
    assert (cfg["num_hidden_layers"], cfg["out_indices"], cfg["out_features"]) == (2, [2], ["stage2"])
    cfg = shrink_dict(
        {
            "num_hidden_layers": 24,
            "out_indices": [5, 11, 17, 23],
            "out_features": ["stage5", "stage11", "stage17", "stage23"],
        }
    )
    assert (cfg["num_hidden_layers"], cfg["out_indices"]) == (4, [1, 2, 3, 4])
    # a stage-list backbone keeps its stages (each one shallower) and the outputs it exposes
    cfg = shrink_dict(
        {
            "num_layers": 4,
            "depths": [2, 2, 18, 2],
            "out_features": ["stage1", "stage2", "stage3", "stage4"],
            "out_indices": [1, 2, 3, 4],
            "stage_names": ["stem", "stage1", "stage2", "stage3", "stage4"],
        }
    )
    assert (
        cfg["depths"] == [1, 1, 1, 1]
        and cfg["num_layers"] == 4
        and cfg["out_indices"] == [1, 2, 3, 4]
        and len(cfg["out_features"]) == 4
    )


def test_real_default_configs_still_build_after_shrinking():
    for model_type in ("llama", "bert", "t5", "whisper", "clip", "mixtral"):
        cls = CONFIG_MAPPING[model_type]
        shrunk = shrink_dict(cls().to_dict())
        cls.from_dict(shrunk)  # raises on violated constraints


def test_every_per_layer_list_follows_the_depth_and_per_layer_ffn_widths_shrink():
    cfg = shrink_dict(
        {
            "num_hidden_layers": 35,
            "hidden_size": 2048,
            "num_attention_heads": 8,
            "intermediate_size": [16384] * 35,
            "activation_sparsity_pattern": [0.95] * 10 + [0.0] * 25,
            "layers_block_type": ["mamba", "hybrid"] * 17 + ["mamba"],
        }
    )
    assert cfg["intermediate_size"] == [128, 128]
    assert cfg["activation_sparsity_pattern"] == [0.95, 0.95] and cfg["layers_block_type"] == ["mamba", "hybrid"]


def test_mamba_heads_times_head_dim_equal_expand_times_width():
    cfg = shrink_dict(
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_hidden_layers": 40,
            "mamba_n_heads": 128,
            "mamba_d_head": 64,
            "mamba_expand": 2,
            "mamba_n_groups": 1,
        }
    )
    assert cfg["mamba_n_heads"] * cfg["mamba_d_head"] == cfg["mamba_expand"] * cfg["hidden_size"]


def test_vision_language_widths_meet_and_special_tokens_stay_in_the_vocabulary():
    cfg = shrink_dict(
        {
            "image_token_index": 32000,
            "projection_dim": 2048,
            "text_config": {"model_type": "llama", "vocab_size": 32000, "hidden_size": 4096, "num_attention_heads": 32},
            "vision_config": {
                "model_type": "siglip_vision_model",
                "hidden_size": 1152,
                "num_attention_heads": 16,
                "projection_dim": 2048,
            },
        }
    )
    assert cfg["vision_config"]["projection_dim"] == cfg["projection_dim"] == cfg["text_config"]["hidden_size"] == 64
    assert cfg["text_config"]["vocab_size"] > 32000


def test_mamba_rules_follow_each_models_names_and_a_null_head_dim_is_made_explicit():
    zamba = shrink_dict(
        {
            "hidden_size": 2560,
            "num_attention_heads": 32,
            "num_hidden_layers": 54,
            "mamba_expand": 2,
            "n_mamba_heads": 8,
            "mamba_headdim": 640,
            "mamba_ngroups": 1,
        }
    )
    assert zamba["n_mamba_heads"] * zamba["mamba_headdim"] == 2 * zamba["hidden_size"] and zamba["n_mamba_heads"] == 8
    falcon = shrink_dict(
        {
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "mamba_expand": 2,
            "mamba_n_heads": 128,
            "mamba_d_head": 64,
            "mamba_d_ssm": 8192,
        }
    )
    assert falcon["mamba_d_ssm"] == falcon["mamba_n_heads"] * falcon["mamba_d_head"] == 2 * falcon["hidden_size"]
    hunyuan = shrink_dict({"hidden_size": 4096, "num_attention_heads": 32, "head_dim": None})
    assert hunyuan["head_dim"] == hunyuan["hidden_size"] // hunyuan["num_attention_heads"]


def test_dpt_style_zero_based_output_layers_stay_inside_the_shrunk_vit():
    cfg = shrink_dict(
        {
            "num_hidden_layers": 12,
            "hidden_size": 768,
            "num_attention_heads": 12,
            "backbone_out_indices": [2, 5, 8, 11],
            "reassemble_hidden_size": 768,
        }
    )
    assert cfg["num_hidden_layers"] == 4 and cfg["backbone_out_indices"] == [0, 1, 2, 3]
    assert cfg["reassemble_hidden_size"] == cfg["hidden_size"]


def test_swin_stage_heads_divide_each_stage_width_in_a_nested_backbone():
    cfg = shrink_dict(
        {
            "backbone_config": {
                "model_type": "swin",
                "embed_dim": 96,
                "depths": [2, 2, 18, 2],
                "num_heads": [3, 6, 12, 24],
            }
        }
    )["backbone_config"]
    assert all((cfg["embed_dim"] * 2**i) % h == 0 for i, h in enumerate(cfg["num_heads"]))


def test_unset_mrope_sections_are_sized_for_the_shrunk_rotary_dims():
    # the modeling code's default sections need a 128-wide head; configs that declare the key get their own
    import copy

    from zoo_runner.shrink import fill_mrope_sections

    for model_type, factor in (("qwen2_5_vl_text", 1.0), ("glm4v_moe_text", 0.5)):
        config = CONFIG_MAPPING[model_type]()
        cfg = fill_mrope_sections(shrink_dict(copy.deepcopy(config.to_dict())), config)
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
        sections = cfg["rope_parameters"]["mrope_section"]
        assert len(sections) == 3 and sum(sections) == int(head_dim * factor) // 2 and sections[0] == sections[1]


def test_shrinking_keeps_global_attention_layers_and_cache_sharing_layers_in_the_stack():
    sam = shrink_dict({"num_hidden_layers": 12, "hidden_size": 768, "global_attn_indexes": [2, 5, 8, 11]})
    assert sam["global_attn_indexes"] == [1]  # the last layer of the shrunk stack stays global
    shared = shrink_dict(
        {
            "num_hidden_layers": 35,
            "hidden_size": 2048,
            "layer_types": ["sliding_attention"] * 35,
            "num_kv_shared_layers": 15,
        }
    )
    assert shared["num_kv_shared_layers"] == 1  # one layer still produces the cache the other reuses


def test_per_layer_query_heads_and_cross_config_widths_follow_the_shrunk_sizes():
    laguna = shrink_dict(
        {"hidden_size": 2048, "num_hidden_layers": 40, "num_attention_heads": 48, "num_key_value_heads": 8}
        | {"num_attention_heads_per_layer": [48] * 40}
    )
    heads = laguna["num_attention_heads_per_layer"]
    assert len(heads) == 2 and all(
        h <= laguna["num_attention_heads"] and h % laguna["num_key_value_heads"] == 0 for h in heads
    )
    # a flow head conditioned on the backbone, a head over a sibling encoder: still the width they named
    tts = shrink_dict({"hidden_size": 768, "flow_head_config": {"hidden_size": 512, "condition_dim": 768}})
    assert tts["flow_head_config"]["condition_dim"] == tts["hidden_size"] == 64
    diar = shrink_dict(
        {"audio_config": {"hidden_size": 512}, "head_config": {"hidden_size": 192, "audio_hidden_size": 512}}
    )
    assert diar["head_config"]["audio_hidden_size"] == diar["audio_config"]["hidden_size"] == 64
    # a vision tower projecting to its text decoder's width (PP-FormulaNet)
    ocr = shrink_dict({"vision_config": {"decoder_hidden_size": 512}, "text_config": {"d_model": 512}})
    assert ocr["vision_config"]["decoder_hidden_size"] == ocr["text_config"]["d_model"] == 64


def test_byte_level_halves_see_the_shrunk_global_width():
    blt = shrink_dict({"encoder_config": {"hidden_size_global": 2048}, "global_config": {"hidden_size": 2048}})
    assert blt["encoder_config"]["hidden_size_global"] == blt["global_config"]["hidden_size"] == 64


def test_an_unset_forecast_horizon_is_set_and_the_label_window_fits_the_context():
    import torch
    import transformers

    from zoo_runner.inputs import GENERATORS, ConfigView

    cfg = shrink_dict(CONFIG_MAPPING["autoformer"]().to_dict())
    assert cfg["prediction_length"] == cfg["context_length"] >= cfg["label_length"] > 0
    # lagged forecasters read the context plus its largest lag, with as many time features a step
    view = ConfigView.of(transformers.InformerConfig(prediction_length=4, num_time_features=2))
    shape, g = {"batch": 2, "seq": 16}, torch.Generator()
    assert GENERATORS["past_time_features"](view, shape, g).shape == (2, 4 + 7, 2)
    assert GENERATORS["future_values"](view, shape, g).shape == (2, 4)


def test_an_audio_tower_beside_a_vision_tower_hands_the_text_model_its_width():
    cfg = shrink_dict(
        {
            "image_token_id": 200092,
            "text_config": {"model_type": "llama", "vocab_size": 202048, "hidden_size": 4096, "num_attention_heads": 8},
            "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 1152, "num_attention_heads": 16},
            "audio_config": {"hidden_size": 1024, "out_hidden_size": 8192},
        }
    )
    assert cfg["audio_config"]["out_hidden_size"] == cfg["text_config"]["hidden_size"]


def test_every_layer_kind_a_pixel_shuffled_tower_width_and_a_vit_pooler_survive_shrinking():
    import torch

    from zoo_runner.inputs import GENERATORS, ConfigView

    hybrid = shrink_dict({"num_hidden_layers": 8, "layer_types": ["linear_attention"] * 3 + ["full_attention"] * 5})
    assert sorted(set(hybrid["layer_types"])) == ["full_attention", "linear_attention"]  # OLMo Hybrid needs both
    vlm = shrink_dict({"vision_config": {"hidden_size": 1536, "merge_size": 2}, "out_hidden_size": 6144})
    assert vlm["out_hidden_size"] == 4 * vlm["vision_config"]["hidden_size"]  # the adapter reads width x merge²
    assert shrink_dict({"hidden_size": 768, "pooler_output_size": 768})["pooler_output_size"] == 64
    # a block-diffusion drafter's noised block and the target layers' hidden states, side by side
    view = ConfigView(**{**ConfigView.of(object()).__dict__, "hidden_size": 8, "draft_block": 4, "target_layers": 3})
    g = torch.Generator()
    assert GENERATORS["noise_embeds"](view, {"batch": 2, "seq": 5}, g).shape == (2, 4, 8)
    assert GENERATORS["context_hidden_states"](view, {"batch": 2, "seq": 5}, g).shape == (2, 5, 24)
