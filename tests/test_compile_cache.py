"""Compiled artefacts persist under ZOO_COMPILE_CACHE and are shared by a worker's model processes:
the second validation of the same model finds inductor's FX graph cache warm, and says so."""

from __future__ import annotations

import dataclasses

from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest


def test_the_second_compile_of_a_model_hits_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_COMPILE_CACHE", str(tmp_path / "compile"))
    # `zoo run` gives each of its two model processes one thread, `zoo validate` every core: a thread
    # count compiled into the kernels made them miss each other's entries
    req = ValidationRequest("arch:BertModel", backend="cpu+inductor", timeout_s=600, reference_cache="", threads=1)
    first = run_isolated(req)
    second = run_isolated(dataclasses.replace(req, threads=2))
    assert first["status"] == second["status"] == "pass", (first["error"], second["error"])
    assert (first["details"]["threads"], second["details"]["threads"]) == (1, 2)
    assert (first["details"]["compile_cache"], second["details"]["compile_cache"]) == ("miss", "hit")
    assert any((tmp_path / "compile").rglob("*")), "nothing was written under ZOO_COMPILE_CACHE"
    # inductor's precompiled headers too: left in each model process's own TMPDIR, every process
    # rebuilt them on a cache hit (most of a warm compile)
    assert list((tmp_path / "compile").rglob("precompiled_headers/*.gch")), "precompiled headers not in the cache"
