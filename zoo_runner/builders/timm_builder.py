"""timm models (the ``timm`` extra): ``timm.create_model`` from the repo's ``config.json``.

A timm repo's config names the architecture (``"architecture": "resnet50"``), the classifier
width and a ``pretrained_cfg`` with the input size. timm has no config to shrink, so the tiny and
census tiers give the architecture's constructor smaller arguments (:mod:`.timm_shrink`: depth,
blocks per stage, widths and heads, the parameters its class takes; the whole model where that
build raises, ``details.timm_shrink`` saying which), with seeded weights, and run it on small
images (64 and 96 px); architectures with a fixed input size (ViT-style position embeddings) are
built for 64 px through timm's ``img_size`` argument and run at two batch sizes. The full tier
loads the repo's ``model.safetensors`` at the pretrained input size, whole. timm itself is imported
only in the model process (and where a plan asks it for the shrink).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built
from .timm_shrink import plan_shrink

TINY_SIZES = (64, 96)
FIXED_TINY_SIZE = 64


@dataclass
class TimmPlan:
    architecture: str
    num_classes: int
    in_chans: int
    fixed_input_size: bool | None
    input_size: int
    config_source: str
    shapes: list[dict] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    shrink: dict[str, Any] | None = None  # tiny/census: the constructor overrides (timm_shrink); None: whole

    def fingerprint(self, library: str, tier: str) -> str:
        from ..fingerprint import fingerprint

        graph = {"num_classes": self.num_classes, "in_chans": self.in_chans, "fixed_input_size": self.fixed_input_size}
        if self.shrink is not None:
            graph["shrink"] = self.shrink
        return fingerprint(library, self.architecture, graph, tier, self.shapes)

    def create_kwargs(self, tier: str) -> dict[str, Any]:
        """What ``timm.create_model`` gets besides the name (and the shrink overrides)."""
        kwargs: dict[str, Any] = {"num_classes": self.num_classes, "in_chans": self.in_chans}
        if tier != "full" and self.fixed_input_size:
            kwargs["img_size"] = FIXED_TINY_SIZE
        return kwargs


def _shapes(tier: str, fixed: bool | None, input_size: int) -> list[dict]:
    if tier == "full":
        return [{"batch": 1, "size": input_size}, {"batch": 2, "size": input_size}]
    if fixed:
        return [{"batch": 1, "size": FIXED_TINY_SIZE}, {"batch": 2, "size": FIXED_TINY_SIZE}]
    return [{"batch": 1, "size": TINY_SIZES[0]}, {"batch": 2, "size": TINY_SIZES[1]}]


def _default_fixed_input_size(arch: str) -> bool | None:
    """Whether timm's default config for ``arch`` fixes the input size; None without timm (its
    build then says the extra is missing)."""
    try:
        import timm
    except ImportError:
        return None
    return bool(timm.get_pretrained_cfg_value(arch, "fixed_input_size") or False) if timm.is_model(arch) else None


class TimmBuilder:
    library = "timm"

    def plan(self, request: Any) -> TimmPlan:
        cfg = dict(request.config or {})
        arch = cfg.get("architecture") or cfg.get("model_name")
        if not isinstance(arch, str) or not arch:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"{request.model_id}: timm config.json names no architecture"
            )
        pre = cfg.get("pretrained_cfg") or {}
        size = pre.get("input_size") or [3, 224, 224]
        num_classes = int(cfg.get("num_classes", pre.get("num_classes", 1000)) or 0)
        fixed = pre.get("fixed_input_size")
        if fixed is None:  # not in the repo's config: timm's own default config knows, where timm is installed
            fixed = _default_fixed_input_size(arch)
        plan = TimmPlan(
            architecture=arch,
            num_classes=num_classes,
            in_chans=int(size[0]),
            fixed_input_size=bool(fixed) if fixed is not None else None,
            input_size=int(size[-1]),
            config_source=request.config_source or f"hub:{request.model_id}",
            config=cfg,
        )
        plan.shapes = _shapes(request.tier, plan.fixed_input_size, plan.input_size)
        if request.tier != "full":
            plan.shrink = plan_shrink(arch, **plan.create_kwargs(request.tier))
        return plan

    def task(self, request: Any, plan: TimmPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or "image-classification"

    def build(self, request: Any, plan: TimmPlan | None = None) -> Built:
        try:
            import timm
        except ImportError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"timm models need the timm extra (pip install 'zoo[timm]'): {exc}"
            ) from exc
        import torch

        plan = plan or self.plan(request)
        if not timm.is_model(plan.architecture):
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"timm {timm.__version__} has no architecture {plan.architecture!r}"
            )
        kwargs = plan.create_kwargs(request.tier)
        details: dict[str, Any] = {}
        if request.tier == "full":
            weights = os.path.join(request.files_dir or "", "model.safetensors")
            if not os.path.isfile(weights):
                raise NotSupported(Reason.PICKLE_ONLY, f"{request.model_id} has no model.safetensors")
            model = timm.create_model(
                plan.architecture, pretrained=True, pretrained_cfg_overlay={"file": weights}, **kwargs
            )
        else:
            from ..weights import init_weights
            from .timm_shrink import build_shrunk

            size = plan.shapes[0]["size"]

            def probe(model: torch.nn.Module) -> None:
                with torch.no_grad():
                    model.eval()(torch.zeros(1, plan.in_chans, size, size))

            model, details["timm_shrink"] = build_shrunk(
                lambda extra: timm.create_model(plan.architecture, pretrained=False, **kwargs, **extra),
                plan.shrink or {},
                probe,
            )
            init_weights(model, request.seed)
        model.eval()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            return {"x": torch.randn(shape["batch"], plan.in_chans, shape["size"], shape["size"], generator=gen)}

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
            details=details,
        )
