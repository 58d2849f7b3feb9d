"""CPU references are cached on disk and reused while model, revision and versions are unchanged."""

from __future__ import annotations

import os
import time

import pytest
import torch

from zoo_runner import reference_cache as rc
from zoo_runner.engine import validate_here
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest


def _req(cache, backend="cpu", **kw):
    return ValidationRequest("arch:BertModel", backend=backend, reference_cache=str(cache), **kw)


def _only_file(cache):
    files = list(cache.glob("*.safetensors"))
    assert len(files) == 1, files
    return files[0]


def test_reference_is_computed_once_then_reused_by_every_backend(tmp_path):
    first = validate_here(_req(tmp_path))
    assert first["status"] == "pass" and first["details"]["reference_cache"] == "stored"
    again = validate_here(_req(tmp_path))
    assert again["details"]["reference_cache"] == "hit" and again["status"] == "pass"
    assert (
        again["op_census"] == first["op_census"]
        and again["metrics"]["reference_ms"] == first["metrics"]["reference_ms"]
    )
    assert again["metrics"]["max_abs_diff"] == first["metrics"]["max_abs_diff"]
    other = validate_here(_req(tmp_path, backend="cpu+aot_eager"))
    assert other["details"]["reference_cache"] == "hit" and other["status"] == "pass", other["error"]
    _only_file(tmp_path)


def test_the_cached_reference_is_what_the_target_is_compared_with(tmp_path):
    """Prove reuse: a reference tampered with on disk turns the next verdict into a mismatch."""
    assert validate_here(_req(tmp_path))["status"] == "pass"
    path = _only_file(tmp_path)
    key = path.stem
    cache = rc.ReferenceCache(tmp_path)
    ref = cache.load(key)
    assert ref is not None

    def skew(outs):
        return [{k: v * 1.01 if v.is_floating_point() else v for k, v in o.items()} for o in outs]

    cache.store(key, rc.CachedReference(skew(ref.ref32), skew(ref.ref64), ref.op_census, ref.reference_ms, None))
    r = validate_here(_req(tmp_path))
    assert r["details"]["reference_cache"] == "hit" and r["status"] == "mismatch"
    path.unlink()
    r = validate_here(_req(tmp_path))
    assert r["details"]["reference_cache"] == "stored" and r["status"] == "pass"


def test_an_unreadable_cache_file_is_recomputed_and_replaced(tmp_path):
    validate_here(_req(tmp_path))
    path = _only_file(tmp_path)
    path.write_bytes(b"not a safetensors file")
    r = validate_here(_req(tmp_path))
    assert r["status"] == "pass" and r["details"]["reference_cache"] == "stored"
    assert rc.ReferenceCache(tmp_path).load(path.stem) is not None


def test_a_new_seed_is_a_new_reference_and_the_census_shares_the_tiny_one(tmp_path):
    validate_here(_req(tmp_path))
    assert validate_here(_req(tmp_path, seed=1))["details"]["reference_cache"] == "stored"
    census = validate_here(_req(tmp_path, tier="census"))  # the same build as tiny: its entry
    assert census["details"]["reference_cache"] == "hit" and census["op_census"]
    assert len(list(tmp_path.glob("*.safetensors"))) == 2


def test_a_tiny_run_after_the_census_adds_only_the_fp64_reference(tmp_path):
    census = validate_here(_req(tmp_path, tier="census"))
    assert census["details"]["reference_cache"] == "stored"
    tiny = validate_here(_req(tmp_path))
    assert tiny["details"]["reference_cache"] == "hit (fp32), fp64 added", tiny["details"]
    assert tiny["status"] == "pass" and "reference64" not in tiny["details"]  # a real fp64 reference
    assert tiny["op_census"] == census["op_census"]
    fresh = validate_here(_req(tmp_path / "fresh"))  # the same verdict and numbers as computing it all
    assert tiny["metrics"]["rmse_ratio"] == fresh["metrics"]["rmse_ratio"]
    assert validate_here(_req(tmp_path))["details"]["reference_cache"] == "hit"
    assert len(list(tmp_path.glob("*.safetensors"))) == 1


def _key(model, inputs, **over):
    kw = dict(
        model_id="org/m",
        revision="a" * 40,
        tier="tiny",
        seed=0,
        fingerprint="f" * 24,
        versions={"torch": "2.13.0", "transformers": "5.23.0", "zoo": "0.1.0"},
        harness="1",
        model=model,
        inputs=inputs,
    )
    kw.update(over)
    return rc.reference_key(**kw)


def test_the_key_changes_with_model_revision_versions_inputs_and_weights():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    inputs = [{"x": torch.ones(2, 4)}]
    base = _key(model, inputs)
    assert base == _key(model, [{"x": torch.ones(2, 4)}])  # deterministic
    changed = [
        _key(model, inputs, model_id="org/other"),
        _key(model, inputs, revision="b" * 40),
        _key(model, inputs, versions={"torch": "2.14.1", "transformers": "5.23.0", "zoo": "0.1.0"}),
        _key(model, inputs, versions={"torch": "2.13.0", "transformers": "5.24.0", "zoo": "0.1.0"}),
        _key(model, inputs, harness="2"),
        _key(model, [{"x": torch.full((2, 4), 2.0)}]),
    ]
    with torch.no_grad():
        model.bias.add_(1.0)
    changed.append(_key(model, inputs))
    assert base not in changed and len(set(changed)) == len(changed)
    assert _key(model, inputs, tier="full", revision=None) is None  # "main" is not pinned


def test_prune_drops_least_recently_used_first(tmp_path):
    cache = rc.ReferenceCache(tmp_path)
    outs = [{"y": torch.zeros(256)}]  # 1 KiB of fp32 each
    for i, key in enumerate(["aa" + "0" * 62, "bb" + "0" * 62, "cc" + "0" * 62]):
        assert cache.store(key, rc.CachedReference(outs, outs, {}, 1.0, None))
        os.utime(cache.path(key), (time.time() - 100 + i, time.time() - 100 + i))
    cache.load("aa" + "0" * 62)  # touched: now the most recent
    size = cache.path("aa" + "0" * 62).stat().st_size
    assert cache.prune(2 * size) == 1
    assert not cache.path("bb" + "0" * 62).exists()
    assert cache.path("aa" + "0" * 62).exists() and cache.path("cc" + "0" * 62).exists()


def test_model_processes_share_the_cache_named_by_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_REFERENCE_CACHE", str(tmp_path / "refs"))
    first = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=120))
    second = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=120))
    assert (first["details"]["reference_cache"], second["details"]["reference_cache"]) == ("stored", "hit")
    assert first["status"] == second["status"] == "pass"
    monkeypatch.setenv("ZOO_REFERENCE_CACHE", "off")
    assert (
        run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=120))["details"]["reference_cache"]
        == "off"
    )


@pytest.mark.parametrize("value", ["off", "0", ""])
def test_off_values_disable_the_cache(monkeypatch, value):
    monkeypatch.setenv("ZOO_REFERENCE_CACHE", value)
    assert rc.configured_dir() is None
