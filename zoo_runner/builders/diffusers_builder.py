"""diffusers pipelines (the ``diffusers`` extra): the pipeline's denoiser and its VAE decoder.

A diffusers repo is a folder of components named in ``model_index.json``
(``"unet": ["diffusers", "UNet2DConditionModel"]``), each with its own ``<name>/config.json``.
Zoo validates what runs on the accelerator for every image: one denoising step of the denoiser
(``unet`` or ``transformer``) and the VAE decode of a latent, together as one module. Text encoders
are transformers models, validated as such. Only classes of the diffusers package itself are built
(never a repo's own code).

Tiny configs keep each component's block layout (block types, their count, the latent channels,
additional embeddings) and shrink widths, depths and heads, as diffusers' own tests build tiny
models. Inputs come from the denoiser's forward signature, keyed by input name.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from ..exceptions import NotSupported
from ..statuses import Reason
from .base import Built

DENOISERS = ("unet", "transformer")  # model_index.json component names, in order of preference
DECODER = "vae"
DECODER_PREFIX = "Autoencoder"  # a single-component repo holding a VAE (AutoencoderKL, ...)
CONFIG_FILE = "model_index.json"
TEXT_LEN = (8, 6)  # text tokens per shape
SHAPES = ({"batch": 1, "size": 16, "text": TEXT_LEN[0]}, {"batch": 2, "size": 24, "text": TEXT_LEN[1]})
FRAMES = 2  # video denoisers (Stable Video Diffusion): frames per sample
WIDTH = 32
HEAD_DIM = 8
GROUPS = 8


def component_files(model_index: dict[str, Any]) -> list[str]:
    """The component configs a plan reads (fetched by the parent with the model index)."""
    return [f"{name}/config.json" for name in (*DENOISERS, DECODER) if isinstance(model_index.get(name), list)]


def _list_or_int(value: Any, n_value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [n_value] * len(value)
    return n_value


def shrink_component(cfg: dict[str, Any]) -> dict[str, Any]:
    """A tiny config with the same block layout: widths, depths and heads shrunk, couplings kept."""
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    if isinstance(cfg.get("block_out_channels"), (list, tuple)):
        n = len(cfg["block_out_channels"])
        cfg["block_out_channels"] = [WIDTH * min(i + 1, 2) for i in range(n)]
    if "norm_num_groups" in cfg and cfg["norm_num_groups"]:
        cfg["norm_num_groups"] = GROUPS
    for key in ("layers_per_block",):
        if key in cfg and cfg[key]:
            cfg[key] = _list_or_int(cfg[key], 1)
    if "transformer_layers_per_block" in cfg:
        cfg["transformer_layers_per_block"] = _list_or_int(cfg["transformer_layers_per_block"], 1)
    if "cross_attention_dim" in cfg and cfg["cross_attention_dim"]:
        cfg["cross_attention_dim"] = _list_or_int(cfg["cross_attention_dim"], WIDTH)
    rope = cfg.get("axes_dims_rope")
    if isinstance(rope, (list, tuple)):  # rotary axes must add up to the head dim
        head_dim = 16
        cfg["axes_dims_rope"] = [4, 6, 6] if len(rope) == 3 else [head_dim // len(rope)] * len(rope)
        cfg["attention_head_dim"] = head_dim
    elif "attention_head_dim" in cfg and cfg["attention_head_dim"]:
        cfg["attention_head_dim"] = _list_or_int(cfg["attention_head_dim"], HEAD_DIM)
    if cfg.get("num_attention_heads"):
        cfg["num_attention_heads"] = _list_or_int(cfg["num_attention_heads"], 2)
    for key in ("num_layers", "num_single_layers"):
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            cfg[key] = 1
    for key in ("joint_attention_dim", "pooled_projection_dim"):
        if cfg.get(key):
            cfg[key] = WIDTH
    if cfg.get("caption_projection_dim"):  # SD3: the projected caption is the transformer's width
        cfg["caption_projection_dim"] = cfg.get("num_attention_heads", 2) * cfg.get("attention_head_dim", HEAD_DIM)
    if cfg.get("addition_embed_type") == "text_time":  # SDXL: pooled text + 6 time ids, each embedded
        cfg["addition_time_embed_dim"] = HEAD_DIM
        cfg["projection_class_embeddings_input_dim"] = 6 * HEAD_DIM + WIDTH
    if cfg.get("time_cond_proj_dim"):
        cfg["time_cond_proj_dim"] = WIDTH
    for key in ("text_len", "text_len_t5"):  # HunyuanDiT: text of a fixed length (its padding is a parameter)
        if isinstance(cfg.get(key), int) and cfg[key] > 0:
            cfg[key] = TEXT_LEN[0]
    if cfg.get("cross_attention_dim_t5"):
        cfg["cross_attention_dim_t5"] = WIDTH
    heads, head_dim = cfg.get("num_attention_heads"), cfg.get("attention_head_dim")
    if cfg.get("hidden_size") and isinstance(heads, int) and isinstance(head_dim, int):
        cfg["hidden_size"] = heads * head_dim  # a DiT's width is its heads'
    if cfg.get("dual_attention_layers"):
        cfg["dual_attention_layers"] = [0]
    if "sample_size" in cfg:
        cfg["sample_size"] = 32
    return cfg


def _with_defaults(class_name: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """The component's config over its class defaults (a partial config shrinks as a full one)."""
    try:
        import diffusers
    except ImportError:
        return dict(cfg)
    cls = getattr(diffusers, class_name, None)
    if cls is None:
        return dict(cfg)
    defaults = {
        k: p.default
        for k, p in inspect.signature(cls.__init__).parameters.items()
        if k != "self" and p.default is not inspect.Parameter.empty
    }
    return {**defaults, **cfg}


