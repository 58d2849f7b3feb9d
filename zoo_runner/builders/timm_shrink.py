"""Shrinking timm models for the tiny and census tiers, standalone (the timm builder) or as a tower
inside a composite model (OpenCLIP's ``timm_model_name``).

timm has no config to shrink: a model name is an entrypoint that passes its own arguments
(``depth=27, embed_dim=1152, num_heads=16``) to a model class. :func:`constructor_args` asks timm
for that class and those arguments without building anything (timm's ``build_model_with_cfg`` is
replaced, for one call, by a recorder that stops there); :func:`shrink_overrides` turns them into
smaller ones, only for parameters the class's constructor takes:

- ``depth`` at most 2; ``depths``/``layers`` (blocks per stage) one block per stage;
- widths (``embed_dim``, ``embed_dims``, ``dims``, ``widths``, ``channels``, ``num_features``,
  ``head_hidden_size``) and head counts (``num_heads``, ``num_kv_heads``, ``attn_pool_num_heads``)
  divided by one common integer factor: with heads, the largest that leaves at least 2 heads, so
  the head width is kept and the heads still divide the widths; without heads, the largest power
  of 2 that leaves every width at least 16. Ratios (``mlp_ratio``), patch and image sizes, input
  channels and classes are not touched.

Timm passes an entrypoint's caller's arguments over its own (``dict(model_args, **kwargs)``), so
the overrides go to ``timm.create_model`` as keyword arguments. :func:`build_shrunk` builds with
them and falls back to the whole model where that build (or a probe forward) raises; its detail
(``details.timm_shrink`` on the row) says which way it went. timm is imported only when called.
"""

from __future__ import annotations

import inspect
import json
import math
import sys
from collections.abc import Callable
from typing import Any

DEPTH_KEYS = ("depth",)
STAGE_KEYS = ("depths", "layers")  # blocks per stage
WIDTH_KEYS = ("embed_dim", "embed_dims", "dims", "widths", "channels", "num_features", "head_hidden_size")
HEAD_KEYS = ("num_heads", "num_kv_heads", "attn_pool_num_heads")
TINY_DEPTH, MIN_HEADS, MIN_WIDTH = 2, 2, 16


class _Captured(Exception):
    def __init__(self, model_cls: Any, model_cfg: Any, kwargs: dict[str, Any]) -> None:
        super().__init__("captured")
        self.model_cls, self.model_cfg, self.kwargs = model_cls, model_cfg, kwargs


def constructor_args(name: str, **kwargs: Any) -> tuple[Any, dict[str, Any]] | None:
    """The class timm builds for ``name`` and every argument its constructor would get (the
    entrypoint's, the caller's ``kwargs``, the constructor's defaults); None where timm builds it
    some other way (a config dataclass, no ``build_model_with_cfg``)."""
    import timm
    import torch
    from timm.models import _builder

    original = _builder.build_model_with_cfg
    signature = inspect.signature(original)

    def record(*args: Any, **kw: Any) -> Any:
        bound = signature.bind(*args, **kw).arguments
        raise _Captured(bound["model_cls"], bound.get("model_cfg"), dict(bound.get("kwargs", {})))

    modules = [
        m
        for key, m in list(sys.modules.items())
        if key.startswith("timm.") and getattr(m, "build_model_with_cfg", None) is original
    ]
    try:
        for m in modules:
            m.build_model_with_cfg = record
        with torch.device("meta"):  # should the recorder not be reached, nothing real is built
            timm.create_model(name, pretrained=False, **kwargs)
    except _Captured as got:
        captured = got
    except Exception:
        return None
    else:
        return None
    finally:
        for m in modules:
            m.build_model_with_cfg = original
    if captured.model_cfg is not None:
        return None
    try:
        params = inspect.signature(captured.model_cls).parameters
    except (TypeError, ValueError):
        return None
    args = {k: p.default for k, p in params.items() if p.default is not inspect.Parameter.empty}
    args.update({k: v for k, v in captured.kwargs.items() if k in params})
    return captured.model_cls, args


