"""Architecture families that had no valid CPU reference: decoder-only sequence classifiers (no
pad token in their default config), table QA (one token type per table vocabulary), image-to-text
over flattened patches, and trajectory models. Each is fixed by a generic rule (a pad token for
text-classification heads, input generators per input name), never a per-model branch."""

from __future__ import annotations

import pytest

from zoo_runner.engine import validate_here
from zoo_runner.request import ValidationRequest


def _validate(arch: str, backend: str = "cpu") -> dict:
    return validate_here(ValidationRequest(f"arch:{arch}", backend=backend))


@pytest.mark.parametrize(
    "arch",
    [
        "LlamaForSequenceClassification",
        "MistralForSequenceClassification",
        "TapasForQuestionAnswering",
        "Pix2StructForConditionalGeneration",
        "DecisionTransformerModel",
        "GLPNForDepthEstimation",
        "TimesformerForVideoClassification",
        "VivitForVideoClassification",
        "AlbertForMultipleChoice",
        "PatchTSTModel",
        "PatchTSMixerForRegression",
        "MgpstrForSceneTextRecognition",
        "VitPoseBackbone",
        "BitBackbone",
        "NemotronForSequenceClassification",
        "LxmertForPreTraining",
        "XmodForMaskedLM",
        "BeitForSemanticSegmentation",
        "LiltForQuestionAnswering",
        "UdopForConditionalGeneration",
        "ReformerForMaskedLM",
        "DeepseekV2ForSequenceClassification",
        "Mistral4ForCausalLM",
        "KimiLinearForCausalLM",
        "TextNetBackbone",
        "Wav2Vec2BertForXVector",
        "InstructBlipForConditionalGeneration",
        "ShieldGemma2ForImageClassification",
        "PerceiverForMaskedLM",
        "HGNetV2ForImageClassification",
        "Sam2HieraDetModel",
        "MimiModel",
        "CsmForConditionalGeneration",
        "Lfm2VlForConditionalGeneration",
        "Lfm3VlModel",
        "MiniMaxM3VLModel",
        "Qwen3_5ForConditionalGeneration",
        "AudioFlamingo3Encoder",
        "Qwen3ASREncoder",
        "EsmcModel",
        "MistralLarge4TextModel",
        "Nemotron3_5TranscribeWordTimestampModel",
        "Sam3LiteTextTextModel",
        "Gemma4ForCausalLM",
        "Dots3NoteForConditionalGeneration",
    ],
)
def test_long_tail_architectures_get_a_valid_reference_and_pass_on_cpu(arch):
    """Over 60 s in CI (two workers on two cores): PerceiverForMaskedLM alone took 28 s on an idle machine, 1.6 s a
    forward at tier tiny."""
    r = _validate(arch)
    assert r["status"] == "pass", (arch, r["status"], r["error"])


def test_a_decoder_sequence_classifier_passes_on_inductor():
    """GPT-2's classifier pools each row at its last non-pad token: a batch needs a pad token."""
    r = _validate("GPT2ForSequenceClassification", "cpu+inductor")
    assert r["status"] == "pass", (r["status"], r["error"])
    assert r["details"]["input_shapes"][0]["input_ids"] == [2, 16]  # a batch of two, which needs the pad token


def test_table_qa_gets_one_token_type_per_table_vocabulary():
    r = _validate("TapasModel")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["input_shapes"][0]["token_type_ids"] == [2, 16, 7]


def test_trajectory_inputs_come_together():
    r = _validate("DecisionTransformerModel")
    assert set(r["details"]["input_shapes"][0]) == {"states", "actions", "rewards", "returns_to_go", "timesteps"}


def test_video_models_get_clips_of_their_own_frame_count():
    r = _validate("TimesformerModel")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["input_shapes"][0]["pixel_values"] == [2, 4, 3, 64, 64]  # (batch, frames, channels, h, w)


def test_shrinking_keeps_each_stage_s_heads_dividing_its_width():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.GLPNConfig().to_dict()))
    assert all(w % h == 0 for w, h in zip(cfg["hidden_sizes"], cfg["num_attention_heads"]))


def test_multiple_choice_heads_get_a_choices_dimension():
    r = _validate("RobertaForMultipleChoice")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["input_shapes"][0]["input_ids"] == [2, 2, 16]  # (batch, choices, seq)


def test_forecasters_get_their_own_context_length_and_channels():
    r = _validate("PatchTSTForPrediction")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["input_shapes"][0]["past_values"] == [2, 32, 1]  # (batch, context_length, channels)


