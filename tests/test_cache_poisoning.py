"""A hostile model process cannot change another model's verdict (docs/SPEC.md, "Caches no model
can poison"): not through the reference or compile caches, not through an inherited pipe to a root
process, not by writing its own result. And the parent's preparation of the shared caches never
re-owns anything outside them, however a process of the sandbox uid races it."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
import torch

import zoo_runner
from tests.conftest import child_env, run_zoo
from zoo_runner import cache_trust, sandbox, shared_headers
from zoo_runner.request import ValidationRequest

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the uid switch needs root (CI runs as root)")


def _tree(root: Path) -> dict[str, str]:
    """Every regular file under ``root``: its sha256 (links and their targets are not followed)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_symlink():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _validate(model: str, backend: str, env: dict[str, str], cwd: Path) -> dict:
    proc = run_zoo(["validate", model, "--backend", backend, "--tier", "tiny", "--json"], env, cwd, timeout=600)
    assert proc.stdout.strip(), proc.stderr[-3000:]
    return json.loads(proc.stdout)


@needs_root
def test_a_hostile_model_changes_no_other_verdict(tmp_path):
    """Over 60 s in CI (two workers on two cores): five sandboxed validations in turn, two through inductor, each a
    CLI process; the attack and the victim must share real caches."""
    refs, compiled, db = tmp_path / "refs", tmp_path / "compiled", tmp_path / "zoo.db"
    shm_name = f"/zoo-victim-{uuid.uuid4().hex[:8]}"
    shm = Path("/dev/shm") / shm_name.lstrip("/")
    shm.write_bytes(b"root's")  # a root-owned /dev/shm entry made before the run
    os.chmod(shm, 0o600)
    env = child_env(
        ZOO_REFERENCE_CACHE=str(refs),
        ZOO_COMPILE_CACHE=str(compiled),
        ZOO_DATABASE_URL=f"sqlite:///{db}",
        ZOO_SANDBOX="best_effort",
        XDG_CACHE_HOME=str(tmp_path / "xdg"),  # where Zoo keeps its shared inductor headers
    )
    headers = tmp_path / "xdg" / "zoo" / "inductor-headers"  # built here, before the attack
    built = subprocess.run(
        [sys.executable, "-m", "zoo_runner.shared_headers", str(headers), shared_headers.key()],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-2000:]
    before_headers = _tree(headers / shared_headers.key())
    assert any(k.endswith(".gch") for k in before_headers), before_headers
    try:
        # model B on cpu+inductor: its reference and compiled graphs land in the shared caches
        first = _validate("arch:BertModel", "cpu+inductor", env, tmp_path)
        assert first["status"] == "pass", first["error"]
        assert first["details"]["reference_cache"] == "stored" and first["details"]["compile_cache"] == "miss"
        victim_ns = cache_trust.namespace("arch:BertModel", None, "")
        victim_key = next((refs / victim_ns).glob("*.safetensors")).stem
        before_refs, before_compiled = _tree(refs / victim_ns), _tree(compiled / victim_ns)
        assert before_refs and any(k.endswith(".py") for k in before_compiled), before_compiled

        # model A with a hostile compile backend, in Zoo's default sandbox, Zoo exiting after it
        hostile = {
            **env,
            "ZOO_PLUGINS": "tests.plugins.poisoner",
            "ZOO_SANDBOX_ENV": "ZOO_POISON_TARGETS,ZOO_POISON_SHM,ZOO_POISON_KEY",
            "ZOO_POISON_TARGETS": f"{refs}:{compiled}:{refs / victim_ns}:{compiled / victim_ns}:{headers}",
            "ZOO_POISON_SHM": shm_name,
            "ZOO_POISON_KEY": victim_key,
        }
        forged = _validate("arch:GPT2Model", "cpu+zoo_poison", hostile, tmp_path)
        assert forged["status"] == "crash" and forged["error"]["type"] == "BadResult", forged["error"]
        assert forged["model_id"] == "arch:GPT2Model"
        assert forged["versions"]["torch"] == torch.__version__ and forged["versions"]["zoo"] == zoo_runner.__version__
        assert "reference_published" not in forged["details"]  # a forged run publishes nothing
        stored = (
            sqlite3.connect(db)
            .execute("SELECT status, versions FROM results WHERE model_id = 'arch:GPT2Model'")
            .fetchall()
        )
        assert [(s, json.loads(v)["torch"]) for s, v in stored] == [("crash", torch.__version__)]

        # what it reached was its own namespace at most: B's entries are byte for byte what B wrote
        assert _tree(refs / victim_ns) == before_refs
        assert _tree(compiled / victim_ns) == before_compiled
        assert not list(refs.rglob("planted.py")) and not list(compiled.glob("planted.py"))
        assert _tree(headers / shared_headers.key()) == before_headers and not list(headers.rglob("planted.py"))

        # B again, reading both caches: still a pass, from the cached reference and compiled graphs
        again = _validate("arch:BertModel", "cpu+inductor", env, tmp_path)
        assert again["status"] == "pass", again["error"]
        assert again["details"]["reference_cache"] == "hit" and again["details"]["compile_cache"] == "hit"
        assert again["metrics"]["max_abs_diff"] == first["metrics"]["max_abs_diff"]
        assert first["details"]["sandbox"]["inductor_headers"] == "shared, read-only"
        # a cpu+inductor model process, shown the shared headers, attacks them as it loads its plugins
        on_import = {**hostile, "ZOO_POISON_ON_IMPORT": "1"}
        on_import["ZOO_SANDBOX_ENV"] += ",ZOO_POISON_ON_IMPORT"
        forged = _validate("arch:DistilBertModel", "cpu+inductor", on_import, tmp_path)
        said = next(ln for ln in (forged["error"]["traceback"] or "").splitlines() if "ZOO-POISON" in ln)
        tried = json.loads(said.split("ZOO-POISON ", 1)[1])
        assert tried["headers_refused"] > 0 and tried["headers_rewritten"] == 0, tried
        assert _tree(headers / shared_headers.key()) == before_headers and not list(headers.rglob("planted.py"))
        # Zoo has exited (and its resource tracker with it): the root-owned entry is still there
        assert shm.exists() and shm.read_bytes() == b"root's"
    finally:
        shm.unlink(missing_ok=True)


