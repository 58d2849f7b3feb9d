"""``xla`` and ``xla+openxla`` (zoo_runner/plugins/xla.py): registration, install hint, precision,
the fallback counters, and real runs on PyTorch/XLA's CPU client.

The first tests are pure Python and run everywhere (torch_xla hidden or stubbed). The rest need
torch_xla, which requires torch==2.9.0 and so lives in a venv of its own
(``ZOO_VENV=.venv-xla bash scripts/setup.sh dev xla``); they skip without it. The real fallback is
FNet's: its token mixing is two FFTs, and torch_xla lowers no FFT (``aten::_fft_c2c`` runs on CPU).
"""

from __future__ import annotations

import json
import sys
import types

import pytest

from tests.conftest import ROOT, fresh_python
from zoo_runner import backends
from zoo_runner.backends import BackendSpec, check_backend, declared_precision
from zoo_runner.exceptions import BackendUnavailable, UnknownBackend
from zoo_runner.plugins import xla as xla_plugin
from zoo_runner.precision import resolve
from zoo_runner.request import ValidationRequest
from zoo_runner.result import empty_result

XLA = BackendSpec.parse("xla")
OPENXLA = BackendSpec.parse("xla+openxla")
HINT = "ZOO_VENV=.venv-xla bash scripts/setup.sh xla (torch-xla 2.9.0 needs torch==2.9.0: a venv of its own)"
MISSING = f"backend xla is not available here: package torch_xla is not installed (ModuleNotFoundError): {HINT}"


class StubMetrics:
    """torch_xla.debug.metrics as far as the tracker reads it: counters by name."""

    def __init__(self, counters: dict[str, int]) -> None:
        self.counters = dict(counters)
        self.cleared = 0

    def counter_names(self) -> list[str]:
        return [name for name, value in self.counters.items() if value]

    def counter_value(self, name: str) -> int:
        return self.counters.get(name, 0)

    def clear_counters(self) -> None:
        self.cleared += 1
        self.counters = {name: 0 for name in self.counters}


# -- everywhere ---------------------------------------------------------------------------------


def test_naming_the_backends_imports_the_plugin_but_not_torch_xla():
    code = (
        "import os, sys; os.environ.pop('PJRT_DEVICE', None); from zoo_runner import backends as b; "
        "spec = b.BackendSpec.parse('xla+openxla'); assert (spec.device, spec.compiler) == ('xla', 'openxla'); "
        "assert 'zoo_runner.plugins.xla' not in sys.modules; "
        "d = b.device_plugin('xla'); c = b.compiler_plugin('openxla'); assert 'zoo_runner.plugins.xla' in sys.modules; "
        "assert 'torch_xla' not in sys.modules and 'torch' not in sys.modules, 'registering imports nothing heavy'; "
        "print(d.device, d.package, d.package_dist, c.name, c.package_dist, os.environ['PJRT_DEVICE'])"
    )
    assert fresh_python(code).split() == ["xla", "torch_xla", "torch-xla", "openxla", "torch-xla", "CPU"]


@pytest.mark.parametrize("spec", [XLA, OPENXLA])
def test_missing_torch_xla_is_one_line_with_the_install_hint(monkeypatch, spec):
    monkeypatch.setitem(sys.modules, "torch_xla", None)
    with pytest.raises(BackendUnavailable) as info:
        check_backend(spec)
    assert str(info.value) == MISSING


def test_openxla_is_only_for_the_xla_device():
    with pytest.raises(
        UnknownBackend, match=r"^backend cpu\+openxla: openxla compiles for the xla device: use xla\+openxla$"
    ):
        check_backend(BackendSpec.parse("cpu+openxla"))


