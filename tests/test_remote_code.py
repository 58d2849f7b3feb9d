"""Custom code, sandboxed (issue 30): a repo's own modeling files run only in the model process.

Custom-code repos, written here and served by the Hub stand-in through the real
``huggingface_hub`` client: one that validates, one whose modeling file tries to read a parent
secret, open a TCP connection to PostgreSQL's port and write outside its work directory (reporting
each attempt in the exception it raises), one that imports a package Zoo does not have, one over
the size limit, and two of an architecture transformers ported from such repos (Phi-3): one whose
config names transformers' own class, one naming its own.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import sys
import uuid

import pytest

from tests.hub_standin import start_standin

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the full sandbox needs root (CI runs as root)")

GOOD = "test-org/tiny-custom"
HOSTILE = "test-org/hostile-custom"
MISSING = "test-org/custom-needs-a-package"
HUGE = "test-org/custom-huge"
NATIVE = "test-org/custom-phi3"  # model_type phi3, architectures Phi3ForCausalLM, and its own code too
NATIVE_OWN_CLASS = "test-org/custom-phi3-own-class"  # model_type phi3, but architectures names its own class
# sentence-transformers repos of nomic_bert, nomic's own config keys agreeing with transformers' config;
# the second's modules.json names a module of its own code
NATIVE_ST = "test-org/custom-nomic-st"
NATIVE_ST_OWN_MODULE = "test-org/custom-nomic-st-own-module"
# what nomic's code reads, each as transformers' port builds it (nomic's own defaults differ: quirks.py)
NOMIC_CODE = {"activation_function": "swiglu", "rotary_emb_fraction": 1.0, "rotary_emb_base": 1000,
              "qkv_proj_bias": False, "mlp_fc1_bias": False, "mlp_fc2_bias": False,
              "layer_norm_epsilon": 1e-12}  # fmt: skip
NOMIC = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "vocab_size": 100, "hidden_size": 32,
         "n_embd": 32, "num_hidden_layers": 2, "n_layer": 2, "num_attention_heads": 4, "n_head": 4,
         "intermediate_size": 64, "n_inner": 64, **NOMIC_CODE}  # fmt: skip
V15 = {"model_type": "nomic_bert", "architectures": ["NomicBertModel"], "n_embd": 768, "n_layer": 12, "n_head": 12,
       "n_inner": 3072, **NOMIC_CODE}  # fmt: skip
ST_MODULES = [
    {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
    {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
]
PHI3 = {"model_type": "phi3", "vocab_size": 100, "hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 4, "num_hidden_layers": 2, "pad_token_id": 0}  # fmt: skip
MARK = "zoo-remote-code-secret"

CONFIGURATION = """
from transformers import PretrainedConfig


class ZooCustomConfig(PretrainedConfig):
    model_type = "zoo_custom"

    def __init__(self, vocab_size=100, hidden_size=32, num_hidden_layers=2, **kwargs):
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        self.num_hidden_layers = num_hidden_layers
        super().__init__(**kwargs)
"""

MODELING = """
import os

import torch
from torch import nn
from transformers import PreTrainedModel
from transformers.modeling_outputs import BaseModelOutput

from .configuration_zoo_custom import ZooCustomConfig

try:  # imported where it may write (any process but a sandboxed one): it leaves a mark
    with open({marker!r}, "a") as f:
        f.write(f"imported by pid {{os.getpid()}}\\n")
except OSError:
    pass


class ZooCustomModel(PreTrainedModel):
    config_class = ZooCustomConfig
    base_model_prefix = "zoo"

    def __init__(self, config):
        super().__init__(config)
        {hook}
        self.embed = nn.Embedding(config.vocab_size, config.hidden_size)
        size = config.hidden_size
        self.layers = nn.ModuleList(nn.Linear(size, size) for _ in range(config.num_hidden_layers))
        self.post_init()

    def forward(self, input_ids, attention_mask=None):
        h = self.embed(input_ids)
        for layer in self.layers:
            h = torch.tanh(layer(h))
        if attention_mask is not None:
            h = h * attention_mask[..., None].to(h.dtype)
        return BaseModelOutput(last_hidden_state=h)