def _ints(value: Any) -> list[int] | None:
    """An int, or a list/tuple of ints, as a list; None otherwise."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return [value]
    if (
        isinstance(value, (list, tuple))
        and value
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    ):
        return list(value)
    return None


def _divide(value: Any, factor: int) -> Any:
    if isinstance(value, int):
        return value // factor
    return type(value)(v // factor for v in value)


def _width_factor(widths: list[int], heads: list[int]) -> int:
    if not widths:
        return 1
    if heads:
        common = math.gcd(*heads)
        candidates = [
            d for d in range(common, 0, -1) if common % d == 0 and max(heads) // d >= min(MIN_HEADS, max(heads))
        ]
        for d in candidates:
            if all(w % d == 0 for w in widths):
                return d
        return 1
    factor = 1
    while all(w % (factor * 2) == 0 and w // (factor * 2) >= MIN_WIDTH for w in widths):
        factor *= 2
    return factor


def shrink_overrides(name: str, **kwargs: Any) -> dict[str, Any]:
    """The constructor arguments that shrink timm model ``name`` (built with ``kwargs``): only
    parameters its class takes and whose value changes; empty where there is nothing to shrink."""
    got = constructor_args(name, **kwargs)
    if got is None:
        return {}
    _, args = got
    out: dict[str, Any] = {}
    for key in DEPTH_KEYS:
        depth = args.get(key)
        if isinstance(depth, int) and not isinstance(depth, bool) and depth > TINY_DEPTH:
            out[key] = TINY_DEPTH
    for key in STAGE_KEYS:
        stages = _ints(args.get(key))
        if stages and isinstance(args[key], (list, tuple)) and any(s > 1 for s in stages):
            out[key] = tuple(min(s, 1) for s in stages)
    widths = {k: args[k] for k in WIDTH_KEYS if _ints(args.get(k))}
    heads = {k: args[k] for k in HEAD_KEYS if _ints(args.get(k))}
    factor = _width_factor(
        [w for v in widths.values() for w in _ints(v) or []], [h for v in heads.values() for h in _ints(v) or []]
    )
    if factor > 1:
        for key, value in {**widths, **heads}.items():
            out[key] = _divide(value, factor)
    out = {k: v for k, v in out.items() if k not in kwargs}  # what the caller sets stays
    return out if _passes_through(name, kwargs, out) else _passing(name, kwargs, out)


def _passes_through(name: str, kwargs: dict[str, Any], overrides: dict[str, Any]) -> bool:
    """Whether timm's entrypoint hands ``overrides`` to the constructor as they are (some set an
    argument themselves, or compute it: passing it too raises, or is ignored)."""
    got = constructor_args(name, **kwargs, **overrides) if overrides else None
    return got is not None and all(got[1].get(k) == v for k, v in overrides.items())


def _passing(name: str, kwargs: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """The overrides that pass through one by one, where all of them together do not."""
    out = {k: v for k, v in overrides.items() if _passes_through(name, kwargs, {k: v})}
    return out if _passes_through(name, kwargs, out) else {}


def plan_shrink(name: str, **kwargs: Any) -> dict[str, Any] | None:
    """:func:`shrink_overrides` where timm is installed and knows ``name``; None otherwise (the
    build then says why). What a plan records, so the fingerprint tells shrunk from whole."""
    try:
        import timm
    except ImportError:
        return None
    return shrink_overrides(name, **kwargs) if timm.is_model(name) else None


def build_shrunk(
    create: Callable[[dict[str, Any]], Any], overrides: dict[str, Any], probe: Callable[[Any], Any] | None = None
) -> tuple[Any, dict[str, Any]]:
    """``create(overrides)`` (and ``probe(model)``, a forward), or ``create({})`` — the whole model —
    where there are no overrides or that raises; with the detail that says which was built."""
    if not overrides:
        return create({}), {"built": "whole", "why": "no constructor parameter to shrink"}
    as_json = json.loads(json.dumps(overrides, default=str))  # the row's detail reads the same stored or not
    try:
        model = create(overrides)
        if probe is not None:
            probe(model)
        return model, {"built": "shrunk", "overrides": as_json}
    except Exception as exc:
        why = f"{type(exc).__name__}: {exc}"[:300]
    return create({}), {"built": "whole", "overrides": as_json, "why": f"the shrunk build raised {why}"}
