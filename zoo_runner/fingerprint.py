"""A hash of everything that decides the compute graph."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Config keys that do not change the graph (names, bookkeeping, tokenizer facts).
IGNORED_KEYS = {
    "_name_or_path",
    "transformers_version",
    "architectures",
    "name_or_path",
    "_commit_hash",
    "finetuning_task",
    "id2label_names",
    "torch_dtype",
    "dtype",
    "_attn_implementation_autoset",
    "tokenizer_class",
    "prefix",
    "task_specific_params",
    "bos_token_id",
    "eos_token_id",
    "pad_token_id",
    "sep_token_id",
    "decoder_start_token_id",
    "label2id",
}


def normalize_config(cfg: Any) -> Any:
    if isinstance(cfg, dict):
        out = {}
        for k, v in sorted(cfg.items()):
            if k in IGNORED_KEYS:
                continue
            if k == "id2label" and isinstance(v, dict):
                out["num_labels"] = len(v)
                continue
            out[k] = normalize_config(v)
        return out
    if isinstance(cfg, (list, tuple)):
        return [normalize_config(v) for v in cfg]
    if isinstance(cfg, float):
        return round(cfg, 10)
    return cfg


def fingerprint(library: str, architecture: str, config: dict[str, Any], tier: str, shapes: Any) -> str:
    payload = json.dumps(
        {
            "library": library,
            "architecture": architecture,
            "config": normalize_config(config),
            "tier": tier,
            "shapes": shapes,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:24]
