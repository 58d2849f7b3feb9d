"""Deterministic inputs from the config and the model's forward signature.

Generators are keyed by input name (the approach of optimum's dummy input generators) over a
normalized view of the config, so one table serves every architecture.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable

import torch

DEFAULT_SHAPES = ({"batch": 2, "seq": 16}, {"batch": 1, "seq": 11})


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

    @classmethod
    def of(cls, config: Any) -> "ConfigView":
        text = getattr(config, "text_config", None) or getattr(config, "decoder", None) or config
        vision = getattr(config, "vision_config", None) or config

        def first(objs, names, default):
            for obj in objs:
                for name in names:
                    v = getattr(obj, name, None)
                    if isinstance(v, (list, tuple)) and v:
                        v = v[0]
                    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                        return v
            return default

        vocab = first([config, text], ["vocab_size"], 1000)
        max_src = first([config], ["max_source_positions"], 1500)
        return cls(
            vocab_size=vocab,
            type_vocab_size=first([config, text], ["type_vocab_size"], 1),
            image_size=first([vision, config], ["image_size", "img_size", "input_size"], 224),
            num_channels=first([vision, config], ["num_channels", "in_channels", "in_chans"], 3),
            num_mel_bins=first([config], ["num_mel_bins", "feature_size", "input_feat_per_channel"], 80),
            audio_frames=2 * max_src,
            decoder_vocab_size=first([text, config], ["decoder_vocab_size", "vocab_size"], vocab),
            num_patches=(first([vision, config], ["image_size"], 224) // first([vision, config], ["patch_size"], 16)) ** 2,
        )


Gen = Callable[[ConfigView, dict, torch.Generator], torch.Tensor]


def _ids(high: int, shape, gen) -> torch.Tensor:
    low = min(4, max(high - 1, 0))
    return torch.randint(low, max(high, low + 1), shape, generator=gen)


def _mask(view, shape, gen):
    b, s = shape["batch"], shape["seq"]
    mask = torch.ones(b, s, dtype=torch.long)
    if b > 1 and s > 4:
        mask[1, -3:] = 0  # one padded row exercises masking
    return mask


GENERATORS: dict[str, Gen] = {
    "input_ids": lambda v, s, g: _ids(v.vocab_size, (s["batch"], s["seq"]), g),
    "attention_mask": _mask,
    "token_type_ids": lambda v, s, g: _ids(v.type_vocab_size, (s["batch"], s["seq"]), g) if v.type_vocab_size > 1 else torch.zeros(s["batch"], s["seq"], dtype=torch.long),
    # as long as the encoder input: sequence classifiers (BART) pool decoder states at the EOS of input_ids
    "decoder_input_ids": lambda v, s, g: _ids(v.decoder_vocab_size, (s["batch"], s["seq"]), g),
    "pixel_values": lambda v, s, g: torch.randn(s["batch"], v.num_channels, v.image_size, v.image_size, generator=g),
    "input_values": lambda v, s, g: torch.randn(s["batch"], 400 * s["seq"], generator=g),
    "input_features": lambda v, s, g: torch.randn(s["batch"], v.num_mel_bins, v.audio_frames, generator=g),
    "spectrogram": lambda v, s, g: torch.randn(s["batch"], 4 * s["seq"], v.num_mel_bins, generator=g),
    # random masking (MAE-style) takes its noise as an input so both runs mask the same patches
    "noise": lambda v, s, g: torch.rand(s["batch"], v.num_patches, generator=g),
}

# Inputs filled only when the forward needs them or they change the graph meaningfully.
OPTIONAL_WANTED = ("attention_mask", "token_type_ids", "decoder_input_ids", "noise")


def forward_params(model: torch.nn.Module) -> list[inspect.Parameter]:
    return list(inspect.signature(model.forward).parameters.values())


def make_inputs(model: torch.nn.Module, config: Any, shape: dict, seed: int, is_encoder_decoder: bool = False, kinds: dict[str, str] | None = None, extra: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """Inputs for one shape. Raises ``KeyError`` listing required inputs nobody can generate."""
    view = ConfigView.of(config)
    gen = torch.Generator().manual_seed(seed)
    params = {p.name: p for p in forward_params(model)}
    main = getattr(model, "main_input_name", "input_ids")
    wanted: list[str] = []
    if main in params:
        wanted.append(main)
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
    if "input_ids" not in wanted:
        wanted = [w for w in wanted if w not in ("attention_mask", "token_type_ids")]
    kinds = kinds or {}
    missing = [w for w in wanted if kinds.get(w, w) not in GENERATORS]
    if missing:
        raise KeyError(f"no input generator for {', '.join(missing)}")
    out = {name: GENERATORS[kinds.get(name, name)](view, shape, gen) for name in wanted}
    if "input_ids" in out and "input_ids" not in kinds:
        _end_with_eos(out, config)
    return out


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


def describe(inputs: dict[str, torch.Tensor]) -> dict[str, list[int]]:
    return {k: list(v.shape) for k, v in inputs.items()}
