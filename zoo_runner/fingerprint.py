"""A hash of everything that decides the compute graph."""

from __future__ import annotations

import hashlib
import json
from typing import Any

# Config keys that cannot change what the model computes at a deduplicated tier, each with why. Every
# other key is in the fingerprint: a row is handed to every model sharing it (fingerprint dedup), so a
# key left out here that changes the computation lets one repo's config decide another repo's verdict.
# Changing what goes in makes every cached plan stale: add a migration that empties ``model_plans``
# (db/migrations/versions/0008_fingerprint_token_ids.py). Token ids stay in (``pad_token_id`` moves
# RoBERTa's position ids, ``eos_token_id`` decides where BART's classification head pools),
# and so does anything transformers reads to pick an implementation.
IGNORED_KEYS = {
    "_name_or_path": "where the config was loaded from: a name, read by nothing that computes",
    "name_or_path": "the same, in older configs",
    "_commit_hash": "the revision the config came from (the row records its own)",
    "transformers_version": "the version that wrote the file; the one that runs is recorded per row",
    "architectures": "the class is the fingerprint's own architecture argument",
    "finetuning_task": "a label of the training run, read by no forward pass",
    "id2label_names": "not a transformers key: read by nothing",
    "torch_dtype": "Zoo builds every model in float32 (builders pass dtype explicitly)",
    "dtype": "the same, under its newer name",
    "tokenizer_class": "read only by AutoTokenizer; tiny and census inputs are generated, and the full tier "
    "(real tokenizers) is never deduplicated",
    "prefix": "a text prefix for pipelines' generation, never read by forward",
    "task_specific_params": "pipelines' generation settings, never read by forward",
    "label2id": "the inverse of id2label, whose length stays in as num_labels",
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
