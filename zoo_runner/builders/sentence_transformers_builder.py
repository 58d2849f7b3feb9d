"""sentence-transformers models: the transformer encoder and its pooling (and normalization).

Built from the repo's own files (``modules.json``, ``1_Pooling/config.json``), without importing
the sentence-transformers package, so the model process stays small and no repo code runs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .base import Built
from .transformers_builder import TransformersBuilder

# sentence-transformers' Pooling config keys → mode (first true wins, in its own order)
POOLING_KEYS = (
    ("pooling_mode_cls_token", "cls"),
    ("pooling_mode_max_tokens", "max"),
    ("pooling_mode_mean_tokens", "mean"),
    ("pooling_mode_mean_sqrt_len_tokens", "mean_sqrt_len"),
    ("pooling_mode_lasttoken", "lasttoken"),
)
POOLING_MODULE = "sentence_transformers.models.Pooling"
NORMALIZE_MODULE = "sentence_transformers.models.Normalize"


def pooling_setup(extras: dict[str, Any] | None) -> tuple[str, bool]:
    """(pooling mode, normalize) from the repo's modules.json and pooling config; mean by default."""
    extras = extras or {}
    modules = extras.get("modules.json") or []
    normalize = any(m.get("type") == NORMALIZE_MODULE for m in modules if isinstance(m, dict))
    pool_cfg: dict[str, Any] = {}
    for m in modules:
        if isinstance(m, dict) and m.get("type") == POOLING_MODULE:
            pool_cfg = extras.get(f"{m.get('path', '1_Pooling')}/config.json") or {}
    pool_cfg = pool_cfg or extras.get("1_Pooling/config.json") or {}
    if isinstance(pool_cfg.get("pooling_mode"), str):
        return pool_cfg["pooling_mode"], normalize
    for key, mode in POOLING_KEYS:
        if pool_cfg.get(key):
            return mode, normalize
    return "mean", normalize


class SentenceEmbedder(nn.Module):
    """encoder → token embeddings → pooled sentence embedding (→ L2 normalized)."""

    def __init__(self, encoder: nn.Module, mode: str, normalize: bool) -> None:
        super().__init__()
        self.encoder, self.mode, self.normalize = encoder, mode, normalize
        self.main_input_name = getattr(encoder, "main_input_name", "input_ids")

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        token_type_ids: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        kwargs = {"attention_mask": attention_mask}
        if token_type_ids is not None:
            kwargs["token_type_ids"] = token_type_ids
        tokens = self.encoder(input_ids=input_ids, **kwargs)[0]
        mask = (
            (attention_mask if attention_mask is not None else torch.ones_like(input_ids))
            .unsqueeze(-1)
            .to(tokens.dtype)
        )
        if self.mode == "cls":
            pooled = tokens[:, 0]
        elif self.mode == "max":
            pooled = tokens.masked_fill(mask == 0, torch.finfo(tokens.dtype).min).amax(dim=1)
        elif self.mode == "lasttoken":
            last = mask.squeeze(-1).sum(dim=1).long() - 1
            pooled = tokens[torch.arange(tokens.shape[0], device=tokens.device), last]
        else:
            summed = (tokens * mask).sum(dim=1)
            count = mask.sum(dim=1).clamp(min=1e-9)
            pooled = summed / (count.sqrt() if self.mode == "mean_sqrt_len" else count)
        if self.normalize:
            pooled = nn.functional.normalize(pooled, p=2, dim=1)
        return {"token_embeddings": tokens, "sentence_embedding": pooled}


class SentenceTransformersBuilder:
    library = "sentence-transformers"

    def __init__(self) -> None:
        self._tf = TransformersBuilder()

    def plan(self, request: Any):
        plan = self._tf.plan(request, base_model=True)
        if getattr(plan.config, "is_encoder_decoder", False):
            # sentence encoders on encoder-decoder checkpoints (sentence-t5) run the encoder alone
            import transformers

            encoder_cls = getattr(transformers, plan.cls.__name__.replace("Model", "EncoderModel"), None)
            if encoder_cls is not None:
                plan.cls, plan.architecture = encoder_cls, encoder_cls.__name__
        mode, normalize = pooling_setup(getattr(request, "extras", None))
        plan.graph_extras = {"_pooling": mode, "_normalize": normalize}
        return plan

    def build(self, request: Any, plan=None) -> Built:
        built = self._tf.build(request, plan=plan or self.plan(request))
        mode, normalize = pooling_setup(getattr(request, "extras", None))
        built.model = SentenceEmbedder(built.model, mode, normalize).eval()
        built.library = self.library
        built.task = self.task(request, plan)
        return built

    def task(self, request: Any, plan: Any) -> str | None:
        """The row's task: the Hub's pipeline tag, else sentence similarity (the parent asks it too)."""
        return request.task or "sentence-similarity"
