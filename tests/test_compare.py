"""The comparison catches small systematic errors and tolerates reduction-order noise."""

from __future__ import annotations

import torch

from zoo_runner.compare import compare


def _refs(seed: int = 0, shape=(4, 32, 64)):
    g = torch.Generator().manual_seed(seed)
    x64 = torch.randn(*shape, generator=g, dtype=torch.float64)
    w64 = torch.randn(shape[-1], shape[-1], generator=g, dtype=torch.float64) / shape[-1] ** 0.5
    ref64 = x64 @ w64
    ref32 = x64.float() @ w64.float()
    return x64, w64, ref32, ref64


def test_reordered_fp32_reduction_passes():
    x64, w64, ref32, ref64 = _refs()
    # the same product summed in another order (split K): legitimate fp32 noise
    k = x64.shape[-1] // 2
    target = x64[..., :k].float() @ w64[:k].float() + x64[..., k:].float() @ w64[k:].float()
    res = compare({"logits": target}, {"logits": ref32}, {"logits": ref64})
    assert res.ok, res.problems
    assert res.cosine > 0.99999


def test_one_percent_error_is_caught():
    _, _, ref32, ref64 = _refs()
    res = compare({"logits": ref32 * 1.01}, {"logits": ref32}, {"logits": ref64})
    assert not res.ok


def test_small_bias_shift_is_caught():
    _, _, ref32, ref64 = _refs()
    res = compare({"logits": ref32 + 0.01}, {"logits": ref32}, {"logits": ref64})
    assert not res.ok


def test_single_nan_is_caught():
    _, _, ref32, ref64 = _refs()
    t = ref32.clone()
    t[1, 2, 3] = float("nan")
    res = compare({"logits": t}, {"logits": ref32}, {"logits": ref64})
    assert not res.ok and "NaN" in res.problems[0]


def test_swapped_columns_are_caught():
    _, _, ref32, ref64 = _refs()
    t = ref32.clone()
    t[..., [0, 1]] = t[..., [1, 0]]
    assert not compare({"logits": t}, {"logits": ref32}, {"logits": ref64}).ok


def test_integers_must_match_exactly_and_structure_is_compared():
    ids = torch.arange(10)
    assert compare({"ids": ids}, {"ids": ids}, {"ids": ids}).ok
    assert not compare({"ids": ids + 1}, {"ids": ids}, {"ids": ids}).ok
    assert not compare({"a": torch.ones(2)}, {"b": torch.ones(2)}, {"b": torch.ones(2)}).ok
    assert not compare({"a": torch.ones(2)}, {"a": torch.ones(3)}, {"a": torch.ones(3, dtype=torch.float64)}).ok


def test_nested_outputs_are_all_compared():
    _, _, ref32, ref64 = _refs()
    target = {"hidden": (ref32, ref32 * 1.05)}
    assert not compare(target, {"hidden": (ref32, ref32)}, {"hidden": (ref64, ref64)}).ok


def test_bf16_budget_accepts_bf16_rounding_but_not_a_real_error():
    _, _, ref32, ref64 = _refs()
    bf = ref32.to(torch.bfloat16).float()
    assert compare({"o": bf}, {"o": ref32}, {"o": ref64}, dtype="bfloat16").ok
    assert not compare({"o": bf}, {"o": ref32}, {"o": ref64}, dtype="float32").ok
    assert not compare({"o": (ref32 * 1.2).to(torch.bfloat16).float()}, {"o": ref32}, {"o": ref64}, dtype="bfloat16").ok


def test_references_of_different_shapes_fail_without_raising():
    """A random model can give fp32 and fp64 references of different lengths: a verdict, not a crash."""
    r32 = {"waveform": torch.ones(1, 4096)}
    r64 = {"waveform": torch.ones(1, 4608, dtype=torch.float64)}
    res = compare({"waveform": torch.ones(1, 4096)}, r32, r64)
    assert not res.ok and "non-deterministic" in res.problems[0]


def test_a_number_where_the_reference_has_nan_is_named_as_such():
    ref = torch.tensor([1.0, float("nan")])
    res = compare({"y": torch.tensor([1.0, 2.0])}, {"y": ref}, {"y": ref.double()})
    assert not res.ok and "where the reference has NaN (1 values)" in res.problems[0]


