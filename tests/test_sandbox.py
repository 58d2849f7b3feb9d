"""The model process is a sandbox, and the parent trusts nothing from it but measurements.

A canary compile backend (tests/plugins/canary.py) tries every escape from inside the model process
and reports each attempt in its row's error; as root (CI) every attempt fails and the verdict is
still a row. A forging backend (tests/plugins/forger.py) writes another model's result, or one that
is no result at all: the row keeps the parent's identity, or is a ``crash`` saying why.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import torch

import zoo_runner
from tests.conftest import ROOT, need_service
from tests.conftest import child_env as cli_env
from tests.plugins.canary import MARK
from zoo_runner import sandbox
from zoo_runner.exceptions import SandboxUnavailable
from zoo_runner.launcher import run_isolated
from zoo_runner.request import HARNESS_VERSION, ValidationRequest
from zoo_runner.result_schema import RESULT_MAX_BYTES, BadResult, read_json_file, trusted_result
from zoo_runner.sandbox_linux import PROTECTIONS

ATTEMPTS = {
    "secret_in_own_env",
    "ancestor_environ",
    "any_environ_with_secret",
    "token_file",
    "postgres_tcp",
    "redis_tcp",
    "postgres_unix_socket",
    "write_outside",
    "root",
    "private_files",
    "new_user_namespace",
}
SECRETS = (
    "HF_TOKEN",
    "ZOO_API_KEYS",
    "PGPASSWORD",
    "GITHUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "MY_SERVICE_TOKEN",
    "ZOO_DATABASE_URL",
    "ZOO_BROKER_URL",
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch needs root (CI runs as root)")


@pytest.fixture
def secrets(tmp_path):
    """Secrets in a requester's environment from its start (so its /proc/<pid>/environ has them,
    as a worker's would), and a Hub token file in its HF_HOME, all marked."""
    hf_home = tmp_path / "hf-home"
    hf_home.mkdir()
    (hf_home / "token").write_text(f"hf_{MARK}")
    env = {**os.environ, **{name: f"{MARK}-{name}-{uuid.uuid4().hex[:6]}" for name in SECRETS}}
    env.update(HF_HOME=str(hf_home), PYTHONPATH=str(ROOT))
    return env


REQUESTER = """
import json, sys
from multiprocessing import forkserver
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest
if __name__ == "__main__":
    row = run_isolated(ValidationRequest.from_dict(json.loads(sys.stdin.read())))
    with open(f"/proc/{forkserver._forkserver._forkserver_pid}/environ", "rb") as f:
        row["forkserver_environ_has_secret"] = MARK.encode() in f.read()
    print(json.dumps(row))
"""