"""

# What the hostile modeling file does when the model is built: each attempt is "blocked: ..." or
# "ESCAPED: ...", all raised in one exception (the row's error shows them).
HOSTILE_HOOK = """
        import json, socket

        def write_each(paths):  # every target tried: an escape through any one counts
            wrote, last = [], None
            for path in paths:
                try:
                    with open(path, "x") as f:
                        f.write("planted")
                    wrote.append(path)
                except OSError as exc:
                    last = exc
            if wrote or last is None:
                return f"wrote {{wrote}}"
            raise last

        found = {{}}
        secrets = sorted(k for k, v in os.environ.items() if {mark!r} in v)
        found["secret_env"] = f"ESCAPED: {{secrets}}" if secrets else "blocked: not in its environment"
        for key, attempt in (
            ("secret_file", lambda: open({secret!r}).read()),
            ("postgres_tcp", lambda: socket.create_connection(("127.0.0.1", 5432), timeout=3) and "connected"),
            ("write_outside", lambda: write_each({targets!r})),
        ):
            try:
                found[key] = f"ESCAPED: {{attempt()}}"
            except OSError as exc:
                found[key] = f"blocked: {{type(exc).__name__}}: {{exc}}"
        raise RuntimeError("ZOO-REMOTE<<" + json.dumps(found) + ">>")