def test_a_non_square_image_size_gives_non_square_images():
    import transformers

    from zoo_runner.inputs import ConfigView

    assert ConfigView.of(transformers.MgpstrConfig()).pixel_hw == (32, 128)  # (height, width)
    assert ConfigView.of(transformers.ViTConfig(image_size=96)).pixel_hw == (96, 96)


def test_shrinking_keeps_group_norm_groups_dividing_every_channel_count():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.BitConfig().to_dict()))
    bottlenecks = [w // 4 for w in cfg["hidden_sizes"]]  # BiT's blocks narrow to a quarter of the stage width
    assert all(w % cfg["num_groups"] == 0 for w in cfg["hidden_sizes"] + bottlenecks + [cfg["embedding_size"]])


def test_shrinking_spells_out_an_unset_key_value_head_count():
    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict({"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": None})
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"]


def test_text_with_image_regions_gets_region_features_and_boxes():
    r = _validate("LxmertModel")
    assert r["status"] == "pass", r["error"]
    shapes = r["details"]["input_shapes"][0]
    assert shapes["visual_feats"] == [2, 8, 2048] and shapes["visual_pos"] == [2, 8, 4]


def test_boxes_are_ordered_corners_in_either_convention():
    import torch

    from zoo_runner.inputs import GENERATORS, ConfigView

    view, shape = ConfigView.of(object()), {"batch": 2, "seq": 16}
    for name, high in (("unit_boxes", 1.0), ("bbox", 1000)):
        boxes = GENERATORS[name](view, shape, torch.Generator().manual_seed(0))
        assert boxes.shape == (2, 16, 4) and boxes.min() >= 0 and boxes.max() <= high
        assert bool((boxes[..., 2] >= boxes[..., 0]).all() and (boxes[..., 3] >= boxes[..., 1]).all())


def test_shrinking_keeps_width_parts_adding_up_to_the_width():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.ReformerConfig().to_dict()))
    assert sum(cfg["axial_pos_embds_dim"]) == cfg["hidden_size"]


@pytest.mark.parametrize("config_class", ["DeepseekV2Config", "Mistral4Config"])
def test_shrinking_keeps_latent_attention_consistent(config_class):
    """Latent attention: one kv head per query head, head dims shrunk together, head_dim what it was of them."""
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    before = getattr(transformers, config_class)().to_dict()
    cfg = shrink_dict(copy.deepcopy(before))
    nope, rope = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"]
    assert cfg["kv_lora_rank"] <= 32 and nope <= 16 and rope <= 16 and cfg["qk_head_dim"] == nope + rope
    whole = before["head_dim"] == before["qk_nope_head_dim"] + before["qk_rope_head_dim"]
    assert cfg["head_dim"] == (nope + rope if whole else rope)


def test_shrinking_routes_over_one_group_of_the_shrunk_experts():
    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(
        {"hidden_size": 1024, "num_attention_heads": 16, "n_routed_experts": 256, "n_group": 8, "topk_group": 4}
        | {"num_experts_per_tok": None, "num_experts_per_token": 8}
    )
    assert cfg["n_group"] == cfg["topk_group"] == 1
    assert cfg["num_experts_per_tok"] == 2 and cfg["num_experts_per_token"] <= cfg["n_routed_experts"]


def test_a_stem_width_follows_the_first_stage_it_feeds():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.TextNetConfig().to_dict()))
    assert cfg["stem_out_channels"] == cfg["hidden_sizes"][0]


def test_stacked_frame_speech_encoders_get_frames_of_their_width():
    r = _validate("Wav2Vec2BertModel")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["input_shapes"][0]["input_features"] == [2, 64, 160]  # (batch, frames, stacked features)


def test_a_video_vlm_without_video_tokens_is_a_known_failure_with_its_clip():
    r = _validate("InstructBlipVideoModel")
    assert r["details"]["input_shapes"][0]["pixel_values"] == [2, 4, 3, 224, 224]  # a clip, not an image
    assert r["status"] != "pass" and r["details"]["known_failure"]["expired"] is False


def test_depthwise_groups_follow_the_shrunk_width():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.MimiConfig().to_dict()))
    assert cfg["upsample_groups"] == cfg["hidden_size"] < transformers.MimiConfig().hidden_size


@pytest.mark.parametrize("arch", ["Glm5NextModel", "Cosmos3EdgeVisionModel"])
def test_a_vision_path_that_reads_a_patch_grid_gets_flattened_patches_and_their_grid(arch):
    """No quirk row: the grid input (image_grid_thw, or grid_thw on a tower alone) says how images are read."""
    r = _validate(arch)
    assert r["status"] == "pass", (arch, r["status"], r["error"])
    shapes = r["details"]["input_shapes"][0]
    assert len(shapes["pixel_values"]) == 2 and ({"image_grid_thw", "grid_thw"} & set(shapes))


