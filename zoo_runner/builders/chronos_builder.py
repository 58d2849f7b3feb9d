"""Chronos-Bolt time-series models (the ``chronos`` extra): ``chronos-forecasting``'s model class
from the repo's ``config.json``.

A Chronos-Bolt repo carries no library tag; its ``config.json`` is a T5 config with a
``chronos_config`` block (context and prediction lengths, patch size, quantiles) and names its
pipeline class (``"chronos_pipeline_class": "ChronosBoltPipeline"``), which is how Zoo recognises
it. The T5 encoder-decoder is shrunk like any transformers config; the ``chronos_config`` block
(patching, quantile head, prediction length) is kept, so the graph keeps its real shape. Inputs
are seeded random walks of two lengths, one not a multiple of the patch size, so the padding path
runs too. The full tier loads ``model.safetensors``. chronos itself is imported only in the model
process.
"""

from __future__ import annotations

import copy
import importlib
from dataclasses import dataclass
from typing import Any

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built, ConfigPlan

# The pipeline class a config names → the model class that runs it (data, not a branch per model).
MODEL_CLASSES = {
    "ChronosBoltPipeline": "chronos.chronos_bolt:ChronosBoltModelForForecasting",
}
TINY_SHAPES = ({"batch": 1, "seq": 48}, {"batch": 2, "seq": 80})
FULL_SHAPES = ({"batch": 1, "seq": 256}, {"batch": 2, "seq": 512})


def claims(config: dict[str, Any]) -> bool:
    """Whether a ``config.json`` is a Chronos model this builder runs."""
    return isinstance(config.get("chronos_config"), dict) and config.get("chronos_pipeline_class") in MODEL_CLASSES


@dataclass
class ChronosPlan(ConfigPlan):
    target: str = ""  # "module:Class" of the model


class ChronosBuilder:
    library = "chronos-forecasting"

    def plan(self, request: Any) -> ChronosPlan:
        cfg = copy.deepcopy(dict(request.config or {}))
        if not claims(cfg):
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"{request.model_id}: config.json is not a Chronos-Bolt "
                "config (chronos_config and chronos_pipeline_class)",
            )
        target = MODEL_CLASSES[cfg["chronos_pipeline_class"]]
        if request.tier in ("tiny", "census"):
            from ..shrink import shrink_dict

            chronos_config = cfg.pop("chronos_config")
            cfg = shrink_dict(cfg)
            cfg["chronos_config"] = chronos_config
        cfg["use_cache"] = False
        shapes = [dict(s) for s in (FULL_SHAPES if request.tier == "full" else TINY_SHAPES)]
        return ChronosPlan(
            architecture=target.rpartition(":")[2],
            target=target,
            config=cfg,
            config_source=request.config_source or f"hub:{request.model_id}",
            shapes=shapes,
        )

    def task(self, request: Any, plan: ChronosPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or "time-series-forecasting"

    def build(self, request: Any, plan: ChronosPlan | None = None) -> Built:
        plan = plan or self.plan(request)
        module, _, name = plan.target.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except ImportError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"Chronos models need the chronos extra (pip install 'zoo[chronos]'): {exc}"
            ) from exc
        import torch
        from transformers import T5Config

        config = T5Config.from_dict(plan.config)
        torch.manual_seed(request.seed)
        if request.tier == "full":
            model = cls.from_pretrained(request.files_dir, config=config, use_safetensors=True, local_files_only=True)
        else:
            from ..weights import init_weights

            model = cls(config)
            init_weights(model, request.seed)
        model.eval()

        from ..inputs import random_walk

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            return {"context": random_walk(shape["batch"], shape["seq"], torch.Generator().manual_seed(seed))}

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )
