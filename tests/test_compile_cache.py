"""Compiled artefacts persist under ZOO_COMPILE_CACHE and are shared by a worker's model processes:
the second validation of the same model finds inductor's FX graph cache warm, and says so."""

from __future__ import annotations

import dataclasses
import json
import stat

from zoo_runner import sandbox, shared_headers
from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest


def test_the_second_compile_of_a_model_hits_the_cache(tmp_path, monkeypatch):
    """Over 60 s in CI (two workers on two cores): three inductor compiles of BertModel in model processes (miss,
    hit, miss), the first with no shared headers built yet."""
    monkeypatch.setenv("ZOO_COMPILE_CACHE", str(tmp_path / "compile"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # Zoo's shared inductor headers: none yet
    # `zoo run` gives each of its two model processes one thread, `zoo validate` every core: a thread
    # count compiled into the kernels made them miss each other's entries
    req = ValidationRequest("arch:BertModel", backend="cpu+inductor", timeout_s=600, reference_cache="", threads=1)
    start = shared_headers._start
    monkeypatch.setattr(shared_headers, "_start", lambda *a: None)  # as if no shared build were ready in time
    first = run_isolated(req)
    monkeypatch.setattr(shared_headers, "_start", start)
    assert first["details"]["sandbox"]["inductor_headers"] == "its own (no shared build is ready)"
    assert first["details"]["inductor_headers_built"] >= 1
    # inductor's precompiled headers: the first process, before Zoo's shared build was done, built its own
    # into its namespace (left in its own TMPDIR, every process rebuilt them on a cache hit)
    assert list((tmp_path / "compile").rglob("precompiled_headers/*.gch")), "precompiled headers not in the cache"
    shared = sandbox.shared_headers_dir() / shared_headers.key()
    assert not shared.exists()

    # the next model process starts the shared build and waits for it (the bound is not what is tested here:
    # a loaded machine may take longer than the 90 s a run waits)
    monkeypatch.setattr(shared_headers, "WAIT_S", 600.0)
    second = run_isolated(dataclasses.replace(req, threads=2))
    assert list(shared.glob("*.gch")), f"Zoo's shared headers were not built in {shared}"
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o444 for p in shared.iterdir())
    probes = json.loads((shared / "done").read_text())["isa_probes"]
    assert probes and all((shared / name).is_file() for name in probes), probes
    assert first["status"] == second["status"] == "pass", (first["error"], second["error"])
    assert (first["details"]["threads"], second["details"]["threads"]) == (1, 2)
    assert (first["details"]["compile_cache"], second["details"]["compile_cache"]) == ("miss", "hit")
    assert second["details"]["sandbox"]["inductor_headers"] == "shared, read-only"
    assert second["details"]["sandbox"]["inductor_headers_waited_s"] > 0  # said, and part of its duration
    assert any((tmp_path / "compile").rglob("*")), "nothing was written under ZOO_COMPILE_CACHE"

    # a cold compile (another compile cache) with the shared headers builds none of its own
    monkeypatch.setenv("ZOO_COMPILE_CACHE", str(tmp_path / "compile2"))
    third = run_isolated(req)
    assert third["status"] == "pass" and third["details"]["compile_cache"] == "miss", third["error"]
    assert third["details"]["sandbox"]["inductor_headers"] == "shared, read-only"
    assert third["details"]["inductor_headers_built"] == 0, "the model process built its own headers"
    # and it loaded Zoo's ISA probes instead of compiling them (byte for byte the builder's)
    assert third["details"]["inductor_isa_probes_copied"] == len(probes)
    for name, rel in probes.items():
        copies = list((tmp_path / "compile2").rglob(rel))
        assert len(copies) == 1 and copies[0].read_bytes() == (shared / name).read_bytes(), rel


def test_isa_probe_copies_replace_what_is_not_the_builders(tmp_path):
    """A copy cut short (a killed process, a full disk) or a link in the model's namespace would be
    taken by inductor as its probe: the next run replaces it whole with the builder's bytes, and only
    byte-identical copies count as already loaded."""
    shared, cache = tmp_path / "shared", tmp_path / "cache"
    shared.mkdir()
    probes = {"isa-ab-cabc.so": "ab/cabc.so", "isa-cd-ccd.so": "cd/ccd.so", "isa-x.so": "../../escape.so"}
    for name in probes:
        (shared / name).write_bytes(b"\x7fELF" + name.encode() * 100)
    (shared / "done").write_text(json.dumps({"isa_probes": probes}))
    (cache / "ab").mkdir(parents=True)
    (cache / "ab" / "cabc.so").write_bytes(b"\x7fELF")  # cut short
    (cache / "cd").mkdir()
    (cache / "cd" / "ccd.so").symlink_to(tmp_path / "elsewhere.so")  # a link (dangling)
    assert shared_headers.probes_as_built(str(shared), str(cache)) == set()

    assert shared_headers.copy_isa_probes(str(shared), str(cache)) == 2
    for name, rel in list(probes.items())[:2]:
        dest = cache / rel
        assert not dest.is_symlink() and dest.read_bytes() == (shared / name).read_bytes()
    assert not (tmp_path / "escape.so").exists() and not (tmp_path / "elsewhere.so").exists()
    assert not list(cache.rglob(".zoo-probe-*"))  # no temporary file left
    assert shared_headers.probes_as_built(str(shared), str(cache)) == {
        str((cache / rel).resolve()) for rel in ("ab/cabc.so", "cd/ccd.so")
    }
    assert shared_headers.copy_isa_probes(str(shared), str(cache)) == 0  # already there: nothing copied