def test_a_tampered_reference_is_a_miss_logged_and_deleted(tmp_path, caplog):
    """The MAC, not the file system alone: an entry changed behind the parent's back is never used."""
    req = ValidationRequest("arch:BertModel", backend="cpu", timeout_s=300, reference_cache=str(tmp_path))
    from zoo_runner.launcher import run_isolated

    first = run_isolated(req)
    assert first["details"]["reference_cache"] == "stored", first["details"]
    ns = tmp_path / cache_trust.namespace("arch:BertModel", None, req.plugins)
    entry = next(ns.glob("*.safetensors"))
    data = bytearray(entry.read_bytes())
    data[-4:] = b"\x00\x00\xc0\x3f"  # one float rewritten in place
    entry.write_bytes(bytes(data))
    second = run_isolated(req)
    assert second["details"]["reference_cache"] == "stored" and second["status"] == "pass"
    assert "MAC does not match" in caplog.text
    third = run_isolated(req)
    assert third["details"]["reference_cache"] == "hit"


def test_the_parent_publishes_only_what_checks_out(tmp_path):
    import torch
    from safetensors.torch import save_file

    outbox, refs = tmp_path / "out", tmp_path / "refs"
    outbox.mkdir()
    ns = cache_trust.namespace("org/a", None, "")
    ns_dir = cache_trust.reference_namespace(str(refs), ns)

    def entry(name, tensors, meta):
        save_file(tensors, str(outbox / name), metadata={"zoo": json.dumps(meta)})

    good = {"keys32": [["y"]], "keys64": [], "same64": True, "op_census": {"aten::mm": 1}, "fp64": True}
    entry("a" * 64 + ".safetensors", {"32/0/y": torch.ones(3)}, good)
    entry("b" * 64 + ".safetensors", {"32/0/y": torch.tensor([1.0, float("nan")])}, good)
    entry("c" * 64 + ".safetensors", {"32/0/z": torch.ones(3)}, good)
    entry("d" * 64 + ".safetensors", {"32/0/y": torch.ones(3)}, {**good, "keys32": [["y"], ["y"]]})
    (outbox / "e").write_text("x")
    os.symlink("/etc/passwd", outbox / ("f" * 64 + ".safetensors"))
    out = cache_trust.publish(outbox, ns_dir, ns, None, inputs=1)
    assert out["a" * 64] == "published"
    assert "not finite" in out["b" * 64]
    assert "not the ones its metadata names" in out["c" * 64]
    assert "2 output sets for 1 inputs" in out["d" * 64]
    assert out["e"].startswith("refused") and out["f" * 64].startswith("refused")
    assert sorted(p.name for p in ns_dir.iterdir()) == ["a" * 64 + ".safetensors", "a" * 64 + ".safetensors.mac"]
    # another model's namespace never sees it
    other = cache_trust.reference_namespace(str(refs), cache_trust.namespace("org/b", None, ""))
    assert list(other.iterdir()) == []
    # moved to another key, the MAC no longer matches: dropped
    (ns_dir / ("a" * 64 + ".safetensors")).rename(ns_dir / ("9" * 64 + ".safetensors"))
    (ns_dir / ("a" * 64 + ".safetensors.mac")).rename(ns_dir / ("9" * 64 + ".safetensors.mac"))
    cache_trust.reference_namespace(str(refs), ns)
    assert list(ns_dir.iterdir()) == []