@dataclass
class DiffusersPlan:
    pipeline: str
    denoiser_name: str | None  # the component's folder in a pipeline repo
    denoiser_class: str | None
    decoder_class: str | None
    denoiser_config: dict[str, Any] | None
    decoder_config: dict[str, Any] | None
    config_source: str
    shapes: list[dict] = field(default_factory=lambda: [dict(s) for s in SHAPES])
    single: bool = False  # one component at the repo's root (a VAE, a ControlNet), not a pipeline

    @property
    def architecture(self) -> str:
        return "+".join(c for c in (self.denoiser_class, self.decoder_class) if c)

    def fingerprint(self, library: str, tier: str) -> str:
        from ..fingerprint import fingerprint

        return fingerprint(
            library,
            self.architecture,
            {"denoiser": self.denoiser_config, "decoder": self.decoder_config},
            tier,
            self.shapes,
        )


class DenoiseAndDecode(nn.Module):
    """One denoising step and one VAE decode: what a diffusion pipeline runs on the accelerator."""

    def __init__(self, denoiser: nn.Module | None, decoder: nn.Module | None) -> None:
        super().__init__()
        self.denoiser, self.decoder = denoiser, decoder
        self._params = set(inspect.signature(denoiser.forward).parameters) if denoiser is not None else set()
        # a video VAE (AutoencoderKLTemporalDecoder) decodes frames together: it is told how many
        self._decode_frames = decoder is not None and "num_frames" in inspect.signature(decoder.decode).parameters

    def forward(
        self,
        latents: torch.Tensor | None = None,
        text_embeds: torch.Tensor | None = None,
        time_ids: torch.Tensor | None = None,
        **inputs: torch.Tensor,
    ) -> dict[str, torch.Tensor]:
        kwargs = {k: v for k, v in inputs.items() if k in self._params}
        if text_embeds is not None and time_ids is not None:
            kwargs["added_cond_kwargs"] = {"text_embeds": text_embeds, "time_ids": time_ids}
        if "image_rotary_cos" in inputs and "image_rotary_emb" in self._params:  # HunyuanDiT: (cos, sin)
            kwargs["image_rotary_emb"] = (inputs["image_rotary_cos"], inputs["image_rotary_sin"])
        out: dict[str, Any] = {}
        if self.denoiser is not None:
            res = self.denoiser(**kwargs, return_dict=False)
            out["denoised"] = res[0] if len(res) == 1 else list(res)  # ControlNet: down and mid residuals
        if self.decoder is not None and latents is not None:
            frames = {"num_frames": latents.shape[0]} if self._decode_frames else {}
            out["decoded"] = self.decoder.decode(latents, **frames, return_dict=False)[0]
        return out


