"""What a newcomer tripped on (issue 13, point 8): encoded API links and 422 for unknown backend
specs, coverage and reports that a small synced CSV does not empty, port validation, and a main job
that says what it is doing before its first model finishes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import time
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from db import queries, repository
from db.repository import CatalogEntry
from db.session import session_scope
from tests.conftest import child_env, free_port
from tests.test_api_analytics import W48, seed_history
from tests.test_storage import _result
from zoo.progress import progress_bar
from zoo_runner.backends import spec_problem
from zoo_runner.launcher import stage_listener
from zoo_runner.result import ValidationResult


@pytest.fixture
def client(database_url, monkeypatch):
    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    queries.clear_cache()
    seed_history()  # neuron and cuda+inductor results of 2026-W47/W48 over org/m0..m9
    from api.app import create_app

    return TestClient(create_app())


# ---------------------------------------------------------------- encoded links, 422 for bad specs


def test_report_links_encode_the_backend_and_reproduce_its_numbers(client):
    from dashboards.report import render_markdown
    from services.reports import build_report

    rep = build_report(week="2026-W48", backend="cuda+inductor", tier="tiny")
    assert rep["queries"]["headline"] == "/api/v1/coverage?backend=cuda%2Binductor&tier=tiny&week=2026-W48"
    md = render_markdown(rep)
    assert "backend=cuda+inductor" not in md and "backend=cuda%2Binductor" in md
    for key in ("headline", "op_gaps", "failure_clusters", "newly_failing"):
        url = rep["queries"][key]
        assert parse_qs(urlsplit(url).query)["backend"] == ["cuda+inductor"], url
        assert client.get(url).status_code == 200, url
    assert client.get(rep["queries"]["headline"]).json()["attempted"] == rep["coverage"]["attempted"] == 1


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/coverage",
        "/api/v1/ops/gaps",
        "/api/v1/failures",
        "/api/v1/regressions",
        "/api/v1/coverage/history",
        "/api/v1/reports/2026-W48",
    ],
)
def test_unparseable_backend_is_422_with_a_clear_message(client, path):
    r = client.get(f"{path}?backend=cpu+inductor")  # an unencoded '+' arrives as a space
    assert r.status_code == 422, r.text
    (err,) = r.json()["detail"]
    assert err["loc"] == ["query", "backend"] and err["input"] == "cpu inductor"
    assert "unknown backend 'cpu inductor'" in err["msg"] and "%2B" in err["msg"]


def test_backend_names_are_checked_against_the_registry_or_stored_results(client):
    assert (
        client.get("/api/v1/coverage", params={"backend": "cuda+inductor", "week": "2026-W48"}).json()["attempted"] == 1
    )
    # known names, not installed here and without results: accepted (an empty scope)
    for spec in ("neuron+neuron", "cpu+openvino", "xla+openxla", "cuda@bfloat16"):
        r = client.get("/api/v1/coverage", params={"backend": spec})
        assert r.status_code == 200 and r.json()["attempted"] == 0, (spec, r.text)
    # names nobody registers: 422 saying which
    for spec, word in (
        ("cpu+inductr", "compile backend 'inductr'"),
        ("warp", "device 'warp'"),
        ("cpu@int3", "dtype 'int3'"),
        ("auto", "auto"),
    ):
        r = client.get("/api/v1/failures", params={"backend": spec})
        assert r.status_code == 422 and word in r.json()["detail"][0]["msg"], (spec, r.text)
    # ... unless results are stored under it (run by another machine's plugin)
    with session_scope() as s:
        repository.store_result(s, _result("org/m0", "pass", backend="trn9+vendorcc", week_day=W48))
    queries.clear_cache()
    r = client.get("/api/v1/coverage", params={"backend": "trn9+vendorcc", "week": "2026-W48"})
    assert r.status_code == 200 and r.json()["attempted"] == 1
    assert client.get("/api/v1/models", params={"status": "pass", "backend": "trn9+vendorcc"}).json()["total"] == 1
    assert client.get("/api/v1/models", params={"status": "pass", "backend": "trn9 vendorcc"}).status_code == 422


def test_spec_problem_imports_nothing():
    code = (
        "import sys; from zoo_runner.backends import spec_problem; assert "
        "spec_problem('neuron+neuron') is None; print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
    assert spec_problem("cpu+cuda") and spec_problem("") and spec_problem("cpu+inductor") is None


# ---------------------------------------------------------------- a small CSV does not empty coverage


def _seed_then_sync_small(zoo, sqlite_url, tmp_path) -> tuple[int, int]:
    with session_scope() as s:
        big = repository.store_snapshot(
            s, iter([CatalogEntry(f"org/m{i}", 1000 - 100 * i) for i in range(4)]), "file:big"
        ).id
        for i in range(4):
            repository.store_result(
                s, _result(f"org/m{i}", "pass" if i < 3 else "compile_error", backend="cpu+inductor", week_day=W48)
            )
    small_csv = tmp_path / "tiny.csv"
    small_csv.write_text("model_id,downloads\norg/new-a,50\norg/new-b,40\n")
    proc = zoo(["sync", "--from-file", str(small_csv)])
    assert proc.returncode == 0, proc.stderr
    small = int(proc.stdout.split("catalog snapshot ")[1].split()[0])
    assert small > big
    return big, small


def test_coverage_and_report_keep_the_snapshot_with_results_and_take_snapshot(zoo, sqlite_url, tmp_path):
    big, small = _seed_then_sync_small(zoo, sqlite_url, tmp_path)
    default = zoo(["coverage", "--json"])
    assert default.returncode == 0, default.stderr
    cov = json.loads(default.stdout)
    assert (cov["snapshot_id"], cov["catalog_models"], cov["attempted"], cov["passing"]) == (big, 4, 4, 3)
    chosen = json.loads(zoo(["coverage", "--json", "--snapshot", str(small)]).stdout)
    assert (chosen["snapshot_id"], chosen["catalog_models"], chosen["attempted"]) == (small, 2, 0)
    missing = zoo(["coverage", "--snapshot", "999"])
    assert missing.returncode == 2 and missing.stderr.strip().splitlines() == [
        "zoo: error: no catalog snapshot 999 (`zoo sync` prints the id of each)"
    ]
    rep = json.loads(zoo(["report", "--format", "json", "--snapshot", str(big)]).stdout)
    assert rep["coverage"]["snapshot_id"] == big and rep["coverage"]["attempted"] == 4
    assert f"snapshot={big}" in rep["queries"]["headline"] and "backend=cpu%2Binductor" in rep["queries"]["headline"]
    md = zoo(["report"]).stdout
    assert f"catalog snapshot {big} (4 models)" in md


def test_weighting_snapshot_prefers_the_newest_with_results(sqlite_url):
    with session_scope() as s:
        assert queries.weighting_snapshot(s) is None
        first = repository.store_snapshot(s, iter([CatalogEntry("org/a", 10)]), "file:a")
        assert queries.weighting_snapshot(s).id == first.id  # none has results: the newest
        second = repository.store_snapshot(s, iter([CatalogEntry("org/b", 20)]), "file:b")
        assert queries.weighting_snapshot(s).id == second.id
        repository.store_result(s, _result("org/a", "pass"))
        assert queries.weighting_snapshot(s).id == first.id
        assert queries.weighting_snapshot(s, second.id).id == second.id


# ---------------------------------------------------------------- zoo serve --port


def test_serve_rejects_a_port_out_of_range(zoo):
    for port in ("99999", "0", "http"):
        proc = zoo(["serve", "--port", port])
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert "--port" in proc.stderr and (
            "not a TCP port (1-65535)" in proc.stderr or "not a whole number" in proc.stderr
        )


def test_serve_logs_the_port_it_listens_on(tmp_path):
    import httpx

    port = free_port()
    log = tmp_path / "serve.log"
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp_path / 'zoo.db'}")
    with open(log, "w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "zoo.cli", "-v", "serve", "--port", str(port)],
            env=env,
            cwd=tmp_path,
            stdout=err,
            stderr=err,
        )
    try:
        for _ in range(240):
            try:
                if httpx.get(f"http://127.0.0.1:{port}/api/v1/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.25)
        else:
            pytest.fail(f"zoo serve did not come up: {log.read_text()}")
    finally:
        server.terminate()
        server.wait(30)
    text = log.read_text()
    assert f"serving the API and dashboard on http://127.0.0.1:{port}/" in text
    assert f"Uvicorn running on http://127.0.0.1:{port}" in text


# ---------------------------------------------------------------- the main job says what it is doing


def test_run_progress_names_the_model_and_stage_before_it_finishes(monkeypatch, sqlite_url):
    import services.validation
    from zoo import jobs

    out = io.StringIO()
    seen: list[str] = []

    def fake_validate(req, run_id=None, **kw):
        seen.append(out.getvalue())  # jobs itself says "prepare" first
        listen = stage_listener.get()  # what run_isolated reports the model process's stages to
        for stage in ("start", "build", "target"):
            listen(stage)
        seen.append(out.getvalue())  # what the bar shows while the model is still compiling
        return ValidationResult.from_dict({"model_id": req.model_id, "tier": req.tier, "backend": req.backend,
                                           "status": "pass"})  # fmt: skip

    monkeypatch.setattr(services.validation, "validate_and_store", fake_validate)
    monkeypatch.setattr(jobs, "progress_bar", lambda **kw: progress_bar(**{**kw, "file": out}))  # no terminal: lines
    results = jobs.run_inprocess(["org/first-model"], "cpu+inductor", "tiny", run_id=1, timeout=60, jobs=1)
    assert [r["status"] for r in results] == ["pass"]
    assert "org/first-model: preparing" in seen[0]
    assert "0/1" in seen[1] and "org/first-model: compiling and running on the backend 0/60s" in seen[1]
    assert "1/1" in out.getvalue() and "org/first-model: pass" in out.getvalue()


def test_the_bar_shows_each_models_time_against_its_budget_and_drops_finished_ones(monkeypatch):
    from zoo.progress import RunProgress

    out = io.StringIO()
    clock = [100.0]
    monkeypatch.setattr("zoo.progress.time.monotonic", lambda: clock[0])
    with progress_bar(total=2, desc="validate cpu", file=out) as bar:
        p = RunProgress(bar, budget_s=600)
        p.stage("org/slow", "target")
        clock[0] += 5
        p.stage("org/fast", "build")
        clock[0] += 30
        p.finished("org/fast", "pass")
        line = out.getvalue().splitlines()[-1]
        assert "org/slow: compiling and running on the backend 35/600s" in line and "org/fast" not in line
        p.dropped("org/slow")  # an interrupted run ended it: it leaves the line, it is not counted
        assert "org/slow" not in out.getvalue().splitlines()[-1] and p.bar.n == 1


def test_zoo_run_without_a_terminal_prints_progress_lines_within_15_s(tmp_path):
    """stdout and stderr are pipes (a log file, ``docker exec`` without -t, CI): tqdm's bar would be
    carriage returns on one endless line, or nothing where the terminal reports no width. Plain
    lines come instead, the first as soon as the models start, each naming what is in flight."""
    import queue
    import threading

    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{tmp_path / 'zoo.db'}", HF_HUB_OFFLINE="1")
    start = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "zoo.cli", "run", "--top", "2", "--backend", "cpu", "--jobs", "1"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[tuple[float, str]] = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put((time.monotonic() - start, ln)) for ln in proc.stderr], daemon=True
    ).start()
    seen: list[tuple[float, str]] = []
    try:
        while time.monotonic() - start < 15:
            try:
                seen.append(lines.get(timeout=0.5))
            except queue.Empty:
                continue
            if sum(ln.startswith("validate cpu: ") for _, ln in seen) >= 2:
                break
    finally:
        proc.kill()
        proc.wait(30)
    progress = [(t, ln.rstrip("\n")) for t, ln in seen if ln.startswith("validate cpu: ")]
    assert len(progress) >= 2, f"no progress lines within 15 s: {seen}"
    assert progress[0][1].startswith("validate cpu: 0/2 [00:0"), progress
    assert any(": preparing" in ln or ": starting its process" in ln for _, ln in progress), progress
    assert not any("\r" in ln for _, ln in seen), "carriage returns in a pipe"


def test_main_job_says_what_it_does_before_the_first_model(monkeypatch, sqlite_url):
    from zoo import jobs

    said: list[tuple[float, str]] = []
    monkeypatch.delenv("ZOO_BROKER_URL", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the builtin arch: catalog
    monkeypatch.setattr(jobs, "resolve_backend", lambda spec: "cpu+inductor")
    monkeypatch.setattr(
        jobs, "run_inprocess", lambda ids, *a, **kw: said.append((time.monotonic(), f"validating {len(ids)}")) or []
    )
    # what takes a core for seconds starts before this process imports torch: inductor's shared headers
    # (auto is cpu+inductor here) and the model processes' forkserver
    monkeypatch.setattr(
        jobs.sandbox, "start_shared_headers", lambda spec, python: said.append((0, f"headers {spec} {python}")) or True
    )
    monkeypatch.setattr(
        jobs.launcher, "start_forkserver", lambda backend=None: said.append((0, f"forkserver {backend}")) or True
    )
    jobs.main_job(
        top=2, backend="auto", tier="tiny", timeout=60, status=lambda text: said.append((time.monotonic(), text))
    )
    texts = [t for _, t in said]
    assert texts[:3] == [
        "headers cpu+inductor None",
        "building inductor's shared headers in the background (once per machine and interpreter)",
        "forkserver auto",
    ]
    assert texts[3].startswith("resolving backend auto") and "backend cpu+inductor" in texts[4]
    assert "2 models from the catalog (builtin)" in texts[5] and texts[-1] == "validating 2"


def test_run_isolated_reports_the_model_process_stages():
    from zoo_runner.launcher import run_isolated
    from zoo_runner.request import ValidationRequest

    stages: list[str] = []
    result = run_isolated(ValidationRequest("arch:BertModel", backend="cpu", timeout_s=300), on_stage=stages.append)
    assert result["status"] == "pass", result.get("error")
    order = ["start", "build", "reference", "target", "compare"]  # read every 0.5 s: a short stage may pass unseen
    assert (
        stages[0] == "start"
        and len(stages) > 1
        and all(s in order for s in stages)
        and stages == sorted(stages, key=order.index)
        and len(set(stages)) == len(stages)
    ), stages


# ---------------------------------------------------------------- the README's commands run from a fresh clone


def test_readme_command_blocks_run_in_the_venv():
    """Every shell block of the README that runs zoo or python activates the venv first or names
    ``.venv/bin/``: after setup, nothing is on PATH by itself."""
    from tests.conftest import ROOT

    blocks = (ROOT / "README.md").read_text().split("```bash\n")[1:]
    assert blocks
    for block in (b.split("```", 1)[0] for b in blocks):
        lines = [ln.split("#", 1)[0].strip() for ln in block.splitlines()]
        runs = [ln for ln in lines if ln.startswith(("zoo ", "python ", "pip ")) or " zoo " in f" {ln} "]
        activated = any(ln.startswith((". .venv/bin/activate", "source .venv/bin/activate")) for ln in lines)
        assert activated or all(".venv/bin/" in ln for ln in runs), block