RACER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
pairs = [tuple(p.split("|")) for p in sys.argv[2:]]
end = time.time() + float(sys.argv[1])
n = 0
while time.time() < end:
    for a, b in pairs:  # renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
        n += libc.syscall(316, -100, a.encode(), -100, b.encode(), 2) == 0
print(n)
"""


SYSTEM_PYTHON = "/usr/bin/python3"


@needs_root
@pytest.mark.skipif(not os.access(SYSTEM_PYTHON, os.X_OK), reason="the racer runs on the system's Python")
def test_the_chown_race_never_reowns_anything_outside_the_cache(monkeypatch):
    """A process of the sandbox uid swaps cache directories with symbolic links to a root-owned
    directory while the parent prepares runs; the root-owned directory keeps its owner."""
    uid, gid = sandbox.sandbox_ids()
    base = Path(tempfile.mkdtemp(prefix="zoo-race-"))
    try:
        os.chmod(base, 0o755)
        victim = base / "victim"
        victim.mkdir()
        (victim / "file").write_text("root's")
        refs, compiled = base / "refs", base / "compiled"
        req = ValidationRequest("arch:BertModel", backend="cpu", reference_cache=str(refs), plugins="")
        ns = cache_trust.namespace(req.model_id, None, "")
        pairs = []
        for root in (refs, compiled):  # as an older Zoo left them: the sandbox uid's own
            for name in (ns, "ab", "inductor"):
                (root / name).mkdir(parents=True)
                os.symlink(victim, root / f"{name}-link")
                pairs.append(f"{root / name}|{root / (name + '-link')}")
            os.chown(root, uid, gid)
            for p in root.iterdir():
                os.lchown(p, uid, gid)
        monkeypatch.setenv("ZOO_COMPILE_CACHE", str(compiled))
        racer = subprocess.Popen(  # the system's Python: the venv's lies under /root, out of the uid's reach
            [SYSTEM_PYTHON, "-I", "-c", RACER, "3", *pairs],
            user=uid,
            group=gid,
            extra_groups=[],
            stdout=subprocess.PIPE,
            text=True,
        )
        prepared = refused = 0
        time.sleep(0.5)
        while racer.poll() is None:
            with tempfile.TemporaryDirectory(prefix="zoo-run-") as tmp:
                try:
                    sandbox.prepare_run(req, tmp, 1 << 30)
                    prepared += 1
                except OSError:  # a cache swapped for a link is refused, never followed
                    refused += 1
        assert int(racer.stdout.read().strip() or 0) > 0, "the racer never swapped anything"
        assert prepared + refused > 0
        for p in (victim, victim / "file"):
            st = os.lstat(p)
            assert (st.st_uid, st.st_gid) == (0, 0), f"{p} re-owned to {st.st_uid}:{st.st_gid}"
        for root in (refs, compiled):  # the parent took its roots back
            assert os.lstat(root).st_uid == 0
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)


def test_a_deep_tree_is_measured_as_too_much_and_removed(tmp_path):
    root = tmp_path / "compiled"
    root.mkdir()
    ns = root / ("a" * 32)
    ns.mkdir()
    d = os.open(ns, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(1500):  # deeper than any recursion limit
        os.mkdir("d", dir_fd=d)
        nxt = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=d)
        os.close(d)
        d = nxt
    os.symlink("/etc", "etc-link", dir_fd=d)
    os.close(d)
    fd = os.open(ns, os.O_RDONLY | os.O_DIRECTORY)
    try:
        assert cache_trust.tree_bytes(fd) == cache_trust.TOO_MUCH
    finally:
        os.close(fd)
    assert cache_trust.prune_compile_cache(str(root), 1 << 30) == ["a" * 32]  # over any cap: first to go
    assert list(root.iterdir()) == [] and Path("/etc/passwd").exists()


def test_prune_goes_by_the_parents_stamps_not_the_models_mtime(tmp_path):
    root = tmp_path / "compiled"
    names = [cache_trust.namespace(f"org/m{i}", None, "") for i in range(3)]
    for ns in names:
        path = cache_trust.compile_namespace(str(root), ns, None, None)
        (path / "blob").write_bytes(os.urandom(64 << 10))
        time.sleep(0.05)
    os.utime(root / names[0], (4102444800, 4102444800))  # the model's own "used in 2100"
    removed = cache_trust.prune_compile_cache(str(root), 150 << 10, keep=names[2])
    assert removed == [names[0]], removed  # the least recently used by the parent's stamps


def test_a_root_taken_back_keeps_nothing_a_model_could_have_planted(tmp_path):
    root = tmp_path / "refs"
    root.mkdir()
    for name in ("ab", "inductor", ".zoo-mac-key", "c" * 32):
        (root / name).mkdir()
    (root / "notes.txt").write_text("the operator's")
    os.chown(root, 65533, 65533)
    if os.geteuid() != 0:
        pytest.skip("taking a root back from another uid needs root")
    ns_dir = cache_trust.reference_namespace(str(root), "d" * 32)
    assert sorted(p.name for p in root.iterdir()) == [".zoo-mac-key", "d" * 32, "notes.txt"]
    assert (root / ".zoo-mac-key").is_file() and os.stat(root).st_uid == 0 and ns_dir.is_dir()


def _exit_status_through_the_shim(code: str) -> int:
    """Run ``code`` as the model behind a real shim and init (a PID namespace), as root."""
    pid = os.fork()
    if pid == 0:
        try:
            from zoo_runner import sandbox_linux

            sandbox_linux.unshare(sandbox_linux.CLONE_NEWNS)
            sandbox_linux.enter_pid_namespace(0)
            import faulthandler

            faulthandler.disable()  # pytest's would print the model's SIGSEGV as if it were the test's
            exec(code)
        finally:
            os._exit(3)
    return os.waitpid(pid, 0)[1]


@needs_root
@pytest.mark.parametrize(
    "code, ends",
    [
        ("os._exit(7)", ("exit", 7)),
        ("os.kill(os.getpid(), 11)", ("signal", 11)),
        ("os.kill(os.getpid(), 9)", ("signal", 9)),
        ("assert os.getpid() == 2; os._exit(0)", ("exit", 0)),
    ],
)
def test_the_shim_ends_as_the_model_did(code, ends):
    status = _exit_status_through_the_shim(code)
    got = ("signal", os.WTERMSIG(status)) if os.WIFSIGNALED(status) else ("exit", os.WEXITSTATUS(status))
    assert got == ends


def test_the_parent_recomputes_the_verdict_from_the_measurements():
    from zoo_runner import verdict
    from zoo_runner.result_schema import BadResult

    req = ValidationRequest("arch:BertModel", backend="cpu")
    good = {"max_abs_diff": 1e-6, "rmse_ratio": 1.1, "cosine": 1.0}

    def row(status, metrics, use, fallbacks=()):
        return {"status": status, "metrics": metrics, "details": {"budget_use": use}, "fallback_ops": list(fallbacks)}

    r = row("pass", good, 0.5)
    verdict.decide(req, r)
    assert r["status"] == "pass"
    r = row("pass", good, 3.0)
    verdict.decide(req, r)
    assert r["status"] == "mismatch" and "3x their error budget" in r["error"]["message"]
    r = row("pass", good, 0.5, ["aten::mm"])
    verdict.decide(req, r)
    assert r["status"] == "pass_with_fallback" and r["details"]["verdict"] == "parent"
    for metrics, use in (({**good, "cosine": None}, 0.5), (good, None), ({}, 0.1)):
        with pytest.raises(BadResult, match="without its measurements"):
            verdict.decide(req, row("pass", metrics, use))
    census = ValidationRequest("arch:BertModel", backend="cpu", tier="census")
    r = row("pass", {}, None)
    verdict.decide(census, r)  # the census compares nothing
    assert r["status"] == "pass"