def test_the_cli_says_so_without_a_traceback(zoo, tmp_path):
    hidden = tmp_path / "hide"
    (hidden / "torch_xla").mkdir(parents=True)
    (hidden / "torch_xla" / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch_xla'\", name='torch_xla')\n"
    )
    out = zoo(
        ["validate", "arch:BertModel", "--backend", "xla", "--tier", "tiny", "--json"], PYTHONPATH=f"{hidden}:{ROOT}"
    )
    assert out.returncode == 2, out.stderr
    assert out.stdout == "" and "Traceback" not in out.stderr
    assert out.stderr.strip().splitlines() == [f"zoo: error: {MISSING}"]


def test_pjrt_device_defaults_to_cpu_only_where_nothing_else_is_configured(monkeypatch):
    env: dict[str, str] = {}
    assert xla_plugin.default_pjrt_device(env) == "CPU" and env == {"PJRT_DEVICE": "CPU"}
    env = {"PJRT_DEVICE": "TPU"}
    assert xla_plugin.default_pjrt_device(env) is None and env == {"PJRT_DEVICE": "TPU"}
    real = xla_plugin.importlib.util.find_spec
    monkeypatch.setattr(
        xla_plugin.importlib.util, "find_spec", lambda name: object() if name == "libtpu" else real(name)
    )
    env = {}
    assert xla_plugin.default_pjrt_device(env) is None and env == {}  # torch_xla looks for the TPU itself


@pytest.mark.parametrize(
    "env, mat_mul, declared",
    [
        ({"PJRT_DEVICE": "CPU"}, None, "fp32"),
        ({}, None, "fp32"),
        ({"PJRT_DEVICE": "CPU", "XLA_USE_BF16": "1"}, None, "bf16"),
        ({"PJRT_DEVICE": "CPU", "XLA_DOWNCAST_BF16": "true"}, None, "bf16"),
        ({"PJRT_DEVICE": "CPU", "XLA_USE_BF16": "0"}, None, "fp32"),
        ({"PJRT_DEVICE": "TPU"}, "default", "bf16"),
        ({"PJRT_DEVICE": "TPU"}, "high", "tf32"),
        ({"PJRT_DEVICE": "TPU"}, "highest", "fp32"),
        ({"PJRT_DEVICE": "CUDA"}, "default", "tf32"),
        ({"PJRT_DEVICE": "CUDA"}, "highest", "fp32"),
        ({"PJRT_DEVICE": "NEURON"}, None, None),
    ],
)
def test_the_declared_precision(env, mat_mul, declared):
    assert xla_plugin.xla_precision(XLA, environ=env, mat_mul=(lambda: mat_mul) if mat_mul else None) == declared


def test_xla_on_cpu_is_judged_at_fp32_by_the_plugin(monkeypatch):
    monkeypatch.setenv("PJRT_DEVICE", "CPU")
    monkeypatch.delenv("XLA_USE_BF16", raising=False)
    monkeypatch.delenv("XLA_DOWNCAST_BF16", raising=False)
    assert declared_precision(XLA) == declared_precision(OPENXLA) == "fp32"
    assert resolve("auto", OPENXLA) == ("fp32", "plugin")
    monkeypatch.setenv("XLA_USE_BF16", "1")
    assert resolve("auto", XLA) == ("bf16", "plugin")
    assert resolve("fp32", XLA) == ("fp32", "flag")


@pytest.mark.parametrize(
    "counter, name",
    [
        ("aten::_fft_c2c", "aten::_fft_c2c"),
        ("aten::searchsorted.Tensor", "aten::searchsorted"),
        ("aten::special_zeta", "aten::special_zeta"),
        ("xla::mm", None),
        ("MarkStep", None),
        ("CachedCompile", None),
    ],
)
def test_counter_names_become_aten_op_names(counter, name):
    assert xla_plugin.aten_name(counter) == name


def test_the_tracker_reports_the_aten_counters_and_clears_them():
    metrics = StubMetrics(
        {
            "aten::_fft_c2c": 10,
            "aten::searchsorted.Tensor": 2,
            "aten::searchsorted.Scalar": 1,
            "aten::nonzero": 0,
            "aten::_local_scalar_dense": 5,
            "xla::mm": 40,
            "MarkStep": 3,
        }
    )
    tracker = xla_plugin.XLAFallbacks(metrics)
    assert tracker.collect() == ["aten::_fft_c2c", "aten::searchsorted"]  # .item() is a host read, no fallback
    assert tracker.report() == {
        "xla_cpu_fallback_counts": {"aten::_fft_c2c": 10, "aten::searchsorted": 3},
        "xla_host_reads": 5,
    }
    tracker.clear()
    assert metrics.cleared == 1 and tracker.collect() == [] and tracker.report() == {}