class DiffusersBuilder:
    library = "diffusers"
    config_files = (CONFIG_FILE, "config.json")  # a pipeline, else one component at the repo's root

    def extra_files(self, model_index: dict[str, Any]) -> list[str]:
        return component_files(model_index)

    def plan(self, request: Any) -> DiffusersPlan:
        index = dict(request.config or {})
        extras = request.extras or {}
        name = next((n for n in DENOISERS if isinstance(index.get(n), list)), None)
        if (
            name is None
            and isinstance(index.get("_class_name"), str)
            and not any(isinstance(v, list) and len(v) == 2 for v in index.values())
        ):
            return self._plan_component(request, index)
        if name is None:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"{request.model_id}: model_index.json names no unet or transformer"
            )
        lib, cls = (index[name] + [None, None])[:2]
        if lib != "diffusers" or not isinstance(cls, str):
            raise NotSupported(
                Reason.REMOTE_CODE, f"{request.model_id}: its {name} is {lib}.{cls}, not a diffusers class"
            )
        dec = index.get(DECODER)
        dec_cls = dec[1] if isinstance(dec, list) and len(dec) == 2 and dec[0] == "diffusers" else None
        den_cfg = _with_defaults(cls, extras.get(f"{name}/config.json") or {})
        dec_cfg = _with_defaults(dec_cls, extras.get(f"{DECODER}/config.json") or {}) if dec_cls else None
        if request.tier != "full":
            den_cfg = shrink_component(den_cfg)
            dec_cfg = shrink_component(dec_cfg) if dec_cfg is not None else None
        return DiffusersPlan(
            pipeline=str(index.get("_class_name") or "pipeline"),
            denoiser_name=name,
            denoiser_class=cls,
            decoder_class=dec_cls,
            denoiser_config=den_cfg,
            decoder_config=dec_cfg,
            config_source=request.config_source or f"hub:{request.model_id}",
        )

    def _plan_component(self, request: Any, cfg: dict[str, Any]) -> DiffusersPlan:
        """A repo holding one component (a VAE, a ControlNet): its config.json names the class."""
        cls = cfg["_class_name"]
        full = _with_defaults(cls, cfg)
        if request.tier != "full":
            full = shrink_component(full)
        is_decoder = cls.startswith(DECODER_PREFIX)
        return DiffusersPlan(
            pipeline=cls,
            denoiser_name=None,
            denoiser_class=None if is_decoder else cls,
            decoder_class=cls if is_decoder else None,
            denoiser_config=None if is_decoder else full,
            decoder_config=full if is_decoder else None,
            config_source=request.config_source or f"hub:{request.model_id}",
            single=True,
        )

    def task(self, request: Any, plan: DiffusersPlan) -> str | None:
        """The row's task: the Hub's pipeline tag, else what the plan builds (the parent asks it too)."""
        return request.task or "text-to-image"

    def build(self, request: Any, plan: DiffusersPlan | None = None) -> Built:
        try:
            import diffusers
        except ImportError as exc:
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED,
                f"diffusers pipelines need the diffusers extra (pip install 'zoo[diffusers]'): {exc}",
            ) from exc
        plan = plan or self.plan(request)
        den_cls = getattr(diffusers, plan.denoiser_class, None) if plan.denoiser_class else None
        dec_cls = getattr(diffusers, plan.decoder_class, None) if plan.decoder_class else None
        if (plan.denoiser_class and den_cls is None) or (plan.decoder_class and dec_cls is None):
            raise NotSupported(
                Reason.LIBRARY_UNSUPPORTED, f"diffusers {diffusers.__version__} has no {plan.architecture}"
            )
        if request.tier == "full":
            root = request.files_dir or ""
            denoiser = (
                den_cls.from_pretrained(root, subfolder=plan.denoiser_name, use_safetensors=True) if den_cls else None
            )
            decoder = (
                dec_cls.from_pretrained(root, subfolder=None if plan.single else DECODER, use_safetensors=True)
                if dec_cls
                else None
            )
        else:
            from ..weights import init_weights

            denoiser = den_cls.from_config(plan.denoiser_config) if den_cls else None
            decoder = dec_cls.from_config(plan.decoder_config) if dec_cls else None
            if denoiser is not None:
                init_weights(denoiser, request.seed)
            if decoder is not None:
                init_weights(decoder, request.seed + 1)
        model = DenoiseAndDecode(
            denoiser.float() if denoiser is not None else None, decoder.float() if decoder is not None else None
        ).eval()
        den_config = dict(denoiser.config) if denoiser is not None else None
        dec_config = dict(decoder.config) if decoder is not None else None
        params = set(inspect.signature(denoiser.forward).parameters) if denoiser is not None else set()

        def make(shape: dict, seed: int) -> dict[str, torch.Tensor]:
            return make_inputs(den_config, dec_config, params, shape, seed)

        return Built(
            model=model,
            library=self.library,
            architecture=plan.architecture,
            task=self.task(request, plan),
            config_source=plan.config_source,
            make_inputs=make,
            shapes=plan.shapes,
        )