def test_shrinking_keeps_multi_head_attention_multi_head():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.EsmcConfig().to_dict()))  # ESMC refuses grouped-query attention
    assert cfg["num_key_value_heads"] == cfg["num_attention_heads"]
    transformers.EsmcConfig.from_dict(cfg)  # its validator accepts it
    gqa = shrink_dict({"hidden_size": 1024, "num_attention_heads": 16, "num_key_value_heads": 8})
    assert gqa["num_key_value_heads"] < gqa["num_attention_heads"]  # grouped-query attention stays grouped


@pytest.mark.parametrize("config_class", ["Gemma4TextConfig", "Dots3NoteConfig", "MistralLarge4TextConfig"])
def test_shrinking_keeps_per_layer_settings_inside_the_shrunk_depth(config_class):
    """per_layer_config keys and per-layer index lists (kv_source_layers) name layers that still exist."""
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cls = getattr(transformers, config_class)
    cfg = shrink_dict(copy.deepcopy(cls().to_dict()))
    for node in [cfg] + [v for v in cfg.values() if isinstance(v, dict)]:
        layers = node.get("num_hidden_layers")
        if isinstance(node.get("per_layer_config"), dict):
            assert all(int(i) < layers for i in node["per_layer_config"])
        if isinstance(node.get("kv_source_layers"), list):
            assert len(node["kv_source_layers"]) == layers and max(node["kv_source_layers"]) < layers
    cls.from_dict(cfg)  # the config's validators accept it


@pytest.mark.parametrize("config_class", ["Molmo2Config", "Inkling2Config", "Dots3NoteConfig"])
def test_shrinking_keeps_modality_towers_wired_to_the_text_model(config_class):
    """Feature-layer indices stay inside the shrunk vision stack; widths a tower names for its adapter (its own
    hidden size in, the text width out) follow the shrunk widths."""
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cls = getattr(transformers, config_class)
    cfg = shrink_dict(copy.deepcopy(cls().to_dict()))
    cls.from_dict(cfg)  # the config's validators accept it
    layers = cfg["vision_config"]["num_hidden_layers"]
    for node in cfg.values():
        if isinstance(node, dict) and isinstance(node.get("vision_feature_layer"), list):
            assert all(-layers <= i < layers for i in node["vision_feature_layer"])


def test_shrinking_keeps_per_layer_key_value_heads_dividing_the_heads():
    import copy

    import transformers

    from zoo_runner.shrink import shrink_dict

    cfg = shrink_dict(copy.deepcopy(transformers.Sapiens2Config().to_dict()))
    kv = cfg["num_key_value_heads_per_layer"]
    assert len(kv) == cfg["num_hidden_layers"] and all(cfg["num_attention_heads"] % h == 0 for h in kv)


def test_x_vector_waveforms_cover_the_tdnn_receptive_field():
    import transformers

    from zoo_runner.inputs import ConfigView

    config = transformers.Wav2Vec2Config()
    n = ConfigView.of(config).min_samples
    for k, s in zip(config.conv_kernel, config.conv_stride):
        n = (n - k) // s + 1
    assert n == 1 + sum((k - 1) * d for k, d in zip(config.tdnn_kernel, config.tdnn_dilation))
    assert ConfigView.of(transformers.BertConfig()).min_samples == 0


def test_a_flat_patch_vision_tower_on_its_own_gets_patches_for_its_hidden_states():
    r = _validate("Glm5NextVisionModel")
    assert r["status"] == "pass", r["error"]
    assert len(r["details"]["input_shapes"][0]["hidden_states"]) == 2  # (patches, flattened patch), with grid_thw
    assert "grid_thw" in r["details"]["input_shapes"][0]


def test_image_queries_take_their_marked_text_positions():
    r = _validate("Kosmos2Model")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["input_shapes"][0]["image_embeds_position_mask"] == [2, 16]


def test_question_tokens_patched_series_and_class_resolution_outside_the_top_level():
    import torch
    import transformers

    from zoo_runner.builders.transformers_builder import resolve_class
    from zoo_runner.inputs import GENERATORS, ConfigView, _ask_question

    ids = {"input_ids": torch.full((2, 8), 104)}
    _ask_question(ids, transformers.SplinterConfig())  # question_token_id 104: once a row, second position
    assert (ids["input_ids"] == 104).sum(dim=1).tolist() == [1, 1] and (ids["input_ids"][:, 1] == 104).all()
    view, shape, g = ConfigView.of(transformers.TimesFm2_5Config()), {"batch": 1, "seq": 11}, torch.Generator()
    assert GENERATORS["past_values"](view, shape, g).shape[-1] % 32 == 0  # whole patches of patch_length
    assert resolve_class("AutoformerModel").__name__ == "AutoformerModel"  # a model, though named Auto...
    assert resolve_class("VoxtralRealtimeTextModel").__name__ == "VoxtralRealtimeTextModel"  # not in __all__