def test_the_tracker_reports_the_persistent_compile_cache():
    tracker = xla_plugin.XLAFallbacks(StubMetrics({"PersistentCacheMiss": 2, "xla::mm": 4}))
    assert tracker.report() == {"xla_persistent_cache": {"miss": 2}} and tracker.compile_cache() == "miss"
    tracker = xla_plugin.XLAFallbacks(StubMetrics({"PersistentCacheHit": 3}))
    assert tracker.compile_cache() == "hit"
    # a graph the cache held but could not read back (XLA's CPU client) was compiled again: a miss
    tracker = xla_plugin.XLAFallbacks(StubMetrics({"PersistentCacheHit": 1, "PersistentCacheDeserializeFailure": 1}))
    assert tracker.report()["xla_persistent_cache"] == {"hit": 1, "deserialize_failure": 1}
    assert tracker.compile_cache() == "partial"
    assert xla_plugin.XLAFallbacks(StubMetrics({"xla::mm": 4})).compile_cache() is None  # cache off


def test_both_backends_use_the_counter_tracker(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_xla.debug.metrics", StubMetrics({"aten::median": 1}))
    for compiler in (None, "openxla"):
        tracker = backends.fallback_tracker("xla", compiler)
        assert isinstance(tracker, xla_plugin.XLAFallbacks) and tracker.collect() == ["aten::median"]


def test_every_row_names_the_torch_xla_version(monkeypatch):
    import importlib.metadata as md

    real = md.version
    monkeypatch.setattr(md, "version", lambda dist: "2.99.0" if dist == "torch-xla" else real(dist))
    assert (
        backends.backend_package_versions("xla")
        == backends.backend_package_versions("xla", "openxla")
        == {"torch-xla": "2.99.0"}
    )
    for backend in ("xla", "xla+openxla"):
        row = empty_result(ValidationRequest("arch:BertModel", backend=backend))  # a crash or timeout row too
        assert row["versions"]["torch-xla"] == "2.99.0" and "torch" in row["versions"]
    assert "torch-xla" not in empty_result(ValidationRequest("arch:BertModel", backend="cpu"))["versions"]


def test_the_device_module_syncs_and_waits(monkeypatch):
    calls = []
    stub = types.SimpleNamespace(device_count=lambda: 1, sync=lambda wait=False: calls.append(wait))
    monkeypatch.setitem(sys.modules, "torch_xla", stub)
    mod = xla_plugin.device_module()
    assert mod.is_available() and mod.device_count() == 1
    mod.synchronize()
    assert calls == [True]


def test_the_device_module_is_registered_once_torch_xla_imports(monkeypatch):
    import torch

    if getattr(torch, "xla", None) is not None:
        pytest.skip("torch.xla is already registered in this process")
    registered = {}
    monkeypatch.setitem(
        sys.modules, "torch_xla", types.SimpleNamespace(device_count=lambda: 1, sync=lambda wait=False: None)
    )
    monkeypatch.setattr(torch, "_register_device_module", lambda name, mod: registered.setdefault(name, mod))
    backends._import_device_package("xla")
    assert registered["xla"].__name__ == "torch.xla" and registered["xla"].is_available()


# -- with torch_xla (ZOO_VENV=.venv-xla bash scripts/setup.sh dev xla) ---------------------------


def _explain(r: dict) -> str:
    return (
        f"{r['status']} at {r['precision']}: fallbacks {r['fallback_ops']}, metrics {r['metrics']}, "
        f"report {r['details'].get('fallback_report')}, error {r['error'] and r['error']['message'][:400]}"
    )


def _validate(model_id: str, backend: str) -> dict:
    pytest.importorskip("torch_xla")
    from zoo_runner.engine import validate_here

    return validate_here(ValidationRequest(model_id, backend=backend, tier="tiny"))


@pytest.mark.parametrize("backend", ["xla", "xla+openxla"])
def test_bert_passes_on_xla(backend):
    from importlib.metadata import version

    r = _validate("arch:BertModel", backend)
    assert r["status"] == "pass", _explain(r)
    assert (r["precision"], r["details"]["precision_source"]) == ("fp32", "plugin")
    assert r["versions"]["torch-xla"] == version("torch-xla")
    assert r["fallback_ops"] == [] and r["metrics"]["target_ms"] > 0
    assert r["details"]["strict_fp32"] is True


@pytest.mark.parametrize("backend", ["xla", "xla+openxla"])
def test_fnet_falls_back_to_cpu_for_its_fft(backend):
    r = _validate("arch:FNetModel", backend)
    assert r["status"] == "pass_with_fallback", _explain(r)
    assert r["fallback_ops"] == ["aten::_fft_c2c"]
    assert r["details"]["fallback_report"]["xla_cpu_fallback_counts"]["aten::_fft_c2c"] > 0


def test_state_the_reference_leaves_behind_does_not_reach_the_backend():
    """Mimi caches its codebook as a plain tensor attribute on first use, which ``.to("xla")`` does
    not move: the backend runs a copy of the model as built, not the one the CPU reference ran
    (before, ``cdist`` met an xla and a cpu tensor: a runtime_error that was Zoo's, not torch-xla's)."""
    r = _validate("arch:MimiModel", "xla")
    assert r["status"] in ("pass", "pass_with_fallback"), _explain(r)
    assert "target_model" not in r["details"]


def test_a_model_that_samples_at_inference_is_not_blamed_on_xla():
    """SpeechT5's decoder prenet keeps dropout on at inference; XLA's generator is the device's, so
    the same seed draws other masks than the CPU's. The top-1000 run stored a ``mismatch`` for
    microsoft/speecht5_tts; the CPU re-run at another seed moves too, so it is the model's."""
    r = _validate("arch:SpeechT5ForTextToSpeech", "xla")
    assert (r["status"], r["reason"]) == ("reference_error", "nondeterministic"), _explain(r)
    assert r["details"]["random_ops"] == {"ops": ["aten::bernoulli"], "seed_check": "output moves with the seed"}


def test_an_unlowered_op_is_counted_by_the_tracker():
    pytest.importorskip("torch_xla")
    import torch

    check_backend(XLA)
    tracker = backends.fallback_tracker("xla")
    x = torch.arange(1.0, 9.0, device="xla")
    tracker.clear()
    (x * 2).sum().cpu()
    assert tracker.collect() == []  # lowered
    expected = torch.special.zeta(torch.arange(2.0, 10.0), torch.arange(1.0, 9.0))
    torch.testing.assert_close(torch.special.zeta(x + 1, x).cpu(), expected)  # runs, on CPU
    assert tracker.collect() == ["aten::special_zeta"]
    tracker.clear()
    assert tracker.collect() == []


def test_the_cli_validates_on_xla(zoo):
    pytest.importorskip("torch_xla")
    out = zoo(["validate", "arch:BertModel", "--backend", "xla", "--tier", "tiny", "--json"])
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads(out.stdout)
    assert r["status"] == "pass", _explain(r)
    assert r["versions"]["torch-xla"] and r["fallback_ops"] == []
    assert "Defaulting to PJRT_DEVICE" not in out.stderr


def test_the_persistent_compile_cache_is_shared_by_model_processes(tmp_path, monkeypatch):
    """torch_xla's persistent cache lives under ZOO_COMPILE_CACHE/<the model's namespace>/xla. The
    second process finds each graph there: a hit where the PJRT client can load executables back,
    a deserialize failure (so a miss) where it cannot, which XLA's CPU client in torch-xla 2.9.0 is."""
    pytest.importorskip("torch_xla")
    from zoo_runner.launcher import run_isolated

    monkeypatch.setenv("ZOO_COMPILE_CACHE", str(tmp_path / "compile"))
    req = ValidationRequest("arch:BertModel", backend="xla", timeout_s=600, reference_cache="")
    first, second = run_isolated(req), run_isolated(req)
    assert first["status"] == second["status"] == "pass", (_explain(first), _explain(second))
    cold = first["details"]["fallback_report"]["xla_persistent_cache"]
    warm = second["details"]["fallback_report"]["xla_persistent_cache"]
    assert cold.get("miss", 0) > 0 and not cold.get("hit") and first["details"]["compile_cache"] == "miss"
    from zoo_runner.cache_trust import namespace

    ns = namespace(req.model_id, req.revision, req.plugins)  # the model's own namespace of the cache
    assert any((tmp_path / "compile" / ns / "xla").iterdir()), "no executable written under ZOO_COMPILE_CACHE/<ns>/xla"
    assert warm.get("hit", 0) + warm.get("deserialize_failure", 0) >= cold["miss"], warm  # found, all of them
    assert second["details"]["compile_cache"] == ("hit" if not warm.get("deserialize_failure") else "miss")


@pytest.mark.parametrize(
    ("model", "printed"),
    [
        # XLNet keeps its last mem_len (512) states with x[-512:] on a sequence of 16: slice_copy raises on XLA
        ("arch:XLNetModel", "on the CPU the same call runs"),
        # EfficientNet's ceil-mode AvgPool2d with a kernel larger than its input: XLA gives an empty output,
        # and the model's reshape then raises (no op raises itself)
        ("arch:EfficientNetModel", "on xla"),
    ],
)
def test_triage_finds_the_op_torch_xla_gets_wrong(zoo, tmp_path, model, printed):
    """Issue 28's real xla findings, from Zoo: the attribution is the device in eager mode and the
    repro is the one ATen op at fault, run on xla (and on the CPU): it imports torch and torch_xla
    only and exits 1 with this venv's python."""
    pytest.importorskip("torch_xla")
    import subprocess

    out = tmp_path / "D"
    proc = zoo(["triage", model, "--backend", "xla", "--tier", "tiny", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert (summary["status"], summary["attribution"], summary["repro_nodes"]) == ("runtime_error", "device_eager", 1)
    text = (out / "repro.py").read_text()
    assert "import torch_xla" in text and "zoo_runner" not in text.split("# In Zoo:")[1].split("\n", 1)[1]
    run = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1 and "REPRODUCED" in run.stdout, (run.stdout, run.stderr[-2000:])
    assert printed in run.stdout, run.stdout


def test_triage_of_longformer_on_openxla_finds_the_as_strided_on_a_view(zoo, tmp_path):
    """Issue 28's last real cluster: Longformer mismatches on xla+openxla and passes on eager xla.
    Zoo finds the graph at fault although its last output holds masked scores (finfo.min) and cuts
    it to the ``as_strided`` on a view (10 nodes); the repro imports torch and torch_xla only and
    exits 1 with this venv's python."""
    pytest.importorskip("torch_xla")
    import subprocess

    out = tmp_path / "D"
    proc = zoo(["triage", "arch:LongformerModel", "--backend", "xla+openxla", "--tier", "tiny", "--out", str(out)])
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert (summary["status"], summary["attribution"]) == ("mismatch", "device_compile"), summary
    assert summary["repro_nodes"] <= 12, summary
    text = (out / "repro.py").read_text()
    assert "as_strided" in text and "import torch_xla" in text and "transformers" not in text.split("import sys")[1]
    run = subprocess.run([sys.executable, str(out / "repro.py")], capture_output=True, text=True, timeout=300,
                         cwd=tmp_path)  # fmt: skip
    assert run.returncode == 1 and "REPRODUCED" in run.stdout, (run.stdout, run.stderr[-2000:])