"""


def _repo(folder, modeling: str, task: str = "feature-extraction", **over) -> None:
    folder.mkdir(parents=True)
    config = {
        "model_type": "zoo_custom",
        "architectures": ["ZooCustomModel"],
        "auto_map": {
            "AutoConfig": "configuration_zoo_custom.ZooCustomConfig",
            "AutoModel": "modeling_zoo_custom.ZooCustomModel",
        },
        "vocab_size": 100,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        **over,
    }
    (folder / "config.json").write_text(json.dumps(config))
    (folder / "configuration_zoo_custom.py").write_text(CONFIGURATION)
    (folder / "modeling_zoo_custom.py").write_text(modeling)
    (folder / "README.md").write_text(f"a custom-code repo written by {__name__} ({task})\n")


@pytest.fixture(scope="module")
def custom_hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("custom-hub")
    os.chmod(root, 0o755)
    marker = root / "imported-by"
    open_dir = root / "open"  # writable by anyone: only the sandbox keeps a model process out
    open_dir.mkdir(mode=0o777)
    os.chmod(open_dir, 0o777)
    secret = root / "secret.txt"
    secret.write_text(f"{MARK}-file")
    os.chmod(secret, 0o600)
    tag = uuid.uuid4().hex[:8]
    targets = [str(open_dir / f"planted-{tag}"), f"/tmp/zoo-remote-{tag}", str(root / f"planted-{tag}")]
    repos = root / "repos"
    _repo(repos / GOOD, MODELING.format(marker=str(marker), hook="pass"))
    hook = HOSTILE_HOOK.format(mark=MARK, secret=str(secret), targets=targets).strip()
    _repo(repos / HOSTILE, MODELING.format(marker=str(marker), hook=hook))
    _repo(
        repos / MISSING,
        MODELING.format(marker=str(marker), hook="pass").replace(
            "import torch\n", "import torch\nimport zoo_no_such_package_at_all\n", 1
        ),
    )
    _repo(repos / HUGE, MODELING.format(marker=str(marker), hook="pass") + "#" * (5 << 20) + "\n")
    good = MODELING.format(marker=str(marker), hook="pass")
    _repo(repos / NATIVE, good, architectures=["Phi3ForCausalLM"], **PHI3)
    _repo(repos / NATIVE_OWN_CLASS, good, **PHI3)
    for repo, modules in (
        (NATIVE_ST, ST_MODULES),
        (NATIVE_ST_OWN_MODULE, [*ST_MODULES[:1], {"idx": 1, "name": "1", "path": "", "type": "custom_st.Pooling"}]),
    ):
        _repo(repos / repo, good, **NOMIC)
        (repos / repo / "modules.json").write_text(json.dumps(modules))
    catalog = root / "catalog.csv"
    tags = "['transformers', 'safetensors', 'zoo_custom', 'feature-extraction', 'custom_code']"
    phi3 = "['transformers', 'safetensors', 'phi3', 'text-generation', 'custom_code']"
    nomic = "['sentence-transformers', 'safetensors', 'nomic_bert', 'feature-extraction', 'custom_code']"
    everyone = (GOOD, HOSTILE, MISSING, HUGE, NATIVE, NATIVE_OWN_CLASS, NATIVE_ST, NATIVE_ST_OWN_MODULE)
    with catalog.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        for i, repo in enumerate(everyone):
            native = repo in (NATIVE, NATIVE_OWN_CLASS)
            st = repo in (NATIVE_ST, NATIVE_ST_OWN_MODULE)
            w.writerow(
                [
                    repo,
                    1000 - i,
                    "text-generation" if native else "feature-extraction",
                    "",
                    phi3 if native else nomic if st else tags,
                ]
            )
    base, stop = start_standin(str(catalog), {r: str(repos / r) for r in everyone})
    yield {"base": base, "repos": repos, "marker": marker, "targets": targets, "root": root, "hub": stop.hub}
    stop()


def _validate(zoo, hub, tmp_path, model_id: str, *extra: str, tier: str = "tiny", **env: str):
    out = zoo(
        ["validate", model_id, "--backend", "cpu", "--tier", tier, "--json", *extra],
        HF_ENDPOINT=hub["base"],
        HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(tmp_path / "hf"),
        **env,
    )
    assert out.stdout.strip(), out.stderr[-3000:]
    return json.loads(out.stdout)


def test_custom_code_is_refused_by_default_and_says_how(zoo, custom_hub, tmp_path):
    row = _validate(zoo, custom_hub, tmp_path, GOOD)
    assert (row["status"], row["reason"]) == ("unsupported", "remote_code")
    assert "ZOO_REMOTE_CODE=sandboxed" in row["error"]["message"]
    assert not (tmp_path / "hf").exists() or not list((tmp_path / "hf").rglob("*.py"))  # its code never fetched
    assert not custom_hub["marker"].exists()


@needs_root
@pytest.mark.parametrize("tier", ["tiny", "census"])
def test_custom_code_validates_in_the_sandbox_with_its_hashes(zoo, custom_hub, tmp_path, tier):
    row = _validate(zoo, custom_hub, tmp_path, GOOD, "--remote-code", "sandboxed", tier=tier)
    assert row["status"] == "pass", (row["status"], row["error"])
    assert row["architecture"] == "ZooCustomModel"
    folder = custom_hub["repos"] / GOOD
    assert row["details"]["remote_code"] == {
        name: hashlib.sha256((folder / name).read_bytes()).hexdigest()
        for name in ("configuration_zoo_custom.py", "modeling_zoo_custom.py")
    }
    assert row["details"]["sandbox"]["missing"] == [] and row["details"]["sandbox"]["netns"]
    assert "--remote-code sandboxed" in row["repro"]
    # the code ran in the model process only, which could not leave its mark; the parent never imported it
    assert not custom_hub["marker"].exists()
    # the environment variable says the same as the flag
    again = _validate(zoo, custom_hub, tmp_path, GOOD, tier=tier, ZOO_REMOTE_CODE="sandboxed")
    assert again["status"] == "pass" and again["fingerprint"] == row["fingerprint"]


def test_a_ported_architecture_runs_on_transformers_own_classes_when_its_code_may_not_run(zoo, custom_hub, tmp_path):
    """Under never, a custom-code repo whose model_type transformers ported (the quirks table says
    so) and whose config names transformers' own class is validated on that class, as
    from_pretrained without trust_remote_code loads it: its code is never fetched, and the row says
    why. Naming a class of its own, it is refused as before."""
    row = _validate(zoo, custom_hub, tmp_path, NATIVE)
    assert row["status"] == "pass", (row["status"], row["error"])
    assert row["architecture"] == "Phi3ForCausalLM"
    note = row["details"]["custom_code_native"]
    assert "not run" in note and "phi3" in note and "trust_remote_code" in note
    assert "remote_code" not in row["details"] and "--remote-code" not in row["repro"]
    assert not (tmp_path / "hf").exists() or not list((tmp_path / "hf").rglob("*.py"))  # its code never fetched
    assert not custom_hub["hub"].sent.get((NATIVE, "modeling_zoo_custom.py"))
    assert not custom_hub["marker"].exists()
    own = _validate(zoo, custom_hub, tmp_path, NATIVE_OWN_CLASS)
    assert (own["status"], own["reason"]) == ("unsupported", "remote_code"), own["error"]
    assert "custom_code_native" not in own["details"]


def test_a_ported_sentence_transformers_repo_runs_natively_unless_a_module_is_its_own(zoo, custom_hub, tmp_path):
    """A sentence-transformers repo of a ported model_type (nomic_bert) runs on transformers' own
    classes with its pooling, its code never fetched; one whose modules.json names a module of its
    own code is refused, as that module would not run."""
    row = _validate(zoo, custom_hub, tmp_path, NATIVE_ST)
    assert row["status"] == "pass", (row["status"], row["error"])
    assert (row["library"], row["architecture"]) == ("sentence-transformers", "NomicBertModel")
    assert "nomic_bert" in row["details"]["custom_code_native"]
    assert not custom_hub["hub"].sent.get((NATIVE_ST, "modeling_zoo_custom.py"))
    own = _validate(zoo, custom_hub, tmp_path, NATIVE_ST_OWN_MODULE)
    assert (own["status"], own["reason"]) == ("unsupported", "remote_code"), own["error"]
    assert not custom_hub["marker"].exists()


@pytest.mark.parametrize(
    "config, native",
    [
        (V15, True),  # nomic-embed-text-v1.5's sizes and options: transformers' defaults
        ({**V15, "n_embd": 1024}, False),  # a size the port's config would not build
        ({**V15, "n_embd": 1024, "hidden_size": 1024}, True),  # ... unless its own key says the same
        ({k: v for k, v in V15.items() if k != "n_inner"}, False),  # nomic's code: 4 x n_embd; unsaid, refused
        ({**V15, "rotary_emb_base": 10000}, False),
        ({**V15, "num_experts": 8, "moe_every_n_layers": 2}, False),  # v2-moe: experts the port lacks
        ({**V15, "rotary_emb_fraction": 0.5}, False),
        ({k: v for k, v in V15.items() if k != "rotary_emb_fraction"}, False),  # nomic's default: no rotary
        ({k: v for k, v in V15.items() if k != "qkv_proj_bias"}, False),  # nomic's default: biases; the port has none
        ({**V15, "rotary_scaling_factor": 2.0}, False),
        ({"model_type": "nomic_bert", "architectures": ["NomicBertModel"]}, False),  # nothing said: nomic's defaults
        ({"model_type": "nomic_bert", "architectures": ["NomicVisionModel"]}, False),  # not transformers' class
        ({"model_type": "phi3", "architectures": ["Phi3ForCausalLM"]}, True),
        ({"model_type": "phi3", "architectures": ["LlamaForCausalLM"]}, False),  # another model_type's class
        ({"model_type": "phi3", "architectures": ["Phi3Config"]}, False),  # not a model class
        ({"model_type": "phi3", "architectures": "Phi3ForCausalLM"}, False),
        ({"model_type": "zoo_custom", "architectures": ["ZooCustomModel"]}, False),  # not ported
        ({"model_type": "bert", "architectures": ["BertModel"]}, False),  # known, but not in the quirks table
    ],
)
def test_only_classes_transformers_maps_to_a_ported_model_type_stand_for_its_code(config, native):
    from zoo_runner.remote_code import native_classes

    assert bool(native_classes(config)) is native


@needs_root
def test_a_ported_architecture_runs_its_own_code_when_sandboxed(zoo, custom_hub, tmp_path):
    """Under sandboxed, as trust_remote_code=True does, the repo's code runs, not transformers' port."""
    row = _validate(zoo, custom_hub, tmp_path, NATIVE, "--remote-code", "sandboxed")
    assert row["status"] == "pass", (row["status"], row["error"])
    assert row["architecture"] == "ZooCustomModel" and "custom_code_native" not in row["details"]
    assert set(row["details"]["remote_code"]) == {"configuration_zoo_custom.py", "modeling_zoo_custom.py"}


@needs_root
def test_hostile_custom_code_achieves_nothing_and_is_still_a_row(zoo, custom_hub, tmp_path):
    row = _validate(
        zoo, custom_hub, tmp_path, HOSTILE, "--remote-code", "sandboxed", HF_TOKEN=f"hf_{MARK}", ZOO_API_KEYS=MARK
    )
    assert row["model_id"] == HOSTILE and row["status"] == "reference_error", (row["status"], row["error"])
    m = re.search(r"ZOO-REMOTE<<(.*?)>>", row["error"]["message"], re.S)
    assert m, row["error"]["message"][:2000]
    found = json.loads(m.group(1))
    assert set(found) == {"secret_env", "secret_file", "postgres_tcp", "write_outside"}
    escaped = {k: v for k, v in found.items() if not v.startswith("blocked")}
    assert not escaped, escaped
    assert not [p for p in custom_hub["targets"] if os.path.exists(p)]
    assert MARK not in json.dumps({k: v for k, v in row.items() if k != "error"})
    assert not custom_hub["marker"].exists()


@needs_root
def test_code_that_imports_a_missing_package_is_unsupported_naming_it(zoo, custom_hub, tmp_path):
    row = _validate(zoo, custom_hub, tmp_path, MISSING, "--remote-code", "sandboxed")
    assert (row["status"], row["reason"]) == ("unsupported", "missing_dependency"), row["error"]
    assert "zoo_no_such_package_at_all" in row["error"]["message"]


def test_the_parent_fetches_and_hashes_but_never_imports(custom_hub, tmp_path, monkeypatch):
    """hub.prepare and the parent's fingerprint read the code as bytes and text only."""
    from zoo_runner import hub, planning, remote_code
    from zoo_runner.request import ValidationRequest

    monkeypatch.setenv("HF_ENDPOINT", custom_hub["base"])
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("ZOO_REMOTE_CODE", "sandboxed")
    monkeypatch.setattr(remote_code, "sandbox_gaps", lambda: None)  # the policy is tested above, as root
    import huggingface_hub.constants as hc

    base = custom_hub["base"]
    monkeypatch.setattr(hc, "ENDPOINT", base)  # read when huggingface_hub was first imported
    monkeypatch.setattr(hc, "HUGGINGFACE_CO_URL_TEMPLATE", base + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setattr(hc, "HF_HUB_OFFLINE", False)
    before = set(sys.modules)
    req = hub.prepare(ValidationRequest(GOOD, backend="cpu"))
    assert set(req.remote_code) == {"configuration_zoo_custom.py", "modeling_zoo_custom.py"}
    # the model process is shown exactly the hashed files and config.json, read-only, nothing else of the repo
    assert sorted(os.listdir(req.files_dir)) == ["config.json", "configuration_zoo_custom.py", "modeling_zoo_custom.py"]
    assert all(not os.stat(os.path.join(req.files_dir, n)).st_mode & 0o222 for n in os.listdir(req.files_dir))
    assert planning.plan_fingerprint(req) == remote_code.fingerprint(req)
    assert not [m for m in set(sys.modules) - before if "zoo_custom" in m or m.startswith("transformers_modules")]
    assert not custom_hub["marker"].exists()
    with pytest.raises(RuntimeError, match="only in a model process"):
        remote_code.load_class("modeling_zoo_custom.ZooCustomModel", req.files_dir)


@needs_root
def test_code_over_the_limit_is_refused_before_a_byte_of_it_is_fetched(zoo, custom_hub, tmp_path):
    row = _validate(zoo, custom_hub, tmp_path, HUGE, "--remote-code", "sandboxed")
    assert (row["status"], row["reason"]) == ("unsupported", "remote_code") and "MiB of code" in row["error"]["message"]
    assert not custom_hub["hub"].sent.get((HUGE, "modeling_zoo_custom.py"))


def test_code_files_are_names_inside_the_repo():
    from zoo_runner.remote_code import code_files

    listed = ["modeling_x.py", "sub/configuration_x.py", "../evil.py", "/etc/evil.py", "a/../b.py", ".hidden/x.py",
              "x/.y.py", "README.md", "a\\b.py"]  # fmt: skip
    assert code_files(listed) == ["modeling_x.py", "sub/configuration_x.py"]


def test_custom_code_runs_as_under_strict_whatever_the_mode(monkeypatch):
    """The parent refuses custom code where the sandbox lacks a protection; should the run find one
    missing anyway, it refuses there too, under best_effort as under strict, and never runs it off."""
    from zoo_runner import remote_code, sandbox
    from zoo_runner.exceptions import SandboxUnavailable
    from zoo_runner.launcher import run_isolated
    from zoo_runner.request import ValidationRequest

    lacking = {"root": True, "missing": ["netns"], "errors": {"namespaces": "unshare: Operation not permitted"}}
    monkeypatch.setattr(sandbox, "capabilities", lambda *a: lacking)
    monkeypatch.setenv("ZOO_SANDBOX", "best_effort")
    assert "netns" in remote_code.sandbox_gaps()
    req = ValidationRequest("arch:BertModel", backend="cpu", timeout_s=60, remote_code={"m.py": "0" * 64})
    with pytest.raises(SandboxUnavailable, match="custom code: this machine cannot give model processes netns"):
        run_isolated(req)
    monkeypatch.setenv("ZOO_SANDBOX", "off")
    assert remote_code.sandbox_gaps() == "ZOO_SANDBOX=off"
    with pytest.raises(SandboxUnavailable, match="never runs with ZOO_SANDBOX=off"):
        run_isolated(req)


def test_remote_code_with_a_broker_is_the_workers_to_decide(zoo):
    out = zoo(
        ["run", "--top", "1", "--backend", "cpu", "--remote-code", "sandboxed"], ZOO_BROKER_URL="redis://127.0.0.1:1/0"
    )
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert "workers" in out.stderr and "ZOO_REMOTE_CODE" in out.stderr


@pytest.mark.parametrize(
    "modules, standard",
    [
        (ST_MODULES, True),
        ([], True),  # no modules.json: sentence-transformers' defaults
        ([{**ST_MODULES[0], "path": "encoder"}, ST_MODULES[1]], False),  # its transformer's config is elsewhere
        ([ST_MODULES[0], {**ST_MODULES[1], "type": "custom_st.Pooling"}], False),
        ({"0": ST_MODULES[0]}, False),
    ],
)
def test_a_sentence_transformers_repo_is_native_only_with_its_own_modules_at_the_root(modules, standard):
    from zoo_runner.remote_code import standard_st_modules

    assert standard_st_modules(modules) is standard
