"""The neuron path end to end, on a fake TorchNeuron (tests/plugins/fake_neuron.py).

The fake registers a PrivateUse1 ``neuron`` device whose tensors hold CPU tensors, runs ops it
has no kernel for on CPU and records them through ``torch_neuronx.get_fallback_ops()``, as
TorchNeuron documents. Zoo must report ``pass_with_fallback`` with exactly those ops.

The plugin is only ever imported in child processes: importing it here would give this pytest
process a ``neuron`` device for good (tests/test_backends.py checks that there is none).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT, child_env
from tests.plugins.fake_neuron_ops import EXTRA_OPS_ENV, SUPPORTED_OPS
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest

PLUGIN = "tests.plugins.fake_neuron"


@pytest.fixture(autouse=True)
def fake_neuron(monkeypatch):
    monkeypatch.setenv("ZOO_PLUGINS", PLUGIN)
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.delenv(EXTRA_OPS_ENV, raising=False)


def _validate(arch: str) -> dict:
    r = run_isolated(ValidationRequest(f"arch:{arch}", backend="neuron", timeout_s=300))
    assert r["device"] == "neuron" and r["backend"] == "neuron"
    return r


ARCHS = ("BertForMaskedLM", "GPT2LMHeadModel", "LlamaForCausalLM")


@pytest.fixture(scope="module")
def ops_run_on_neuron():
    """A second, independent count: every ATen op that touches a neuron tensor (or allocates on
    neuron) while the same models run the same inputs on the fake device, seen by a dispatch mode
    rather than by the device's own tracking. One child process for all of ARCHS, started now and
    running while the validations run; ``get(arch)`` waits for it."""
    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_PLUGINS", EXTRA_OPS_ENV)}
    scratch = __import__("tempfile").mkdtemp(prefix="zoo-neuron-probe-")  # the fake's NEFFs, not /tmp's
    env.update(PYTHONPATH=str(ROOT), HF_HUB_OFFLINE="1")
    env.update(
        {
            var: os.path.join(scratch, var.lower())
            for var in ("TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "TORCH_NEURONX_DEBUG_DIR")
        }
    )
    code = f"from tests.test_fake_neuron import _probe; _probe({list(ARCHS)!r})"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env
    )
    seen: dict[str, list[str]] = {}

    def get(arch: str) -> set[str]:
        if not seen:
            out, err = proc.communicate(timeout=600)
            assert proc.returncode == 0, err[-3000:]
            seen.update(json.loads(out.strip().splitlines()[-1]))
        return set(seen[arch])

    yield get
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def _probe(archs: list[str]) -> None:  # runs in a child process; prints {arch: [op, ...]}
    import importlib

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    importlib.import_module(PLUGIN)
    from zoo_runner.builders import get_builder

    def on_neuron(x) -> bool:
        return (isinstance(x, torch.Tensor) and x.device.type == "neuron") or (
            isinstance(x, torch.device) and x.type == "neuron"
        )

    class OnNeuron(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: set[str] = set()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if any(on_neuron(x) for x in tree_leaves((args, kwargs))):
                self.seen.add(func._schema.name)
            return func(*args, **kwargs)

    seen = {}
    for arch in archs:  # the model and inputs the engine builds, moved the way the engine moves them
        req = ValidationRequest(f"arch:{arch}", backend="neuron")
        built = get_builder("transformers").build(req)
        inputs = [built.make_inputs(shape, req.seed + i) for i, shape in enumerate(built.shapes)]
        model = built.model.to(device=torch.device("neuron"), dtype=torch.float32)
        mode = OnNeuron()
        with torch.no_grad():
            for x in inputs:
                xt = {k: v.to(device=torch.device("neuron")) for k, v in x.items()}
                with mode:
                    model(**xt)
        seen[arch] = sorted(mode.seen)
    print(json.dumps(seen))


@pytest.mark.parametrize("arch", ARCHS)
def test_fake_neuron_reports_exactly_the_ops_that_fell_back(arch, ops_run_on_neuron):
    r = _validate(arch)
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    fallback = set(r["fallback_ops"])
    assert r["fallback_ops"] == sorted(fallback) and fallback

    # exactly the ops outside the device's kernel set that ran on the device
    assert fallback == ops_run_on_neuron(arch) - SUPPORTED_OPS

    # and consistent with the CPU op census: every op the reference ran that the device lacks
    # fell back, except CPU-only fused kernels (SDPA picks another path on other devices)
    cpu_only = {op for op in r["op_census"] if op.endswith("_for_cpu")}
    assert set(r["op_census"]) - SUPPORTED_OPS - cpu_only <= fallback
    assert r["metrics"]["target_ms"] is not None and r["metrics"]["cosine"] > 0.999


def test_fake_neuron_with_every_op_supported_passes_clean(monkeypatch):
    """Give the device kernels for exactly the ops it reported: nothing falls back any more,
    which also proves the report was complete."""
    first = _validate("GPT2LMHeadModel")
    assert first["status"] == "pass_with_fallback", (first["status"], first["error"])
    monkeypatch.setenv(EXTRA_OPS_ENV, ",".join(first["fallback_ops"]))
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "pass", (r["status"], r["error"], r["fallback_ops"])
    assert r["fallback_ops"] == []
    assert r["fingerprint"] == first["fingerprint"]


def test_fake_neuron_computes_fp32_by_default_and_is_judged_at_fp32(monkeypatch):
    """neuronx-cc's ``--auto-cast`` defaults to ``none`` since Neuron 2.27 (AWS release-notes/components/
    compiler): the neuron plugin declares fp32, the row says which flags it saw, and the fp32 output passes
    at fp32 (a bf16 device would fail there: tests/test_precision.py)."""
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    assert (r["precision"], r["details"]["precision_source"], r["details"]["strict_fp32"]) == ("fp32", "plugin", True)
    setup = r["details"]["device_setup"]
    assert (setup["auto_cast"], setup["cc_flags"], setup["fallback_execution"]) == ("none", "", False), setup
    assert "neuronx_cc" in setup and setup["cores_var"] == "NEURON_RT_VISIBLE_CORES" and setup["cores"]


@pytest.mark.parametrize("flags", ["--auto-cast=matmult", "--auto-cast all --auto-cast-type bf16"])
def test_fake_neuron_auto_casts_to_bf16_when_asked_and_is_judged_at_bf16(monkeypatch, flags):
    """With ``NEURON_CC_FLAGS`` asking for ``--auto-cast=matmult`` (or ``all``) the device rounds matmul
    operands to bf16; Zoo judges it at bf16, and the same output fails at fp32."""
    monkeypatch.setenv("NEURON_CC_FLAGS", flags)
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    assert (r["precision"], r["details"]["precision_source"], r["details"]["strict_fp32"]) == ("bf16", "plugin", False)
    assert r["details"]["device_setup"]["cc_flags"] == flags
    if flags != "--auto-cast=matmult":
        return
    r = run_isolated(ValidationRequest("arch:GPT2LMHeadModel", backend="neuron", precision="fp32", timeout_s=300))
    assert r["status"] == "mismatch" and r["details"]["precision_source"] == "flag", (r["status"], r["error"])
    assert "exceeds the fp32 budget" in r["error"]["message"]


# ---------------------------------------------------------------- the Neuron set-up of a model process
PROBE = "tests.plugins.neuron_probe"
DEVICE_GID = 4242
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch and device nodes need root (CI runs as root)")


@pytest.fixture
def neuron_host(tmp_path, monkeypatch):
    """A fake Trainium host: four NeuronCores (lock files the fake runtime claims) and one device "node"
    owned root:4242 0660 as AWS's udev rule makes /dev/neuron*;
    Zoo shares the cores out two per model process and locks its claims in a private directory."""
    from zoo_runner import backends

    dev = tmp_path / "dev"
    dev.mkdir(mode=0o755)
    for core in range(4):
        (dev / f"core{core}").write_text("")
        os.chmod(dev / f"core{core}", 0o644)
    node = dev / "neuron0"  # a file, not a node: the directory is shown read-only and nodev in the sandbox
    node.write_bytes(b"NEURON-DEVICE")
    os.chown(node, 0, DEVICE_GID)
    os.chmod(node, 0o660)
    os.chmod(tmp_path, 0o711)  # a `zoo run` here keeps its cwd (on sys.path) for model processes: passable
    monkeypatch.setenv("ZOO_PLUGINS", f"{PLUGIN},{PROBE}")
    monkeypatch.setenv("ZOO_FAKE_NEURON_DEVICE_DIR", str(dev))
    monkeypatch.setenv("ZOO_SANDBOX_ENV", "ZOO_FAKE_NEURON_DEVICE_DIR,ZOO_TEST_PROBE_HOLD_S")
    monkeypatch.setenv("ZOO_SANDBOX_KEEP", str(dev))
    monkeypatch.setenv("ZOO_NEURON_CORES", "0-3")
    monkeypatch.setenv("ZOO_NEURON_CORES_PER_PROCESS", "2")
    monkeypatch.setenv("ZOO_DEVICE_LOCK_DIR", str(tmp_path / "locks"))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", "/parent/own/neff")  # never a model process's
    monkeypatch.setattr(backends.device_plugin("neuron"), "device_nodes", str(dev / "neuron[0-9]*"))
    return dev


def _setup_probe(backend: str) -> dict:
    plugins = f"{PLUGIN},{PROBE}" if backend.startswith("neuron") else PROBE  # a cpu process loads no torch_neuronx
    req = ValidationRequest("arch:BertModel", backend=backend, timeout_s=300, reference_cache="", plugins=plugins)
    r = run_isolated(req)
    message = (r["error"] or {}).get("message", "")
    assert r["status"] == "compile_error" and "ZOO-NEURONPROBE<<" in message, (r["status"], r["error"])
    facts = json.loads(message.split("ZOO-NEURONPROBE<<", 1)[1].rsplit(">>", 1)[0])
    facts["row"] = r
    return facts


@needs_root
def test_a_neuron_model_process_gets_writable_caches_its_own_cores_its_device_group_and_no_fallback(neuron_host):
    """Inside a neuron model process: the three TorchNeuron directories are set (none of them the
    parent's) and writable, NEURON_RT_VISIBLE_CORES is the core set the parent claimed, fallback
    execution is pinned off, and its one supplementary group is the device nodes' group, so it opens
    the node; a cpu model process beside it gets none of that and finds /dev/null where the node was."""
    neuron = _setup_probe("neuron+zoo_neuronprobe")
    env = neuron["env"]
    assert neuron["writable"] == dict.fromkeys(
        ("TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "TORCH_NEURONX_DEBUG_DIR"), True
    ), neuron
    assert env["TORCH_NEURONX_NEFF_CACHE_DIR"] != "/parent/own/neff"
    assert env["TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION"] == "1"
    assert env["NEURON_RT_VISIBLE_CORES"] in ("0-1", "2-3")
    assert env["NEURON_RT_VISIBLE_CORES"] == neuron["row"]["details"]["device_setup"]["cores"]
    sandbox = neuron["row"]["details"]["sandbox"]
    assert sandbox["uid_switched"] and neuron["groups"] == [DEVICE_GID] == sandbox["groups"], (neuron, sandbox)
    assert neuron["nodes"] == {"neuron0": "file, read: b'NEURON-DEVICE'"}, neuron["nodes"]

    cpu = _setup_probe("cpu+zoo_neuronprobe")
    assert cpu["env"] == {} and cpu["groups"] == [] and cpu["row"]["details"]["sandbox"]["groups"] == [], cpu
    assert cpu["nodes"] == {"neuron0": "char, read: b''"}, cpu["nodes"]  # /dev/null, not the device
    assert "device_setup" not in cpu["row"]["details"]


@needs_root
def test_concurrent_neuron_model_processes_hold_disjoint_cores(neuron_host, monkeypatch):
    """Four model processes at once on two core sets: the parent's host-wide claims pair them off, so
    the fake runtime (which fails a second process on a core in use) never sees two on one core."""
    from concurrent.futures import ThreadPoolExecutor

    monkeypatch.setenv("ZOO_TEST_PROBE_HOLD_S", "2")
    with ThreadPoolExecutor(4) as pool:
        probes = list(pool.map(_setup_probe, ["neuron+zoo_neuronprobe"] * 4))
    _assert_disjoint([(p["env"]["NEURON_RT_VISIBLE_CORES"], p["window"]) for p in probes])


def _assert_disjoint(held: list[tuple[str, list[float]]]) -> None:
    overlapping = 0
    for i, (cores_a, (start_a, end_a)) in enumerate(held):
        for cores_b, (start_b, end_b) in held[i + 1 :]:
            if start_a < end_b and start_b < end_a:  # alive at the same time
                overlapping += 1
                assert cores_a != cores_b, held
    assert overlapping, f"no two model processes ran at once: the test proved nothing {held}"


@needs_root
def test_two_zoo_runs_at_once_hold_disjoint_cores(neuron_host, tmp_path):
    """Two ``zoo run`` on one host (two databases, one lock directory), two jobs each: four model
    processes on two core sets, never two on one set at once."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("ZOO_", "TORCH_NEURONX_"))}
    env.update(ZOO_TEST_PROBE_HOLD_S="2")
    procs = []
    for i in range(2):
        child = child_env(**env, ZOO_DATABASE_URL=f"sqlite:///{tmp_path / f'run{i}.db'}")
        cmd = [
            sys.executable,
            "-m",
            "zoo.cli",
            "run",
            "--top",
            "2",
            "--jobs",
            "2",
            "--backend",
            "neuron+zoo_neuronprobe",
        ]
        procs.append(subprocess.Popen(cmd, env=child, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    held = []
    for i, proc in enumerate(procs):
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err.decode()[-3000:]
        import sqlite3

        rows = sqlite3.connect(tmp_path / f"run{i}.db").execute("select status, error from results").fetchall()
        assert len(rows) == 2 and {r[0] for r in rows} == {"compile_error"}, rows
        for _status, error in rows:
            message = json.loads(error)["message"]
            facts = json.loads(message.split("ZOO-NEURONPROBE<<", 1)[1].rsplit(">>", 1)[0])
            held.append((facts["env"]["NEURON_RT_VISIBLE_CORES"], facts["window"]))
    assert len(held) == 4
    _assert_disjoint(held)


def test_neuron_model_processes_are_spawned_and_the_fake_runtime_refuses_a_forked_child():
    """The Neuron runtime does not start in a forked child: Zoo spawns neuron model processes (never
    from the forkserver), and the fake device refuses one forked after it was imported."""
    from zoo_runner.backends import fork_safe

    assert not fork_safe("neuron") and not fork_safe("neuron+neuron")
    code = (
        "import os, tests.plugins.fake_neuron as fn\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        fn.start_runtime()\n"
        "    except RuntimeError as exc:\n"
        "        print('refused:', exc, flush=True); os._exit(0)\n"
        "    os._exit(1)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print('child', os.waitstatus_to_exitcode(status))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": "", "ZOO_PLUGINS": ""}
    with __import__("tempfile").TemporaryDirectory() as tmp:
        env.update(TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=tmp + "/l", TORCH_NEURONX_DEBUG_DIR=tmp + "/d")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "refused: NRT: the Neuron runtime cannot start in a forked child" in out.stdout, out.stdout
    assert "child 0" in out.stdout


def test_an_error_the_device_raises_at_synchronize_is_the_inputs_that_raised_it(monkeypatch):
    """A device's execution error surfaces at ``synchronize()``: the row is a runtime_error that names the
    input it came from (``failed_input``), not one without it."""
    monkeypatch.setenv("ZOO_FAKE_NEURON_ASYNC_BROKEN", "aten::tanh")
    monkeypatch.setenv("ZOO_SANDBOX_ENV", "ZOO_FAKE_NEURON_ASYNC_BROKEN")
    r = _validate("GPT2LMHeadModel")
    assert r["status"] == "runtime_error", (r["status"], r["error"])
    assert "aten::tanh failed (NRT execution error)" in r["error"]["message"]
    assert r["details"]["failed_input"]["index"] == 0, r["details"]


def test_neuron_plus_neuron_compiles_static_shapes_without_fallback_execution(monkeypatch):
    """``neuron+neuron`` compiles with ``dynamic=False`` and fallback execution off: the fake backend
    (which rejects dynamic shapes, as TorchNeuron does) compiles every graph, reports them through
    ``get_dynamo_metrics()``, and a graph it cannot lower is a compile_error, never a silent CPU run."""
    r = _validate_spec("GPT2LMHeadModel", "neuron+neuron")
    assert r["status"] == "pass_with_fallback", (r["status"], r["error"])
    assert r["details"]["device_setup"]["dynamic"] is False
    assert r["details"]["fallback_report"]["dynamo_metrics"]["graphs_compiled"] >= 1
    assert 0 < r["details"]["backend_share"] < 1

    # a graph neuronx-cc cannot lower: a compile_error, even where the parent's environment asks for
    # fallback execution (Zoo pins it off in the model process, by variable and by option)
    monkeypatch.setenv("ZOO_FAKE_NEURON_UNCOMPILABLE", "aten::embedding")
    monkeypatch.setenv("ZOO_SANDBOX_ENV", "ZOO_FAKE_NEURON_UNCOMPILABLE")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "0")
    r = _validate_spec("GPT2LMHeadModel", "neuron+neuron")
    assert r["status"] == "compile_error", (r["status"], r["error"])
    assert "no lowering for aten::embedding" in r["error"]["message"]


def _validate_spec(arch: str, backend: str) -> dict:
    return run_isolated(ValidationRequest(f"arch:{arch}", backend=backend, timeout_s=300))


def test_custom_code_does_not_run_on_neuron_unless_allowed(monkeypatch, tmp_path):
    """AWS: a process with access to the Neuron devices has unrestricted access to the instance's
    physical memory. Custom code is refused on neuron before any process starts, unless
    ZOO_NEURON_CUSTOM_CODE=1; on cpu the same request goes on to the sandbox's own rules."""
    from zoo_runner import sandbox
    from zoo_runner.exceptions import SandboxUnavailable

    req = ValidationRequest("org/custom", backend="neuron", remote_code={"modeling_x.py": "0" * 64})
    with pytest.raises(SandboxUnavailable, match="physical memory"):
        sandbox.prepare_run(req, str(tmp_path / "a"), 1 << 30)
    monkeypatch.setenv("ZOO_NEURON_CUSTOM_CODE", "1")
    monkeypatch.setenv("ZOO_SANDBOX", "off")
    with pytest.raises(SandboxUnavailable, match="never runs with ZOO_SANDBOX=off"):
        sandbox.prepare_run(req, str(tmp_path / "b"), 1 << 30)


def test_doctor_names_each_missing_neuron_precondition_in_one_line_and_fails(zoo, tmp_path):
    """``zoo doctor --backend neuron`` on a machine without Trainium: one line per precondition, each
    failing one with its fix, exit 1; nothing starts the Neuron runtime (no torch_neuronx here)."""
    proc = zoo(["doctor", "--backend", "neuron"], ZOO_DEVICE_LOCK_DIR=str(tmp_path / "locks"))
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr[-2000:])
    lines = proc.stdout.strip().splitlines()
    assert lines[0].startswith("neuron: ") and "preconditions hold" in lines[0], lines
    checks = {line.split(":", 1)[0].split(None, 1)[1]: line for line in lines[1:]}
    for name in ("torch-neuronx", "neuronx-cc", "nki", "device nodes", "visible cores", "compiler flags"):
        assert name in checks, (name, lines)
    for name in ("torch-neuronx", "neuronx-cc", "nki", "device nodes", "visible cores"):  # none on this machine
        assert checks[name].lstrip().startswith("FAIL") and " -> " in checks[name], checks[name]
    assert "pip.repos.neuron.amazonaws.com" in checks["torch-neuronx"]
    assert checks["compiler flags"].lstrip().startswith("ok") and "judged at fp32" in checks["compiler flags"]
    assert "Traceback" not in proc.stderr


def test_jobs_default_to_the_neuron_core_sets(monkeypatch):
    from zoo.jobs import default_jobs
    from zoo_runner.plugins.neuron import core_sets

    monkeypatch.setenv("ZOO_NEURON_CORES", "0-7")
    monkeypatch.setenv("ZOO_NEURON_CORES_PER_PROCESS", "2")
    assert core_sets() == ["0-1", "2-3", "4-5", "6-7"] and default_jobs("neuron+neuron") == 4
    monkeypatch.setenv("ZOO_NEURON_CORES", "0-4")  # a remainder too small for a process is left out
    assert core_sets() == ["0-1", "2-3"]
    monkeypatch.setenv("ZOO_NEURON_CORES", "0,2-5,7")  # every set contiguous, as NEURON_RT_VISIBLE_CORES must be
    assert core_sets() == ["2-3", "4-5"]


def test_core_claims_exclude_core_by_core_and_only_in_a_directory_of_zoos_own(tmp_path, monkeypatch):
    """A lock per core: a set of another size or alignment (another run's ZOO_NEURON_CORES_PER_PROCESS)
    that shares a core waits; a disjoint one does not; a lock directory others may write is refused."""
    from zoo_runner.device_claims import claim
    from zoo_runner.exceptions import BadInput

    monkeypatch.setenv("ZOO_DEVICE_LOCK_DIR", str(tmp_path / "locks"))
    with claim("neuron", ["0-1"]) as held:
        assert held == "0-1"
        with pytest.raises(TimeoutError, match="stayed claimed"):
            with claim("neuron", ["1-2"], wait_s=0.5):
                pass
        with claim("neuron", ["1-2", "2-3"], wait_s=0.5) as other:
            assert other == "2-3"
    with claim("neuron", ["1-2"], wait_s=0.5) as again:  # released with the block
        assert again == "1-2"
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    monkeypatch.setenv("ZOO_DEVICE_LOCK_DIR", str(shared))
    with pytest.raises(BadInput, match="not this user's own"):
        with claim("neuron", ["0"]):
            pass


def test_a_cold_first_compile_gets_its_budget_and_a_timeout_in_it_says_so(tmp_path, monkeypatch):
    """neuron+neuron with an empty NEFF cache gets ZOO_NEURON_COLD_COMPILE_S beyond its timeout (inside a
    Celery task's hard limit too), and a timeout then says it was a cold first compile, never a plain one."""
    from workers.celery_app import HARD_TIME_LIMIT_S
    from workers.tasks import TASK_OVERHEAD_S, _requests
    from zoo_runner import launcher, sandbox

    monkeypatch.setenv("ZOO_NEURON_COLD_COMPILE_S", "300")
    assert launcher.cold_compile_reserve("neuron+neuron") == 300 and launcher.cold_compile_reserve("neuron") == 0
    lead = _requests({"model_id": "arch:BertModel", "backend": "neuron+neuron", "timeout_s": 1e9}, None)[0]
    assert lead.timeout_s == max(1.0, HARD_TIME_LIMIT_S - TASK_OVERHEAD_S - 300)

    req = ValidationRequest("arch:BertModel", backend="neuron+neuron", timeout_s=60, reference_cache="")
    (tmp_path / "run").mkdir()
    run, _ = sandbox.prepare_run(req, str(tmp_path / "run"), 1 << 30)
    assert run.setup["cold_compile_s"] == 300  # nothing compiled for this model yet
    row = launcher._failure_result(req, -9, True, "target", "", 360.0, None, run.setup["cold_compile_s"])
    assert row["status"] == "timeout" and row["details"]["cold_compile"] is True
    assert "60s plus 300s for a first compile into a cold compile cache" in row["error"]["message"]