def test_the_cosine_floor_follows_the_fp32_references_own_loss():
    torch.manual_seed(0)
    r64 = torch.randn(4, 64, dtype=torch.float64)
    # an ill-conditioned output: fp32 itself lands far from fp64 (cosine ~0.96)
    r32 = (r64 + 0.3 * torch.randn(4, 64, dtype=torch.float64)).float()
    assert compare(r32.clone(), r32, r64).ok  # an exact backend is no false alarm
    assert not compare(torch.randn(4, 64), r32, r64).ok  # unrelated numbers still fail
    # a well-conditioned output keeps the 0.99999 floor: a small rotation fails
    exact = r64.float()
    off = exact + 0.01 * torch.randn(4, 64)
    res = compare(off, exact, r64)
    assert not res.ok and res.cosine < 0.99999


def _masked(t: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """``t`` with attention-style mask values: torch.finfo(dtype).min plus the score, as Longformer's
    ``attn_scores += diagonal_mask`` leaves them."""
    return torch.where(where, torch.finfo(t.dtype).min + t, t)


def _masked_refs():
    """fp32 and fp64 references of scores masked at each one's own finfo.min, as a model computing
    ``torch.finfo(x.dtype).min`` gives them in each precision."""
    _, _, ref32, ref64 = _refs()
    where = torch.zeros(ref32.shape, dtype=torch.bool)
    where[..., :8] = True
    return where, ref32, _masked(ref32, where), _masked(ref64, where)


def test_mask_values_are_no_number_an_error_beside_them_is_caught():
    # Longformer's attention scores on xla+openxla: 4.5 off on the real scores, beside masked ones at
    # finfo(fp32).min; as numbers the masked ones made the scale 1e38 and the error invisible
    where, ref32, ref32m, ref64m = _masked_refs()
    assert compare({"s": _masked(ref32.clone(), where)}, {"s": ref32m}, {"s": ref64m}).ok
    res = compare({"s": _masked(ref32 + 4.5 * (~where), where)}, {"s": ref32m}, {"s": ref64m})
    assert not res.ok and "RMSE" in res.problems[0], res.problems
    res = compare({"s": _masked(ref32 * 1.01, where)}, {"s": ref32m}, {"s": ref64m})
    assert not res.ok, "a 1 % error beside mask values is still caught"


def test_mask_values_must_sit_where_the_reference_has_them():
    where, ref32, ref32m, ref64m = _masked_refs()
    res = compare({"s": ref32.clone()}, {"s": ref32m}, {"s": ref64m})  # the mask lost
    assert not res.ok and "no mask value" in res.problems[0], res.problems
    res = compare({"s": torch.where(where, -ref32m, ref32m)}, {"s": ref32m}, {"s": ref64m})  # its sign flipped
    assert not res.ok and "no mask value" in res.problems[0], res.problems
    # a mask value where the reference has a number is judged as the number it is
    res = compare({"s": _masked(ref32.clone(), where.roll(1, dims=-1) | where)}, {"s": ref32m}, {"s": ref64m})
    assert not res.ok and "RMSE" in res.problems[0], res.problems
    # -inf past the mask (fp16's finfo.min plus a negative score overflows) is the mask still
    assert compare({"s": torch.where(where, float("-inf"), ref32m)}, {"s": ref32m}, {"s": ref64m}).ok


def test_mask_values_in_half_precision_and_large_half_numbers():
    _, _, ref32, ref64 = _refs()
    where = torch.zeros(ref32.shape, dtype=torch.bool)
    where[..., :8] = True
    k = 58000 / float(ref64.abs().max())  # numbers past half of fp16's range (32752): numbers still
    big32, big64 = ref32 * k, ref64 * k
    res = compare({"s": big32.half()}, {"s": big32}, {"s": big64}, dtype="float16")
    assert res.ok and "mask" not in " ".join(res.problems), res.problems
    # fp16 target masked at its own finfo.min where the fp32 reference has fp32's
    t16 = torch.where(where, torch.finfo(torch.float16).min, ref32.half())
    assert compare({"s": t16}, {"s": _masked(ref32, where)}, {"s": _masked(ref64, where)}, dtype="float16").ok


def test_a_complex_output_is_compared_without_the_mask_rule():
    z = torch.randn(4, 8, dtype=torch.complex64)
    assert compare({"z": z.clone()}, {"z": z}, {"z": z.to(torch.complex128)}).ok


def test_the_pooled_reference_error_leaves_mask_values_out():
    from zoo_runner.compare import pooled_reference_error

    where, _, ref32m, ref64m = _masked_refs()
    pooled = pooled_reference_error([{"s": ref32m}], [{"s": ref64m}])
    rmse, max_err = pooled["s"]
    assert 0 < rmse < 1e-5 and max_err < 1e-4, pooled  # fp32 rounding, not finfo(fp32).min - finfo(fp64).min