def test_a_semantic_w2v_bert_tower_and_a_vocoder_noise_get_inputs_of_their_width():
    from types import SimpleNamespace

    import torch

    from zoo_runner.inputs import GENERATORS, ConfigView

    shape, gen = {"batch": 2, "seq": 8}, torch.Generator().manual_seed(0)
    codec = ConfigView.of(SimpleNamespace(semantic_model_config=SimpleNamespace(feature_projection_input_dim=160)))
    assert GENERATORS["input_features"](codec, shape, gen).shape == (2, 32, 160)  # (batch, frames, stacked features)
    vocoder = ConfigView.of(SimpleNamespace(model_in_channels=64, num_mel_bins=100))
    frames = GENERATORS["spectrogram"](vocoder, shape, gen).shape[1]
    assert GENERATORS["noise_sequence"](vocoder, shape, gen).shape == (2, frames, 64)  # one noise vector a frame


def test_speech_inputs_follow_the_config_names_of_their_widths_and_vocabularies():
    """Stacked low-frame-rate features (num_stacked_frames x mel bins), Gemma 3n's audio_mel (input_feat_size wide, a
    mask True at padding), a TTS model's vocabulary under its vocoder wrapper (model_config), a speech decoder's mel
    frames, text + per-codebook codes a step, and a waveform of one hop a feature frame."""
    from types import SimpleNamespace as NS

    import torch

    from zoo_runner.inputs import GENERATORS, ConfigView

    shape, gen = {"batch": 2, "seq": 8}, torch.Generator().manual_seed(0)
    stacked = ConfigView.of(NS(num_mel_bins=80, num_stacked_frames=7))
    assert GENERATORS["input_features"](stacked, shape, gen).shape == (2, 32, 560)
    gemma = ConfigView.of(NS(input_feat_size=128))
    assert GENERATORS["audio_mel"](gemma, shape, gen).shape == (2, 32, 128)
    assert not GENERATORS["audio_mel_mask"](gemma, shape, gen).any()
    tts = ConfigView.of(NS(model_config=NS(vocab_size=78, num_mel_bins=20)))
    assert GENERATORS["input_ids"](tts, shape, gen).max() < 78
    assert GENERATORS["decoder_input_values"](ConfigView.of(NS(num_mel_bins=20)), shape, gen).shape == (2, 8, 20)
    kyutai = ConfigView.of(NS(vocab_size=4001, codebook_vocab_size=2049, num_codebooks=3))
    ids = GENERATORS["text_and_codes"](kyutai, shape, gen)
    assert ids.shape == (2, 8, 4) and ids[..., 1:].max() < 2049
    codec = ConfigView.of(NS(hop_length=320))
    assert GENERATORS["waveform_per_frame"](codec, shape, gen).shape == (2, 1, 320 * 32)


def test_unit_masking_draws_one_noise_entry_a_mask_unit():
    from transformers import HieraConfig

    from zoo_runner.inputs import ConfigView

    assert ConfigView.of(HieraConfig()).mask_units == 49  # 224 px / 4 px patch stride / 8-token units, squared


@pytest.mark.parametrize(
    ("arch", "names"),
    [
        ("Blip2QFormerModel", {"query_embeds", "encoder_hidden_states"}),
        ("Gemma4VisionModel", {"pixel_values", "pixel_position_ids"}),
        ("SpeechEncoderDecoderModel", {"inputs"}),
        ("JevForDecision", {"input_ids", "marks", "num_options", "question_type_ids"}),
    ],
)
def test_inputs_named_for_their_role_get_generated(arch, names):
    r = _validate(arch)
    assert r["status"] == "pass", r["error"]
    assert names <= set(r["details"]["input_shapes"][0])


def test_rag_without_its_retriever_reads_passages_and_scores_as_inputs(zoo, snapshot_hub, tmp_path):
    """RAG's retriever is a passage index, not part of the model: without one, its forward takes the
    retrieved passages (n_docs a question, in the generator's vocabulary) and their scores. Without the
    quirk the reference fails ("Make sure that `context_input_ids` are passed")."""
    from tests.conftest import validate_through

    r = validate_through(zoo, snapshot_hub, tmp_path, "facebook/rag-token-nq")
    assert r["status"] == "pass", r["error"]
    shapes = r["details"]["input_shapes"][0]
    n_docs = shapes["doc_scores"][1]
    assert n_docs >= 1 and shapes["context_input_ids"][0] == shapes["doc_scores"][0] * n_docs