def _run_in_requester(req: ValidationRequest, env: dict[str, str], tmp_path) -> dict:
    """``run_isolated(req)`` in a requester process that has ``env`` from its start."""
    script = tmp_path / "requester.py"
    script.write_text(f"MARK = {MARK!r}\n" + REQUESTER)
    proc = subprocess.run(
        [sys.executable, str(script)],
        input=json.dumps(req.to_dict()),
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _opt_database(tag: str) -> Path:
    """A world-readable database file under /opt, as a machine may keep one (removed at exit)."""
    import atexit
    import shutil

    folder = Path("/opt") / f"zoo-canary-{tag}"
    folder.mkdir(mode=0o755, parents=True, exist_ok=True)
    db = folder / "zoo.db"
    db.write_text("SQLite format 3\0 a database the model must not read")
    db.chmod(0o644)
    atexit.register(shutil.rmtree, folder, True)
    return db


def _canary_request(tmp_path, hf_home: str) -> tuple[ValidationRequest, list[str]]:
    tag = uuid.uuid4().hex[:8]
    writes = [
        str(ROOT / f"zoo-canary-{tag}"),
        str(tmp_path / f"zoo-canary-{tag}"),
        os.path.join(hf_home, f"zoo-canary-{tag}"),
    ]
    extras = {
        "canary": {
            "requester": os.getpid(),
            "token_files": [os.path.join(hf_home, "token")],
            "write_targets": writes,
            "tag": tag,
            # what a model never needs: a database under /opt, the checkout's data/, .git and the rest of it
            "private_files": [
                str(_opt_database(tag)),
                str(ROOT / "data" / "README.md"),
                str(ROOT / ".git" / "HEAD"),
                str(ROOT / "README.md"),
            ],
        }
    }
    req = ValidationRequest(
        "arch:BertModel", backend="cpu+zoo_canary", timeout_s=180, extras=extras, plugins="tests.plugins.canary"
    )
    return req, writes + [f"/tmp/zoo-canary-{tag}", f"/var/tmp/zoo-canary-{tag}"]


def _findings(row: dict) -> dict[str, str]:
    message = (row.get("error") or {}).get("message", "")
    m = re.search(r"ZOO-CANARY<<(.*?)>>", message, re.S)
    assert m, f"no canary report in the row: {row['status']}: {message[:2000]}"
    found = json.loads(m.group(1))
    assert set(found) == ATTEMPTS, found
    return found


@needs_root
def test_every_escape_fails_and_the_verdict_is_still_a_row(secrets, tmp_path):
    req, written = _canary_request(tmp_path, secrets["HF_HOME"])
    row = _run_in_requester(req, {**secrets, "ZOO_SANDBOX": "strict"}, tmp_path)
    assert row["model_id"] == "arch:BertModel" and row["backend"] == "cpu+zoo_canary"
    assert row["status"] == "compile_error", (row["status"], row["error"])
    found = _findings(row)
    escaped = {k: v for k, v in found.items() if not v.startswith("blocked")}
    assert not escaped, escaped
    assert not [p for p in written if os.path.exists(p)]
    sb = row["details"]["sandbox"]
    uid, gid = sandbox.sandbox_ids()
    assert (sb["mode"], sb["uid"], sb["gid"], sb["uid_switched"], sb["capabilities"]) == ("strict", uid, gid, True, 0)
    assert sb["no_new_privs"] and sb["netns"] and sb["mountns"] and sb["missing"] == []
    assert set(sb["rlimits"]) == {"data", "as", "cpu", "fsize", "nproc", "nofile"} and sb["env"] == "allowlist"
    # nothing secret in the row, and the forkserver every model process forks from has none either
    assert row.pop("forkserver_environ_has_secret") is False
    assert MARK not in json.dumps(row)


@needs_root
def test_sandbox_off_runs_without_it_and_says_so(secrets, tmp_path):
    """Off is an explicit opt-in: the canary (the positive control) escapes where only the
    environment allowlist still holds, and the row says the sandbox was off."""
    need_service("PostgreSQL", "127.0.0.1", 5432)
    req, _ = _canary_request(tmp_path, secrets["HF_HOME"])
    req.extras["canary"]["write_targets"] = [str(tmp_path / "zoo-canary-off")]
    row = _run_in_requester(req, {**secrets, "ZOO_SANDBOX": "off"}, tmp_path)
    found = _findings(row)
    for attempt in (
        "ancestor_environ",
        "any_environ_with_secret",
        "token_file",
        "postgres_tcp",
        "postgres_unix_socket",
        "write_outside",
        "root",
        "private_files",
        "new_user_namespace",
    ):
        assert found[attempt].startswith("ESCAPED"), (attempt, found[attempt])
    assert "(secret!)" in found["ancestor_environ"]  # the requester's environment, read from /proc
    assert found["secret_in_own_env"].startswith("blocked")  # the allowlist holds even when off
    sb = row["details"]["sandbox"]
    assert sb["mode"] == "off" and sb["uid"] == 0 and not sb["netns"] and not sb["mountns"]
    assert sb["missing"] == list(PROTECTIONS)


@needs_root
@pytest.mark.parametrize("kind", ["identity", "deep", "symlink"])
def test_a_forged_result_keeps_the_parents_identity_or_is_a_crash(kind, tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{MARK}-file")
    os.chmod(secret, 0o600)
    extras = {"forge": kind, "secret": str(secret)}
    req = ValidationRequest(
        "arch:BertModel",
        backend="cpu+zoo_forge",
        timeout_s=180,
        precision="fp32",
        extras=extras,
        plugins="tests.plugins.forger",
    )
    row = run_isolated(req)
    assert (row["model_id"], row["backend"], row["tier"], row["revision"], row["precision"]) == (
        "arch:BertModel",
        "cpu+zoo_forge",
        "tiny",
        None,
        "fp32",
    )
    assert (
        row["repro"] == req.repro()
        and row["details"]["seed"] == 0
        and row["details"]["harness_version"] == HARNESS_VERSION
    )
    assert row["details"]["sandbox"]["uid"] == sandbox.sandbox_ids()[0]  # the parent's account, not the forged one
    # versions are the parent's, read from installed metadata, never the forged "torch 9.9"
    assert row["versions"]["torch"] == torch.__version__ and row["versions"]["zoo"] == zoo_runner.__version__
    if kind == "identity":  # a pass without the measurements that make one: the parent calls it a crash
        assert row["status"] == "crash" and row["error"]["type"] == "BadResult", (row["status"], row["error"])
        assert "claims pass without its measurements" in row["error"]["message"]
        assert "rmse_ratio" in row["error"]["message"] and "budget_use" in row["error"]["message"]
    else:
        assert row["status"] == "crash" and row["error"]["type"] == "BadResult", (row["status"], row["error"])
        assert {"deep": "not valid JSON", "symlink": "cannot be opened safely"}[kind] in row["error"]["message"]
    assert MARK not in json.dumps(row)


@needs_root
def test_what_only_the_parent_may_say_is_never_taken_from_the_model_process(tmp_path, monkeypatch):
    """A model process that writes a known failure (with a ``javascript:`` link), a triage, strict fp32,
    the verdict's author, published references, a dedup source and another architecture, task and
    library into a well-formed result changes none of them: the row has the parent's, and the error
    message it wrote is stored without its terminal escapes."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    from zoo_runner.builders.transformers_builder import task_for

    req = ValidationRequest(
        "arch:BertModel",
        backend="cpu+zoo_forge",
        timeout_s=180,
        precision="fp32",
        extras={"forge": "claims"},
        plugins="tests.plugins.forger",
    )
    row = run_isolated(req)
    assert row["status"] == "mismatch", (row["status"], row["error"])
    assert (row["library"], row["architecture"], row["task"]) == ("transformers", "BertModel", task_for("BertModel"))
    details = row["details"]
    for key in ("known_failure", "known_failure_fixed", "triage", "strict_fp32"):
        assert key not in details, (key, details.get(key))
    assert details.get("reference_published") != {"key": "stored"}  # the parent's own publishing, if any
    assert "deduplicated_from" not in details and details.get("verdict") != "model"
    assert {"triage", "verdict", "deduplicated_from", "reference_published"} <= set(details["claims_dropped"])
    claimed = {"library": "evil-lib", "architecture": "EvilForModel", "task": "<script>alert(1)</script>"}
    assert details["claims_overruled"] == claimed  # kept apart, as what it said
    message = row["error"]["message"]
    assert "\x1b" not in message and "\x07" not in message and "\r" not in message
    assert "\x1b" not in row["error"]["signature"]
    assert "javascript:" not in json.dumps({k: v for k, v in details.items() if k != "claims_dropped"})


# ------------------------------------------------------------------ the parent's reading, unit by unit


@pytest.mark.parametrize(
    "content, problem",
    [
        (b"{not json\xff", "not valid JSON"),
        (b'{"cosine": NaN}', "not valid JSON"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON"),
        (b" " * (RESULT_MAX_BYTES + 1), "over the cap"),
    ],
)
def test_bad_result_files_are_refused_with_a_reason(tmp_path, content, problem):
    path = tmp_path / "result.json"
    path.write_bytes(content)
    value, why = read_json_file(path, RESULT_MAX_BYTES)
    assert value is None and problem in why


def test_links_fifos_and_foreign_owners_are_never_read(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text('{"secret": 1}')
    link = tmp_path / "result.json"
    link.symlink_to(secret)
    assert "cannot be opened safely" in read_json_file(link, 100)[1]
    link.unlink()
    os.link(secret, link)
    assert "hard links" in read_json_file(link, 100)[1]
    link.unlink()
    os.mkfifo(link)  # a FIFO nobody writes: refused at once, never waited on
    assert "not a regular file" in read_json_file(link, 100)[1]
    link.unlink()
    link.write_text("{}")
    assert "belongs to uid" in read_json_file(link, 100, owner=os.geteuid() + 1)[1]
    assert read_json_file(tmp_path / "absent.json", 100) == (None, None)


def test_identity_comes_from_the_request_and_precision_from_the_child_only_at_auto():
    from tests.plugins.forger import forged_identity

    auto = trusted_result(ValidationRequest("org/real", backend="cpu", revision="abc"), forged_identity())
    assert (auto["model_id"], auto["revision"], auto["backend"], auto["tier"], auto["precision"]) == (
        "org/real",
        "abc",
        "cpu",
        "tiny",
        "bf16",
    )
    assert (
        auto["repro"].startswith("zoo validate org/real")
        and auto["details"]["seed"] == 0
        and "sandbox" not in auto["details"]
    )
    flagged = trusted_result(ValidationRequest("org/real", backend="cpu", precision="fp16"), forged_identity())
    assert flagged["precision"] == "fp16" and flagged["details"]["precision_source"] == "flag"
    for bad in (
        {"status": "owned"},
        {"metrics": {"cosine": "1.0"}},
        {"fallback_ops": [1]},
        {"hacked": True},
        {"error": {"message": 3}},
        {"reason": "because"},
    ):
        with pytest.raises(BadResult):
            trusted_result(ValidationRequest("org/real"), {**forged_identity(), **bad})
    with pytest.raises(BadResult):
        trusted_result(ValidationRequest("org/real"), ["not", "an", "object"])


# ------------------------------------------------------------------ environment, modes, doctor


def test_the_environment_is_an_allowlist(monkeypatch):
    for name in SECRETS:
        monkeypatch.setenv(name, "s3cret")
    monkeypatch.setenv("TORCHINDUCTOR_MAX_AUTOTUNE", "0")
    monkeypatch.setenv("NEURON_CC_FLAGS", "--auto-cast=none")
    monkeypatch.setenv("MY_PLUGIN_SETTING", "1")
    monkeypatch.setenv("ZOO_SANDBOX_ENV", "MY_PLUGIN_SETTING,MY_SERVICE_TOKEN")
    env = sandbox.base_env()
    assert not [k for k in SECRETS if k in env] and "s3cret" not in env.values()
    assert env["TORCHINDUCTOR_MAX_AUTOTUNE"] == "0" and env["NEURON_CC_FLAGS"] == "--auto-cast=none"
    assert env["MY_PLUGIN_SETTING"] == "1"  # named in ZOO_SANDBOX_ENV; the token there is refused
    assert env["HF_HUB_OFFLINE"] == "1" and "PATH" in env


def test_strict_refuses_cleanly_when_a_protection_is_missing(monkeypatch, capsys):
    sandbox.capabilities.cache_clear()
    lacking = {
        "root": True,
        "missing": ["netns", "mountns"],
        "errors": {"namespaces": "unshare: Operation not permitted"},
    }
    monkeypatch.setattr(sandbox, "capabilities", lambda *a: lacking)
    monkeypatch.setenv("ZOO_SANDBOX", "strict")
    with pytest.raises(SandboxUnavailable, match=r"netns \(unshare: Operation not permitted\), mountns"):
        run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=60))
    from zoo.cli import main

    assert main(["validate", "arch:BertModel", "--backend", "cpu", "--no-store"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("zoo: error: ZOO_SANDBOX=strict") and "zoo doctor" in err[0]


def test_best_effort_says_what_is_missing_in_one_line(monkeypatch, tmp_path, caplog):
    lacking = {
        "root": False,
        "missing": ["uid", "netns", "mountns"],
        "errors": {"namespaces": "unshare: Operation not permitted"},
    }
    monkeypatch.setattr(sandbox, "capabilities", lambda *a: lacking)
    monkeypatch.setattr(sandbox, "_WARNED", set())
    monkeypatch.setenv("ZOO_SANDBOX", "best_effort")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with caplog.at_level("WARNING", logger="zoo_runner.sandbox"):
        run, _ = sandbox.prepare_run(ValidationRequest("arch:BertModel", reference_cache=""), str(run_dir), 1 << 30)
        sandbox.prepare_run(ValidationRequest("arch:BertModel", reference_cache=""), str(tmp_path), 1 << 30)
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "netns" in warnings[0] and "\n" not in warnings[0]
    assert run.plan.hide == [] and run.plan.mode == "best_effort"  # no mount namespace: nothing to hide with


def test_a_bad_mode_is_one_clear_error(monkeypatch):
    monkeypatch.setenv("ZOO_SANDBOX", "sometimes")
    from zoo_runner.exceptions import BadInput

    with pytest.raises(BadInput, match="ZOO_SANDBOX must be one of off, best_effort, strict"):
        sandbox.mode()


def test_fetched_files_are_staged_without_the_token(tmp_path):
    snap = tmp_path / "snapshot"
    (snap / "1_Pooling").mkdir(parents=True)
    (snap / "config.json").write_text("{}")
    (snap / "1_Pooling" / "config.json").write_text("{}")
    (tmp_path / "token").write_text("hf_x")
    dest = tmp_path / "staged"
    assert sandbox._stage_files(str(snap), dest) == 2
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == [
        "1_Pooling/config.json",
        "config.json",
    ]


def test_doctor_prints_what_this_machine_allows_and_no_secret(tmp_path):
    env = cli_env(
        ZOO_DATABASE_URL="postgresql://zoo:hunter2@127.0.0.1:5432/zoo",
        ZOO_BROKER_URL="redis://:hunter2@127.0.0.1:6379/0",
        HF_TOKEN="hf_hunter2",
    )
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "doctor"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "hunter2" not in out + proc.stderr
    for needle in (
        "sandbox (ZOO_SANDBOX=best_effort",
        "network namespace",
        "no_new_privs",
        "cpu+inductor",
        "database",
        "broker",
        "HF_TOKEN set",
    ):
        assert needle in out, needle
    assert re.search(r"cpu +available +fp32", out)
    facts = json.loads(
        subprocess.run(
            [sys.executable, "-m", "zoo.cli", "doctor", "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        ).stdout
    )
    assert {"sandbox", "backends", "services"} <= set(facts)


def test_hub_files_are_shown_read_only_and_the_token_never(monkeypatch, tmp_path):
    """With a mount namespace the model sees its repo's directory of the Hub cache (snapshots link
    into its blobs), read-only, under an HF_HOME of its own: never the cache's token."""
    full = {"root": True, "missing": [], "pidns": True, "private_proc": True}
    monkeypatch.setattr(sandbox, "capabilities", lambda *a: full)
    monkeypatch.setenv("ZOO_SANDBOX", "best_effort")
    monkeypatch.setenv("ZOO_COMPILE_CACHE", str(tmp_path / "compile"))
    hub = tmp_path / "hf" / "hub"
    snap = hub / "models--org--name" / "snapshots" / ("a" * 40)
    snap.mkdir(parents=True)
    (hub.parent / "token").write_text("hf_x")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    run, child = sandbox.prepare_run(
        ValidationRequest("org/name", tier="full", files_dir=str(snap), reference_cache=""), str(run_dir), 1 << 30
    )
    assert run.plan.ro_binds == [
        [str(hub / "models--org--name"), str(run.work / "hf_home" / "hub" / "models--org--name")]
    ]
    assert child.files_dir == str(run.work / "hf_home" / "hub" / "models--org--name" / "snapshots" / ("a" * 40))
    assert run.plan.env["HF_HOME"] == str(run.work / "hf_home") and run.setup["hf_home"] == "bound read-only"
    assert json.loads(run.request.read_text())["files_dir"] == child.files_dir
    compile_dir = run.plan.env["TORCHINDUCTOR_CACHE_DIR"]
    assert (
        compile_dir.startswith(str(run.work / "cache"))
        and [str(tmp_path / "compile" / run.namespace), str(run.work / "cache" / "compile")] in run.plan.binds
    )


def test_a_cpu_time_rlimit_kill_is_a_timeout():
    import signal

    from zoo_runner.launcher import _failure_result

    r = _failure_result(ValidationRequest("arch:BertModel", timeout_s=30), -signal.SIGXCPU, False, "target", "", 31.0)
    assert (
        r["status"] == "timeout" and "CPU time budget" in r["error"]["message"] and r["details"]["signal"] == "SIGXCPU"
    )


@needs_root
def test_the_model_process_sees_no_other_process(tmp_path, monkeypatch):
    """A PID namespace with its own /proc: the model is pid 2 (its init is 1), and no process of the
    host (this test, the forkserver, PostgreSQL) is in its /proc."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    req = ValidationRequest(
        "arch:BertModel", backend="cpu+zoo_pidview", timeout_s=180, plugins="tests.plugins.pidview", reference_cache=""
    )
    row = run_isolated(req)
    assert row["details"]["sandbox"]["pidns"] and row["details"]["sandbox"]["private_proc"], row["details"]["sandbox"]
    m = re.search(r"ZOO-PIDVIEW<<(.*?)>>", row["error"]["message"], re.S)
    assert m, row["error"]
    seen = json.loads(m.group(1))
    assert seen["self"] == 2 and seen["pids"] == [1, 2], seen  # itself and its init, nothing else
    assert os.getpid() > 2 and len([p for p in os.listdir("/proc") if p.isdigit()]) > 10  # the host has many


@pytest.mark.parametrize("mode", ["off", "best_effort"])
def test_doctor_says_what_each_mode_leaves_out(tmp_path, mode):
    env = cli_env(ZOO_SANDBOX=mode)
    proc = subprocess.run(
        [sys.executable, "-m", "zoo.cli", "doctor"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "process limit (ZOO_SANDBOX_NPROC) counts every model process" in out
    if mode == "off":
        assert "NOT APPLIED" in out and "none of the above is applied" in out
        assert "full sandbox available" not in out
    else:
        assert "NOT APPLIED" not in out
        assert ("full sandbox available and applied" in out) != ("best_effort runs models without them" in out)


def test_a_model_process_that_fills_the_disk_is_killed_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("ZOO_SANDBOX_DISK_MB", "48")
    monkeypatch.setenv("ZOO_COMPILE_CACHE", str(tmp_path / "compiled"))
    req = ValidationRequest(
        "arch:BertModel", backend="cpu+zoo_diskhog", timeout_s=300, plugins="tests.plugins.diskhog", reference_cache=""
    )
    row = run_isolated(req)
    assert row["status"] == "crash" and row["error"]["type"] == "DiskLimit", (row["status"], row["error"])
    assert 48 <= row["details"]["disk_written_mb"] < 48 + 400  # MB rounded down: killed past 48 MiB, row["details"]
    assert "ZOO_SANDBOX_DISK_MB" in row["error"]["message"] and row["duration_s"] < 120


def _hog(kind: str, mb: int, memory_gb: float = 4.0) -> dict:
    req = ValidationRequest(
        "arch:BertModel",
        backend="cpu+zoo_hog",
        timeout_s=120,
        memory_gb=memory_gb,
        precision="fp32",
        extras={"hog": kind, "mb": mb},
        plugins="tests.plugins.hog",
    )
    return run_isolated(req)


@needs_root
def test_memory_written_into_memfds_counts_against_the_budget(monkeypatch):
    """1.2 GB written into memfds (shared memory: RLIMIT_DATA never sees it) under a 1 GB budget ends
    the model process as ``oom``, from its cgroup's own counter."""
    from zoo_runner import cgroups

    if cgroups.mode() == "none":
        pytest.skip("this machine gives no cgroup with memory and pids (zoo doctor says so)")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    row = _hog("memfd", 1200, memory_gb=1)
    assert row["status"] == "oom", (row["status"], row["error"])
    assert "OOM killer" in row["error"]["message"] and "1 GiB" in row["error"]["message"]
    assert row["details"]["sandbox"]["cgroup"]["memory_mb"] == 1024


@needs_root
@pytest.mark.parametrize("kind", ["stderr", "unlinked"])
def test_stderr_and_unlinked_files_count_toward_the_disk_cap(kind, monkeypatch):
    """300 MB written to stderr, or to a file unlinked while held open, with a 100 MB disk cap: killed
    as the disk cap says."""
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    monkeypatch.setenv("ZOO_SANDBOX_DISK_MB", "100")
    row = _hog(kind, 300)
    assert row["status"] == "crash" and row["error"]["type"] == "DiskLimit", (row["status"], row["error"])
    assert "over the 100 MB" in row["error"]["message"] and row["details"]["disk_written_mb"] > 100
