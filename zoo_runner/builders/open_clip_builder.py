"""OpenCLIP models (the ``open_clip`` extra): ``open_clip.create_model`` from the repo's
``open_clip_config.json``.

An OpenCLIP repo's config holds ``model_cfg`` (embedding width, ``vision_cfg``, ``text_cfg`` and,
for CoCa, ``multimodal_cfg``). For the tiny and census tiers the towers OpenCLIP builds itself
are shrunk (depth, width, heads) with their layout kept (patch size, pooling, context length,
quick-GELU, ...); a vision tower that OpenCLIP takes from timm (``timm_model_name``) is shrunk as
the timm builder shrinks a timm model (:mod:`.timm_shrink`: smaller constructor arguments given to
the ``timm.create_model`` call OpenCLIP makes, the whole tower where that build raises;
``details.timm_shrink`` says which), at its configured image size. OpenCLIP builds the model from
the shrunk config written to a private folder (its ``local-dir:`` schema), so the choice of CLIP,
CustomTextCLIP or CoCa is OpenCLIP's own. A text tower taken from transformers (``text_cfg.hf_model_name``,
``roberta-base``) is built from that model's ``config.json``, which the parent fetches from its repo
(:meth:`OpenClipBuilder.extra_repo_files`; legacy ids such as ``roberta-base`` under the id the model lives
at now, ``FacebookAI/roberta-base``), with transformers' defaults filled in and, for the tiny and census
tiers, shrunk as Zoo shrinks any transformers config (:func:`~zoo_runner.shrink.shrink_dict`); OpenCLIP's
projection follows that tower's width. ``details.other_repo_files`` (the parent's record) says which
repo and commit the config came from. The full tier loads the repo's safetensors weights. open_clip is
imported only in the model process.
"""

from __future__ import annotations

import copy
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..exceptions import NotSupported
from ..shrink import shrink_dict
from ..statuses import Reason
from .base import Built, ConfigPlan
from .timm_shrink import build_shrunk, plan_shrink

CONFIG_FILE = "open_clip_config.json"
TINY_WIDTH, TINY_HEAD_WIDTH, TINY_LAYERS, TINY_EMBED, TINY_VOCAB = 64, 32, 2, 64, 4096
HF_CONFIG = "config.json"  # a transformers text tower's config, in its own repo
# Legacy ids that OpenCLIP's own model configs name as ``hf_model_name``, and the repos transformers' models
# moved to: the Hub redirects the old ids, Zoo asks for the repo where the model lives now.
HF_TEXT_MOVED = {
    "roberta-base": "FacebookAI/roberta-base",
    "xlm-roberta-base": "FacebookAI/xlm-roberta-base",
    "xlm-roberta-large": "FacebookAI/xlm-roberta-large",
}
HUB_REPO_ID = re.compile(
    r"[A-Za-z0-9](?:[A-Za-z0-9_]|[.-](?=[A-Za-z0-9_]))*(/[A-Za-z0-9](?:[A-Za-z0-9_]|[.-](?=[A-Za-z0-9_]))*)?"
)


def hf_text_model(config: dict[str, Any] | None) -> str | None:
    """The transformers model an OpenCLIP config's text tower is (``text_cfg.hf_model_name``), or None."""
    model_cfg = config.get("model_cfg") if isinstance(config, dict) else None
    text = model_cfg.get("text_cfg") if isinstance(model_cfg, dict) else None
    name = text.get("hf_model_name") if isinstance(text, dict) else None
    return name if isinstance(name, str) and name else None


def hf_text_repo(name: str) -> str | None:
    """The Hub repo of a text tower's transformers model (a legacy id under the id it moved to), or None
    where ``name`` is no Hub repo id (a local path)."""
    name = HF_TEXT_MOVED.get(name, name)
    return name if HUB_REPO_ID.fullmatch(name) and ".." not in name else None