def make_inputs(
    den: dict[str, Any] | None, dec: dict[str, Any] | None, params: set[str], shape: dict, seed: int
) -> dict[str, torch.Tensor]:
    """Inputs for one denoising step (keyed by the denoiser's input names) and one decode."""
    g = torch.Generator().manual_seed(seed)
    b, s, t = shape["batch"], shape["size"], shape["text"]
    out: dict[str, torch.Tensor] = {}
    if den is not None:
        _denoiser_inputs(den, params, b, s, t, g, out)
    if dec is not None:
        down = 2 ** (len(dec.get("block_out_channels") or [1]) - 1)
        out["latents"] = torch.randn(
            b, dec.get("latent_channels") or 4, max(s // down, 2), max(s // down, 2), generator=g
        )
    return out


def _denoiser_inputs(
    den: dict[str, Any], params: set[str], b: int, s: int, t: int, g: torch.Generator, out: dict[str, torch.Tensor]
) -> None:
    cross = den.get("cross_attention_dim") or den.get("joint_attention_dim") or WIDTH
    cross = cross[0] if isinstance(cross, (list, tuple)) else cross
    in_ch = den.get("in_channels") or 4
    if "sample" in params and "added_time_ids" in params:  # video UNets: (batch, frames, channels, h, w)
        out["sample"] = torch.randn(b, FRAMES, in_ch, s, s, generator=g)
    elif "sample" in params:  # UNets: a latent image
        out["sample"] = torch.randn(b, in_ch, s, s, generator=g)
    elif "hidden_states" in params:
        if "img_ids" in params:  # Flux: 2x2-packed latent tokens with their (0, row, col) ids
            h = s // 2
            out["hidden_states"] = torch.randn(b, h * h, in_ch, generator=g)
            rows, cols = torch.meshgrid(torch.arange(h), torch.arange(h), indexing="ij")
            out["img_ids"] = torch.stack([torch.zeros_like(rows), rows, cols], dim=-1).reshape(-1, 3).float()
            out["txt_ids"] = torch.zeros(t, 3)
        else:  # SD3-style patchified transformers take the latent image
            out["hidden_states"] = torch.randn(b, in_ch, s, s, generator=g)
    out["timestep"] = torch.linspace(0.2, 0.8, b) if "img_ids" in params else torch.linspace(100, 900, b)
    if "encoder_hidden_states" in params and "added_time_ids" in params:  # SVD: one CLIP image embedding
        out["encoder_hidden_states"] = torch.randn(b, 1, cross, generator=g)
    elif "encoder_hidden_states_t5" in params:  # HunyuanDiT: CLIP and mT5 text, each of its fixed length
        n, n_t5 = den.get("text_len") or 77, den.get("text_len_t5") or 256
        out["encoder_hidden_states"] = torch.randn(b, n, cross, generator=g)
        out["text_embedding_mask"] = torch.ones(b, n, dtype=torch.long)
        out["encoder_hidden_states_t5"] = torch.randn(b, n_t5, den.get("cross_attention_dim_t5") or 2048, generator=g)
        out["text_embedding_mask_t5"] = torch.ones(b, n_t5, dtype=torch.long)
        if den.get("use_style_cond_and_image_meta_size"):
            px = float(8 * s)  # original size, target size, crop top-left, as the pipeline's add_time_ids
            out["image_meta_size"] = torch.tensor([[px, px, px, px, 0.0, 0.0]]).expand(b, -1).clone()
            out["style"] = torch.zeros(b, dtype=torch.long)
        from diffusers.models.embeddings import get_2d_rotary_pos_embed
        from diffusers.pipelines.hunyuandit.pipeline_hunyuandit import get_resize_crop_region_for_grid

        patch = den.get("patch_size") or 2
        grid, base = s // patch, 512 // 8 // patch  # as the pipeline: the grid placed in its 512-pixel base
        head_dim = (den.get("hidden_size") or 1152) // (den.get("num_attention_heads") or 16)
        crops = get_resize_crop_region_for_grid((grid, grid), base)
        out["image_rotary_cos"], out["image_rotary_sin"] = get_2d_rotary_pos_embed(head_dim, crops, (grid, grid))
    elif "encoder_hidden_states" in params:
        out["encoder_hidden_states"] = torch.randn(b, t, cross, generator=g)
    if "added_time_ids" in params:  # SVD's fps, motion bucket and noise augmentation, each embedded
        n_ids = (den.get("projection_class_embeddings_input_dim") or 768) // (den.get("addition_time_embed_dim") or 256)
        ids = [6.0, 127.0, 0.02][:n_ids] + [0.0] * max(n_ids - 3, 0)
        out["added_time_ids"] = torch.tensor(ids).expand(b, -1).clone()
    if "pooled_projections" in params and den.get("pooled_projection_dim"):
        out["pooled_projections"] = torch.randn(b, den["pooled_projection_dim"], generator=g)
    if "guidance" in params and den.get("guidance_embeds"):
        out["guidance"] = torch.full((b,), 3.5)
    if den.get("addition_embed_type") == "text_time":
        n_time = den.get("addition_time_embed_dim") or HEAD_DIM
        out["text_embeds"] = torch.randn(b, den["projection_class_embeddings_input_dim"] - 6 * n_time, generator=g)
        out["time_ids"] = torch.tensor([[s * 8.0, s * 8.0, 0.0, 0.0, s * 8.0, s * 8.0]]).expand(b, -1).clone()
    if "timestep_cond" in params and den.get("time_cond_proj_dim"):
        out["timestep_cond"] = torch.randn(b, den["time_cond_proj_dim"], generator=g)
    if "controlnet_cond" in params:  # ControlNet: the conditioning image, 8x the latent size
        out["controlnet_cond"] = torch.rand(b, den.get("conditioning_channels") or 3, 8 * s, 8 * s, generator=g)
