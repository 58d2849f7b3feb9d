"""GGUF repos at tier tiny: the config transformers maps from one file's header, read over HTTP ranges
through the real huggingface_hub client against the stand-in; never the whole file."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from tests.hub_standin import start_standin
from zoo_runner.gguf_header import Incomplete, header_length

gguf = pytest.importorskip("gguf")

REPO = "test-org/tiny-llama-GGUF"
FILE = "tiny-llama.Q8_0.gguf"


def _write_gguf(path, arch: str = "llama", weights_mb: int = 48, vocab: int = 32000) -> None:
    """A llama-architecture GGUF file written with the gguf package: small dims, a 32k vocabulary, and
    ``weights_mb`` MiB of tensor data behind the header (what a range read must not fetch)."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_context_length(512)
    w.add_embedding_length(256)
    w.add_block_count(4)
    w.add_feed_forward_length(512)
    w.add_head_count(8)
    w.add_head_count_kv(4)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    tokens = [f"tok{i}" for i in range(vocab)]
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * len(tokens))
    w.add_token_types([1] * len(tokens))
    w.add_tensor("token_embd.weight", np.zeros(((weights_mb << 20) // 4 // 256, 256), dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def _write_complete_gguf(path) -> int:
    """A whole tiny llama (2 layers, 64 wide, a 256-token vocabulary) with its matrices quantised to
    Q8_0, as GGUF repos ship them; returns how many weights it holds."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    vocab, hidden, layers, heads, kv, ffn = 256, 64, 2, 4, 2, 128
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_context_length(128)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"tok{i}" for i in range(vocab)])
    w.add_token_scores([0.0] * vocab)
    w.add_token_types([1] * vocab)
    rng = np.random.default_rng(0)
    shapes = {"token_embd.weight": (vocab, hidden), "output_norm.weight": (hidden,), "output.weight": (vocab, hidden)}
    kv_width = kv * hidden // heads
    for i in range(layers):
        block = {"attn_norm": (hidden,), "attn_q": (hidden, hidden), "attn_k": (kv_width, hidden),
                 "attn_v": (kv_width, hidden), "attn_output": (hidden, hidden), "ffn_norm": (hidden,),
                 "ffn_gate": (ffn, hidden), "ffn_up": (ffn, hidden), "ffn_down": (hidden, ffn)}  # fmt: skip
        shapes.update({f"blk.{i}.{name}.weight": shape for name, shape in block.items()})
    for name, shape in shapes.items():
        a = (rng.standard_normal(shape) * 0.02).astype(np.float32)
        if a.ndim == 2:
            w.add_tensor(name, quantize(a, GGMLQuantizationType.Q8_0), raw_dtype=GGMLQuantizationType.Q8_0)
        else:
            w.add_tensor(name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return sum(int(np.prod(shape)) for shape in shapes.values())


def _validate(zoo, base: str, tmp_path, model_id: str, tier: str, *extra: str):
    """`zoo validate MODEL --backend cpu --tier TIER --json` through the stand-in at ``base``."""
    return zoo(
        ["validate", model_id, "--backend", "cpu", "--tier", tier, "--json", *extra],
        HF_ENDPOINT=base,
        HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(tmp_path / "hf"),
    )


def _write_hostile_gguf(path, strings: int) -> None:
    """A GGUF header under the 64 MiB cap that declares one array of ``strings`` empty strings."""
    import struct

    key = b"tokenizer.ggml.tokens"
    with open(path, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", len(key)) + key)
        f.write(struct.pack("<IIQ", 9, 8, strings))  # an array of strings, each a u64 length of 0
        f.truncate(f.tell() + 8 * strings)


@pytest.fixture(scope="module")
def gguf_hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf-hub")
    folder = root / "repos" / REPO
    folder.mkdir(parents=True)
    _write_gguf(folder / FILE)
    (folder / "README.md").write_text("a GGUF-only repo\n")
    big = root / "repos" / "test-org/big-vocab-GGUF"  # a header over the first 1 MiB read: read on, 4x more
    big.mkdir(parents=True)
    _write_gguf(big / "big.gguf", weights_mb=16, vocab=150_000)
    whole = root / "repos" / "test-org/whole-tiny-llama-GGUF"  # every tensor: the full tier loads it
    whole.mkdir(parents=True)
    _write_complete_gguf(whole / "whole-tiny-llama.Q8_0.gguf")
    other = root / "repos" / "test-org/tiny-unmappable-GGUF"
    other.mkdir(parents=True)
    _write_gguf(other / "x.gguf", arch="zoo-no-such-arch", weights_mb=1)
    padded = root / "repos" / "test-org/padded-tiny-llama-GGUF"  # its header declares far less than its size
    padded.mkdir(parents=True)
    _write_complete_gguf(padded / "padded.gguf")
    with open(padded / "padded.gguf", "r+b") as f:
        f.truncate(f.seek(0, 2) + (64 << 20))
    hostile = root / "repos" / "test-org/millions-of-strings-GGUF"  # 7.3 M empty token strings: 58 MB of header
    hostile.mkdir(parents=True)
    _write_hostile_gguf(hostile / "h.gguf", 7_300_000)
    catalog = root / "catalog.csv"
    with catalog.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        w.writerow([REPO, 1000, "text-generation", "", "['gguf', 'text-generation', 'llama']"])
        w.writerow(["test-org/tiny-unmappable-GGUF", 10, "text-generation", "", "['gguf', 'text-generation']"])
        w.writerow(["test-org/big-vocab-GGUF", 5, "text-generation", "", "['gguf', 'text-generation']"])
        w.writerow(["test-org/whole-tiny-llama-GGUF", 4, "text-generation", "", "['gguf', 'text-generation']"])
        w.writerow(["test-org/millions-of-strings-GGUF", 3, "text-generation", "", "['gguf', 'text-generation']"])
        w.writerow(["test-org/padded-tiny-llama-GGUF", 2, "text-generation", "", "['gguf', 'text-generation']"])
    repos = {REPO: str(folder), "test-org/tiny-unmappable-GGUF": str(other), "test-org/big-vocab-GGUF": str(big),
             "test-org/whole-tiny-llama-GGUF": str(whole),
             "test-org/millions-of-strings-GGUF": str(hostile),
             "test-org/padded-tiny-llama-GGUF": str(padded)}  # fmt: skip
    base, stop = start_standin(str(catalog), repos)
    yield base, stop.hub, (folder / FILE).stat().st_size
    stop()


def test_the_header_parser_knows_where_the_header_ends(tmp_path):
    path = tmp_path / "m.gguf"
    _write_gguf(path, weights_mb=1)
    data = path.read_bytes()
    end = header_length(data)
    assert 32000 * 8 < end < len(data) - (1 << 20) + 4096  # the vocabulary is in it; the weights are not
    with pytest.raises(Incomplete):
        header_length(data[: end // 2])
    with pytest.raises(ValueError, match="GGUF magic"):
        header_length(b"PK\x03\x04" + data[4:])


def test_a_gguf_repo_validates_at_tier_tiny_from_a_range_read(zoo, gguf_hub, tmp_path):
    base, served, size = gguf_hub
    proc = _validate(zoo, base, tmp_path, REPO, "tiny")
    assert proc.returncode == 0, proc.stderr[-3000:]
    row = json.loads(proc.stdout)
    assert row["status"] == "pass" and row["architecture"] == "LlamaForCausalLM", row
    fetched = served.sent[(REPO, FILE)]
    assert size > 48 << 20 and fetched <= 1 << 20, (fetched, size)  # the header only: 1 MiB of a 48 MiB file
    assert row["details"]["config_source"].startswith(f"gguf:{REPO}/{FILE}@")
    assert f"of {size:,} bytes" in row["details"]["config_source"]
    assert row["details"]["parameters"] < 20_000_000  # built from the mapped config, shrunk for tier tiny


def test_a_header_longer_than_the_first_read_is_read_on(zoo, gguf_hub, tmp_path):
    base, served, _ = gguf_hub
    proc = _validate(zoo, base, tmp_path, "test-org/big-vocab-GGUF", "tiny")
    row = json.loads(proc.stdout)
    assert row["status"] == "pass", row
    fetched = served.sent[("test-org/big-vocab-GGUF", "big.gguf")]
    assert (1 << 20) < fetched <= (1 << 20) + (4 << 20), fetched  # 1 MiB, then 4 MiB: not the 16 MiB of weights


def test_an_architecture_transformers_cannot_map_is_unsupported(zoo, gguf_hub, tmp_path):
    base, _, _ = gguf_hub
    proc = _validate(zoo, base, tmp_path, "test-org/tiny-unmappable-GGUF", "tiny")
    row = json.loads(proc.stdout)
    assert (row["status"], row["reason"]) == ("unsupported", "library_unsupported"), row
    assert "zoo-no-such-arch" in row["error"]["message"]


def test_the_full_tier_dequantises_a_gguf_file_that_fits_the_budget(zoo, gguf_hub, tmp_path):
    base, served, _ = gguf_hub
    repo, name = "test-org/whole-tiny-llama-GGUF", "whole-tiny-llama.Q8_0.gguf"
    proc = _validate(zoo, base, tmp_path, repo, "full")
    row = json.loads(proc.stdout)
    assert row["status"] == "pass" and row["architecture"] == "LlamaForCausalLM", (row["status"], row["error"])
    assert row["details"]["parameters"] == _write_complete_gguf(tmp_path / "again.gguf")  # every weight, loaded
    assert row["details"]["config_source"].startswith(f"gguf:{repo}/{name}@")
    # a file whose weights, in float32, would not fit: too_large, from the header alone (nothing else fetched)
    before = served.sent.get((REPO, FILE), 0)
    proc = _validate(zoo, base, tmp_path, REPO, "full", "--memory-gb", "0.1")
    row = json.loads(proc.stdout)
    assert (row["status"], row["reason"]) == ("unsupported", "too_large"), row["error"]
    assert "dequantised to float32" in row["error"]["message"] and "0.1 GiB memory budget" in row["error"]["message"]
    assert served.sent[(REPO, FILE)] - before <= 1 << 20  # its header: 1 MiB of 48
    # a file 64 MiB larger than its header's tensors: what the header declares caps the download
    proc = _validate(zoo, base, tmp_path, "test-org/padded-tiny-llama-GGUF", "full")
    row = json.loads(proc.stdout)
    assert (row["status"], row["reason"]) == ("unsupported", "too_large"), row["error"]
    assert "declares tensors ending at byte" in row["error"]["message"]
    assert served.sent[("test-org/padded-tiny-llama-GGUF", "padded.gguf")] <= 1 << 20  # the header only


def test_the_standin_names_a_quantisation_repos_architecture_from_its_base_model(tmp_path):
    """Quantisation repos rarely carry a model-type tag (and some carry a wrong one); the stand-in's
    synthetic header then takes the architecture from the base model's row, else from its base's name,
    else from its own tag or name, else writes none. A repo tagged `pytorch`, `safetensors` or
    `transformers` by its card still serves its GGUF file only, with no config.json; a custom-code repo
    that also publishes a GGUF file keeps its config.json and safetensors."""
    from huggingface_hub import HfApi, hf_hub_download
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    catalog = tmp_path / "catalog.csv"
    rows = [
        ("org/base-model", "['transformers', 'safetensors', 'qwen2', 'text-generation']"),
        ("q/base-model-GGUF", "['gguf', 'text-generation', 'base_model:quantized:org/base-model']"),
        ("q/Qwen2.5-7B-GGUF", "['gguf', 'mistral', 'base_model:quantized:Qwen/Qwen2.5-7B-Instruct']"),
        ("q/Meta-Llama-3.1-8B-Instruct-GGUF", "['gguf', 'pytorch', 'base_model:quantized:meta-llama/not-in-it']"),
        ("q/gemma-3-27b-it-GGUF", "['gguf', 'text-generation']"),
        ("q/gemma-2b-it-GGUF", "['gguf', 'text-generation']"),
        ("q/Qwen2-VL-7B-GGUF", "['gguf', 'text-generation']"),
        ("q/firefunction-v2-GGUF", "['transformers', 'gguf', 'safetensors', 'base_model:quantized:f/llama-3-ff-v2']"),
        ("q/FLUX.1-dev-gguf", "['gguf', 'text-to-image', 'base_model:quantized:black-forest-labs/FLUX.1-dev']"),
        ("q/Phi-3.5-mini-instruct-GGUF", "['gguf', 'mistral', 'base_model:quantized:microsoft/Phi-3.5-mini-instruct']"),
        ("c/custom-vlm", "['transformers', 'gguf', 'safetensors', 'custom_code']"),
    ]
    with catalog.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        for i, (repo, tags) in enumerate(rows):
            w.writerow([repo, 100 - i, "text-generation", "", tags])
    base, stop = start_standin(str(catalog))
    try:
        api = HfApi(endpoint=base)
        custom = api.list_repo_files("c/custom-vlm")
        assert "config.json" in custom and "model.safetensors" in custom, custom
        got = {}
        for repo, _ in rows[1:-1]:
            listing = api.list_repo_files(repo)
            files = [f for f in listing if f.endswith((".gguf", ".bin", ".safetensors"))]
            assert len(files) == 1 and files[0].endswith(".gguf") and "config.json" not in listing, (repo, listing)
            path = hf_hub_download(repo, files[0], cache_dir=tmp_path / "hf", endpoint=base)
            data = open(path, "rb").read()
            if len(data) <= 4:
                got[repo] = None
                continue
            field = gguf.GGUFReader(path).fields["general.architecture"]
            got[repo] = bytes(field.parts[field.data[0]]).decode()
            if got[repo] == "phi3":
                phi3 = load_gguf_checkpoint(path, return_tensors=False)["config"]
    finally:
        stop()
    assert got == {
        "q/base-model-GGUF": "qwen2",  # the base model's row
        "q/Qwen2.5-7B-GGUF": "qwen2",  # the base's name, over the card's wrong `mistral` tag
        "q/Meta-Llama-3.1-8B-Instruct-GGUF": "llama",  # its own name (the base's says nothing)
        "q/gemma-3-27b-it-GGUF": "gemma3",  # its own name
        "q/gemma-2b-it-GGUF": None,  # Gemma 1 at 2B is not Gemma 2: no family, no header
        "q/Qwen2-VL-7B-GGUF": None,  # a vision model of the family: another architecture
        "q/firefunction-v2-GGUF": "llama",  # the base's name; a card's transformers/safetensors tags
        "q/FLUX.1-dev-gguf": None,  # not a language model: no header, as before
        "q/Phi-3.5-mini-instruct-GGUF": "phi3",  # the base's name, over the card's wrong `mistral` tag
    }
    # as llama.cpp writes Phi-3: 32064 tokens, <|endoftext|> for padding; transformers maps both, and
    # Phi3Config's default padding (32000) fits the vocabulary (a 32000-token file could not be built)
    assert (phi3["vocab_size"], phi3["pad_token_id"]) == (32064, 32000), phi3


def test_a_header_of_millions_of_tiny_strings_is_refused_in_seconds_and_little_memory(gguf_hub):
    """7.3 M empty token strings (58 MB, under the 64 MiB header cap) once took the root parent 268 s
    and 11.8 GB in transformers' parser: now the array's declared count refuses it before anything is
    allocated for it. Measured in a fresh interpreter (its peak RSS, before and after)."""
    import subprocess
    import sys

    base, served, _ = gguf_hub
    code = (
        "import resource, time, json\n"
        "from zoo_runner.gguf_header import read_header\n"
        "from zoo_runner.exceptions import NotSupported\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "t0 = time.perf_counter()\n"
        "try:\n"
        "    read_header('test-org/millions-of-strings-GGUF', None, 'h.gguf'); why = None\n"
        "except NotSupported as exc:\n"
        "    why = str(exc)\n"
        "print(json.dumps({'s': time.perf_counter() - t0, 'grew_mb': "
        "(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024, 'why': why}))\n"
    )
    env = {**os.environ, "HF_ENDPOINT": base, "HF_HUB_OFFLINE": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["why"] and "7,300,000 entries" in out["why"], out
    assert out["s"] < 5 and out["grew_mb"] < 512, out
    assert served.sent[("test-org/millions-of-strings-GGUF", "h.gguf")] <= 1 << 20  # the first read only