def _shrink_transformer(cfg: dict[str, Any], width_key: str = "width") -> None:
    cfg["layers"] = min(int(cfg.get("layers", TINY_LAYERS)), TINY_LAYERS)
    cfg[width_key] = min(int(cfg.get(width_key, TINY_WIDTH)), TINY_WIDTH)
    if "heads" in cfg or width_key == "width":
        cfg["heads"] = max(1, min(int(cfg.get("heads", 2)), cfg[width_key] // TINY_HEAD_WIDTH))


def shrink_model_cfg(model_cfg: dict[str, Any]) -> dict[str, Any]:
    """A tiny OpenCLIP ``model_cfg`` with the same layout."""
    cfg = copy.deepcopy(model_cfg)
    cfg["embed_dim"] = min(int(cfg.get("embed_dim", TINY_EMBED)), TINY_EMBED)
    vision = cfg.setdefault("vision_cfg", {})
    if "timm_model_name" not in vision:
        if isinstance(vision.get("layers"), (list, tuple)):  # ModifiedResNet stages
            vision["layers"] = [1] * len(vision["layers"])
            vision["width"] = min(int(vision.get("width", 64)), 32)
            vision["image_size"] = 64
        else:
            vision["layers"] = min(int(vision.get("layers", 12)), TINY_LAYERS)
            vision["width"] = min(int(vision.get("width", 768)), TINY_WIDTH)
            vision["head_width"] = min(int(vision.get("head_width", 64)), TINY_HEAD_WIDTH)
            patch = int(vision.get("patch_size", 16))
            vision["image_size"] = patch * max(2, 64 // patch)
        if vision.get("attentional_pool"):
            vision["attn_pooler_heads"] = 2
            vision["attn_pooler_queries"] = min(int(vision.get("attn_pooler_queries", 8)), 8)
    text = cfg.setdefault("text_cfg", {})
    if "hf_model_name" not in text:
        _shrink_transformer(text)
        vocab = int(text.get("vocab_size", 49408))
        text["vocab_size"] = min(vocab, TINY_VOCAB)
        for key in ("pad_id", "eos_id"):  # special ids stay inside the vocabulary
            if isinstance(text.get(key), int) and text[key] >= text["vocab_size"]:
                text[key] = text["vocab_size"] - 1
    if isinstance(cfg.get("multimodal_cfg"), dict):  # CoCa's decoder
        mm = cfg["multimodal_cfg"]
        _shrink_transformer(mm)
        mm["vocab_size"] = min(
            int(mm.get("vocab_size", text.get("vocab_size", TINY_VOCAB))), text.get("vocab_size", TINY_VOCAB)
        )
    return cfg


def _image_size(model_cfg: dict[str, Any]) -> tuple[int, int]:
    size = model_cfg.get("vision_cfg", {}).get("image_size", 224)
    return (int(size[0]), int(size[1])) if isinstance(size, (list, tuple)) else (int(size), int(size))


@dataclass
class OpenClipPlan(ConfigPlan):
    timm_shrink: dict[str, Any] | None = None  # tiny/census: the timm vision tower's overrides (timm_shrink)
    text_config: dict[str, Any] | None = None  # a transformers text tower's config (tiny/census: shrunk)

    def fingerprint(self, library: str, tier: str) -> str:
        from ..fingerprint import fingerprint

        graph = self.config if self.timm_shrink is None else {**self.config, "timm_shrink": self.timm_shrink}
        if self.text_config is not None:
            graph = {**graph, "hf_text_config": self.text_config}
        return fingerprint(library, self.architecture, graph, tier, self.shapes)


@contextmanager
def _timm_tower_overrides(extra: dict[str, Any]) -> Iterator[None]:
    """While open_clip builds: its ``timm.create_model`` calls get ``extra`` too (theirs win)."""
    from open_clip import timm_model

    real = timm_model.timm

    class _Timm:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        @staticmethod
        def create_model(*args: Any, **kwargs: Any) -> Any:
            return real.create_model(*args, **{**extra, **kwargs})

    timm_model.timm = _Timm()
    try:
        yield
    finally:
        timm_model.timm = real


class OpenClipBuilder:
    library = "open_clip"
    config_files = (CONFIG_FILE,)

    def extra_repo_files(self, config: dict[str, Any]) -> list[tuple[str, str | None, str]]:
        """Files of other repos a plan reads: a transformers text tower's config.json (fetched by the parent)."""
        name = hf_text_model(config)
        repo = hf_text_repo(name) if name else None
        return [(repo, None, HF_CONFIG)] if repo else []

    def _hf_text_config(self, request: Any, name: str) -> dict[str, Any]:
        """A transformers text tower's config (transformers' defaults filled in; tiny and census: shrunk)
        from the ``config.json`` the parent fetched."""
        repo = hf_text_repo(name)
        what = f"{request.model_id}: its text tower is the transformers model {name!r}"
        if repo is None:
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{what}, which is not a Hub repo id")
        extras = request.extras or {}
        raw = extras.get(f"{repo}/{HF_CONFIG}")
        if not isinstance(raw, dict):
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"{what}, and no {HF_CONFIG} of {repo} was fetched (not on the Hub, or not reachable)",
            )
        if not isinstance(raw.get("model_type"), str):
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{what}, whose {repo}/{HF_CONFIG} names no model_type")
        import transformers  # its config classes only: OpenCLIP builds the model, in the model process

        try:
            text_config = transformers.AutoConfig.for_model(**raw).to_dict()
        except (ValueError, TypeError, KeyError) as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"{what}, whose {repo}/{HF_CONFIG} transformers cannot read ({exc})"
            ) from exc
        return shrink_dict(text_config) if request.tier in ("tiny", "census") else text_config

    def plan(self, request: Any) -> OpenClipPlan:
        cfg = copy.deepcopy(dict(request.config or {}))
        model_cfg = cfg.get("model_cfg")
        if not isinstance(model_cfg, dict):
            raise NotSupported(Reason.LIBRARY_UNSUPPORTED, f"{request.model_id}: {CONFIG_FILE} has no model_cfg")
        hf_text = hf_text_model(cfg)
        text_config = self._hf_text_config(request, hf_text) if hf_text else None
        if request.tier in ("tiny", "census"):
            model_cfg = shrink_model_cfg(model_cfg)
        cfg["model_cfg"] = model_cfg
        h, w = _image_size(model_cfg)
        seq = int(model_cfg.get("text_cfg", {}).get("context_length", 77))
        shapes = [{"batch": 1, "height": h, "width": w, "seq": seq}, {"batch": 2, "height": h, "width": w, "seq": seq}]
        vision = model_cfg.get("vision_cfg", {})
        arch = "CoCa" if "multimodal_cfg" in model_cfg else "CLIP"
        arch += f"[{vision['timm_model_name']}]" if vision.get("timm_model_name") else ""
        arch += f"+{text_config['model_type']}" if text_config else ""  # a transformers text tower
        tower = vision.get("timm_model_name") if request.tier in ("tiny", "census") else None
        return OpenClipPlan(
            architecture=arch,
            config=cfg,
            config_source=request.config_source or f"hub:{request.model_id}",
            shapes=shapes,
            timm_shrink=plan_shrink(tower) if isinstance(tower, str) and tower else None,
            text_config=text_config,
        )

    def task(self, request: Any, plan: OpenClipPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or "zero-shot-image-classification"

    def build(self, request: Any, plan: OpenClipPlan | None = None) -> Built:
        try:
            import open_clip
        except ImportError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"OpenCLIP models need the open_clip extra (pip install 'zoo[open_clip]'): {exc}",
            ) from exc
        import torch

        plan = plan or self.plan(request)
        model_cfg = plan.config["model_cfg"]
        torch.manual_seed(request.seed)
        details: dict[str, Any] = {}
        with tempfile.TemporaryDirectory(prefix="zoo-open-clip-") as folder:
            text_tower: dict[str, Any] = {}  # create_model's text_cfg: the transformers tower from its config
            if plan.text_config is not None:
                text_dir = os.path.join(folder, "hf_text_tower")
                os.makedirs(text_dir)
                with open(os.path.join(text_dir, HF_CONFIG), "w") as f:
                    json.dump(plan.text_config, f)
                # OpenCLIP reads the config from this folder (AutoConfig.from_pretrained, offline) and builds
                # the tower from it (AutoModel.from_config); its weights are the repo's (full) or seeded
                text_tower["text_cfg"] = {
                    **model_cfg["text_cfg"],
                    "hf_model_name": text_dir,
                    "hf_model_pretrained": False,
                }
            if request.tier == "full":
                model = open_clip.create_model(
                    f"local-dir:{request.files_dir}",
                    load_weights=True,
                    pretrained_text=False,
                    weights_only=True,
                    output_dict=True,
                    **text_tower,
                )
            else:
                from ..weights import init_weights

                h, w = _image_size(model_cfg)

                def probe(model: torch.nn.Module) -> None:  # the timm tower runs at its image size
                    with torch.no_grad():
                        model.eval().visual(torch.zeros(1, 3, h, w))

                with open(os.path.join(folder, CONFIG_FILE), "w") as f:
                    json.dump(plan.config, f)

                def create(extra: dict[str, Any]) -> torch.nn.Module:
                    with _timm_tower_overrides(extra):
                        return open_clip.create_model(
                            f"local-dir:{folder}",
                            load_weights=False,
                            pretrained_image=False,
                            pretrained_text=False,
                            output_dict=True,
                            **text_tower,
                        )

                if plan.timm_shrink is None:
                    model = create({})
                else:
                    model, details["timm_shrink"] = build_shrunk(create, plan.timm_shrink, probe)
                init_weights(model, request.seed)
        model.eval()
        if plan.text_config is not None:  # token ids of the transformers tower's vocabulary, none of them padding
            vocab = int(plan.text_config.get("vocab_size") or TINY_VOCAB)
            pad = plan.text_config.get("pad_token_id")
        else:
            vocab, pad = int(model_cfg.get("text_cfg", {}).get("vocab_size", 49408)), None

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            gen = torch.Generator().manual_seed(seed)
            image = torch.randn(shape["batch"], 3, shape["height"], shape["width"], generator=gen)
            if isinstance(pad, int) and 1 <= pad < vocab:  # ids 1..vocab-1 less the padding id
                text = torch.randint(1, vocab - 1, (shape["batch"], shape["seq"]), generator=gen)
                text = text + (text >= pad).long()
            else:
                text = torch.randint(1, vocab, (shape["batch"], shape["seq"]), generator=gen)
            return {"image": image, "text": text}

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
