"""Model processes run at once share the cores: each one's torch gets its share of threads, not
one per core each (two such processes on two cores made a tiny EfficientNet 15x slower)."""

from __future__ import annotations

import os

import pytest

from zoo_runner.launcher import run_isolated
from zoo_runner.request import ValidationRequest, share_of_cores


@pytest.mark.parametrize(("cores", "jobs", "threads"), [(2, 2, 1), (16, 4, 4), (2, 3, 1), (8, 1, None)])
def test_the_cores_are_shared_out_among_the_jobs(monkeypatch, cores, jobs, threads):
    monkeypatch.delenv("ZOO_MODEL_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert share_of_cores(jobs) == threads


def test_zoo_model_threads_overrides_the_share(monkeypatch):
    monkeypatch.setenv("ZOO_MODEL_THREADS", "3")
    assert share_of_cores(1) == share_of_cores(8) == 3


def test_a_model_process_runs_with_the_threads_it_was_given(monkeypatch):
    monkeypatch.delenv("ZOO_MODEL_THREADS", raising=False)
    one = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", threads=1, reference_cache=""))
    assert one["status"] == "pass", one["error"]
    assert one["details"]["threads"] == 1
    monkeypatch.setenv("ZOO_MODEL_THREADS", "2")  # the launcher fills a request that names none
    two = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", reference_cache=""))
    assert two["details"]["threads"] == 2
