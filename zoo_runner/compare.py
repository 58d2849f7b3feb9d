"""Compare a backend's outputs with the CPU references (fp32 and fp64).

The budget is relative to each output's own scale and to the reference's own error against fp64:
a backend judged at fp32 may be as inexact as reordered fp32 reductions legitimately are (times a
factor), never more; one judged at bf16, fp16 or tf32 as inexact as the CPU reference computed at
that precision (:mod:`zoo_runner.precision`), times that precision's factor. Integers and
booleans must match exactly; NaN/Inf must sit where the reference has them, and so must a mask
value (finite, at the dtype's limit: ``torch.finfo(dtype).min``), which is no number to measure.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

# Per target dtype: (factor over fp32's own error, floor relative to the output's RMS).
BUDGETS: dict[str, tuple[float, float]] = {
    "float32": (10.0, 1e-5),
    "float64": (10.0, 1e-5),
    "float16": (10.0, 4e-3),
    "bfloat16": (10.0, 3e-2),
}
MIN_COSINE = {"float32": 0.99999, "float64": 0.99999, "float16": 0.999, "bfloat16": 0.99}


def saturated(x: torch.Tensor) -> torch.Tensor:
    """Where ``x`` holds a mask value rather than a number: finite, at half its dtype's largest
    magnitude or beyond (``torch.finfo(dtype).min``, the masked scores of an attention, plus a
    little). Where the reference holds one the target must too, of the same sign; it is left out
    of the errors and of the scale, which it would otherwise make ~1e38 and every budget with it.
    A mask scaled after it is applied (``finfo.min / 8``) is below the threshold: a number."""
    if not x.is_floating_point():
        return torch.zeros(x.shape, dtype=torch.bool)
    return torch.isfinite(x) & (x.abs() >= torch.finfo(x.dtype).max / 2)


def flatten(obj: Any, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor in a (nested) model output, with a path name. Caches and None are skipped."""
    if isinstance(obj, torch.Tensor):
        yield prefix or "output", obj
    elif isinstance(obj, dict):  # ModelOutput is an OrderedDict
        for k, v in obj.items():
            yield from flatten(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from flatten(v, f"{prefix}[{i}]")


@dataclass
class Comparison:
    """The verdict of :func:`compare` over one or more outputs: ``ok`` unless one is over its
    budget (each such output one line in ``problems``); the worst ``max_abs_diff``,
    ``max_rel_diff``, ``rmse_ratio`` (the target's RMSE over the reference's own) and ``cosine``."""

    ok: bool = True
    max_abs_diff: float = 0.0
    max_rel_diff: float = 0.0
    rmse_ratio: float = 0.0
    cosine: float = 1.0
    problems: list[str] = field(default_factory=list)
    # the largest share of a budget any output used (RMSE, max abs, cosine loss); over 1 fails, and a
    # failure no budget measures (shape, NaN, integers) is infinite. The parent checks a pass by it.
    budget_use: float = 0.0

    def fail(self, msg: str, use: float = float("inf")) -> None:
        self.ok = False
        self.problems.append(msg)
        self.budget_use = max(self.budget_use, use)


def pooled_reference_error(refs: list[Any], refs64: list[Any]) -> dict[str, tuple[float, float]]:
    """Per output name, the reference's error against fp64 pooled over every input: (RMSE over all
    their values, largest abs error).

    Below fp32 the budget is a multiple of the reference's own error, and one input's output may
    hold too few values to estimate that error: a one-element output (a batch of 1's similarity
    score, say) is a single rounding draw that may land next to the fp64 value by luck (measured:
    SigLIP-tiny's ``logits_per_image`` at batch 1 is 5e-5 off, at batch 2 8e-4), and a factor of
    it is then a budget no half-precision computation meets. Pooling the same output over all
    inputs (same model, same weights, same scale) estimates the error of the computation rather
    than of one draw."""
    sq_err: dict[str, float] = {}
    count: dict[str, int] = {}
    max_err: dict[str, float] = {}
    for ref, ref64 in zip(refs, refs64):
        r64_items = dict(flatten(ref64))
        for name, r in flatten(ref):
            r64 = r64_items.get(name)
            if r64 is None or not r.is_floating_point() or r64.shape != r.shape:
                continue
            err = r.detach().to(torch.float64) - r64.detach().to(torch.float64)
            err = err[torch.isfinite(err) & ~saturated(r.detach())]  # a mask value is no number
            if not err.numel():
                continue
            sq_err[name] = sq_err.get(name, 0.0) + float(err.pow(2).sum())
            count[name] = count.get(name, 0) + err.numel()
            max_err[name] = max(max_err.get(name, 0.0), float(err.abs().max()))
    return {n: (math.sqrt(sq_err[n] / count[n]), max_err[n]) for n in sq_err}


def _finite(x: float) -> float:
    return x if math.isfinite(x) else float("inf")


def compare(
    target: Any,
    ref32: Any,
    ref64: Any,
    dtype: str = "float32",
    tolerance_factor: float = 1.0,
    result: Comparison | None = None,
    label: str = "",
    precision: str = "fp32",
    pooled: dict[str, tuple[float, float]] | None = None,
) -> Comparison:
    """Judge ``target`` against ``ref32`` (the CPU reference at the precision the backend is judged
    at: fp32, or a bf16/fp16/tf32 one) with fp64 as the truth. The budget is the factor for that
    precision times the reference's own error against fp64 (RMSE, max abs, cosine loss).

    ``target``, ``ref32`` and ``ref64`` are model outputs (tensors, or dicts/lists/tuples of them,
    matched by their :func:`flatten` path names). ``dtype`` is the dtype the backend ran in (its
    :data:`BUDGETS` row); ``precision`` what a float32 run is judged at; ``tolerance_factor`` (a
    quirk row's) widens every budget; ``pooled`` (:func:`pooled_reference_error`) is the
    reference's error pooled over all inputs, used below fp32. Integer and boolean outputs must
    match exactly, NaN and Inf sit where fp64 has them.

    Accumulates into ``result`` (a fresh :class:`Comparison` if None) and returns it, so several
    inputs (named by ``label`` in its problems) make one verdict: ``ok``, the worst metrics over
    every output, and one problem line per output over its budget. Never raises for a mismatch.
    """
    from .precision import factor as precision_factor

    res = result or Comparison()
    factor, floor = BUDGETS.get(dtype, BUDGETS["float32"])
    if dtype == "float32":
        factor = precision_factor(precision)
    at = f"the {precision} budget" if dtype == "float32" else f"the {dtype} budget"
    factor *= tolerance_factor
    floor *= tolerance_factor
    t_items, r_items, d_items = dict(flatten(target)), dict(flatten(ref32)), dict(flatten(ref64))
    below_fp32 = dtype == "float32" and precision != "fp32"
    pooled_by = {(f"{label}: {k}" if label else k): v for k, v in (pooled or {}).items()} if below_fp32 else {}
    if label:
        t_items, r_items, d_items = ({f"{label}: {k}": v for k, v in d.items()} for d in (t_items, r_items, d_items))
    if set(t_items) != set(r_items):
        res.fail(f"output structure differs: target {sorted(t_items)[:5]} vs reference {sorted(r_items)[:5]}")
        return res
    for name, ref in r_items.items():
        tgt = t_items[name].detach().to("cpu")
        ref = ref.detach()
        if tgt.shape != ref.shape:
            res.fail(f"{name}: shape {tuple(tgt.shape)} != reference {tuple(ref.shape)}")
            continue
        if not ref.is_floating_point() and not ref.is_complex():
            if not torch.equal(tgt.to(ref.dtype), ref):
                res.fail(f"{name}: integer/boolean output differs")
            continue
        r64 = d_items.get(name, ref).detach().to(torch.float64)
        if r64.shape != ref.shape:  # fp32 and fp64 references disagree: the model itself is random
            res.fail(
                f"{name}: the fp64 reference has shape {tuple(r64.shape)}, "
                f"the fp32 one {tuple(ref.shape)} (non-deterministic model)"
            )
            continue
        t64 = tgt.to(torch.float64)
        r32 = ref.to(torch.float64)
        ref_nan, tgt_nan = torch.isnan(r64), torch.isnan(t64)
        if not torch.equal(ref_nan, tgt_nan):
            extra, missing = int((tgt_nan & ~ref_nan).sum()), int((ref_nan & ~tgt_nan).sum())
            res.fail(
                f"{name}: NaN where the reference has none ({extra} values)"
                if extra
                else f"{name}: a number where the reference has NaN ({missing} values)"
            )
            res.max_abs_diff = res.rmse_ratio = float("inf")
            res.cosine = float("nan")
            continue
        # where the reference holds a mask value the target must too (saturated, or Inf past it: fp16's
        # finfo.min plus a negative score overflows), with its sign; a saturated target where the
        # reference has a number is judged as the number it is (and blows the budget)
        sat_ref = saturated(ref)
        if sat_ref.any():
            held = t64[sat_ref]
            wrong = ~((saturated(tgt)[sat_ref] | torch.isinf(held)) & (held.sign() == r32[sat_ref].sign()))
            if wrong.any():
                res.fail(
                    f"{name}: no mask value (at the dtype's limit, of its sign) where the reference has one "
                    f"({int(wrong.sum())} values)"
                )
                res.max_abs_diff = res.rmse_ratio = float("inf")
                res.cosine = float("nan")
                continue
        ref_inf, tgt_inf = torch.isinf(r64) & ~sat_ref, torch.isinf(t64) & ~sat_ref
        if not torch.equal(ref_inf, tgt_inf) or not torch.equal(r64[ref_inf], t64[tgt_inf]):
            res.fail(f"{name}: Inf differs from the reference")
            res.max_abs_diff = res.rmse_ratio = float("inf")
            res.cosine = float("nan")
            continue
        finite = torch.isfinite(r64) & ~sat_ref
        if not finite.any():
            continue
        if bool(finite.all()):  # the usual case: no masked copies (a VLM's logits are 10^8 values)
            r64f, t64f, r32f = r64.reshape(-1), t64.reshape(-1), r32.reshape(-1)
        else:
            r64f, t64f, r32f = r64[finite], t64[finite], r32[finite]
        diff = (t64f - r64f).abs_()
        err32 = (r32f - r64f).abs_()
        scale = float(r64f.pow(2).mean().sqrt())
        max_abs = float(diff.max())
        rel = diff / (r64f.abs() + max(scale, 1e-30) * 1e-3)
        err_target = float(diff.pow(2).mean().sqrt())
        err_ref32 = float(err32.pow(2).mean().sqrt())
        max_ref32 = float(err32.max())
        del err32
        if name in pooled_by:  # below fp32: the reference's error estimated over every input
            err_ref32, max_ref32 = max(err_ref32, pooled_by[name][0]), max(max_ref32, pooled_by[name][1])
        budget = max(factor * err_ref32, floor * scale, 1e-30)
        ratio = err_target / max(err_ref32, floor * scale, 1e-30)
        denom = float(t64f.norm() * r64f.norm())
        cos = float((t64f * r64f).sum() / denom) if denom > 0 else (1.0 if max_abs == 0 else 0.0)
        res.max_abs_diff = max(res.max_abs_diff, _finite(max_abs))
        res.max_rel_diff = max(res.max_rel_diff, _finite(float(rel.max())))
        res.rmse_ratio = max(res.rmse_ratio, _finite(ratio))
        if not math.isnan(res.cosine):  # NaN (a NaN/Inf mismatch elsewhere) stays
            res.cosine = min(res.cosine, cos)
        max_budget = max(factor * max_ref32, 10 * floor * float(r64f.abs().max()), 1e-30)
        # The cosine floor, like the budgets, allows factor x the fp32 reference's own loss against fp64:
        # on an ill-conditioned output (fp32 itself far from fp64) an exact backend must not fail.
        ref_denom = float(r32f.norm() * r64f.norm())
        cos_ref32 = float((r32f * r64f).sum() / ref_denom) if ref_denom > 0 else 1.0
        # Below fp32 the factor applies to the error, and a cosine loss grows as the error squared
        # (1 - cos ~ rmse^2 / 2 rms^2): the same budget on the loss is factor^2. fp32 keeps its
        # stricter linear rule.
        loss_factor = factor if precision == "fp32" or dtype != "float32" else factor * factor
        min_cos = min(MIN_COSINE.get(dtype, 0.99999), 1.0 - loss_factor * (1.0 - cos_ref32))
        cos_use = (1 - cos) / max(1 - min_cos, 1e-30) if scale > 0 else 0.0
        use = max(err_target / budget, max_abs / max_budget, cos_use if cos < min_cos else min(cos_use, 1.0))
        if err_target > budget:
            res.fail(
                f"{name}: RMSE {err_target:.3g} exceeds {at} {budget:.3g}, "
                f"{err_target / budget:.3g}x over (scale {scale:.3g})",
                use,
            )
        elif max_abs > max_budget:
            res.fail(
                f"{name}: max abs diff {max_abs:.3g} exceeds {at} {max_budget:.3g}, {max_abs / max_budget:.3g}x over",
                use,
            )
        elif cos < min_cos and scale > 0:
            res.fail(
                f"{name}: cosine {cos:.6f} below {at} {min_cos:.6g}, "
                f"{(1 - cos) / max(1 - min_cos, 1e-30):.3g}x the allowed loss",
                use,
            )
        else:
            res.budget_use = max(res.budget_use, _finite(use))
    return res
