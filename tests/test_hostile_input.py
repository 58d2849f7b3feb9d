"""Hostile input costs one row, never a run: strangers' config files (nested 50,000 deep, 20 MB,
NaN, wrong types, binary, YAML bombs) and hostile catalogs (binary, Latin-1, 10 MB lines,
negative downloads, NUL bytes, 300-character ids, duplicates).

`zoo run` goes through the Hub stand-in, in-process and through a real Celery worker on the local
Redis with PostgreSQL: every catalog model ends as exactly one row, the run completes, and no
traceback reaches the user. The parsers and the catalog checks are also tested in-process (fast).
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from tests.conftest import _reset_pg, child_env, run_zoo
from tests.hub_standin import EMPTY_SAFETENSORS, start_standin
from zoo_runner import untrusted
from zoo_runner.exceptions import CatalogError, UntrustedFile

BERT_TAGS = "['transformers', 'safetensors', 'bert', 'fill-mask']"
DIFFUSERS_TAGS = "['diffusers', 'safetensors', 'diffusers:StableDiffusionPipeline']"
# repo id -> (tags, {file: content}); the stand-in serves these files as the repo.
HOSTILE_REPOS: dict[str, tuple[str, dict[str, bytes]]] = {
    "hostile/nested-brackets": (
        BERT_TAGS,
        {"config.json": b"[" * 50_000 + b"]" * 50_000},
    ),  # 100 KB: a RecursionError before
    "hostile/untagged-nested": (
        "['safetensors']",
        {"config.json": b'{"a": ' * 20_000 + b"1" + b"}" * 20_000},
    ),  # the library is sniffed from it
    "hostile/huge-config": (
        BERT_TAGS,
        {"config.json": json.dumps({"model_type": "bert", "padding": "x" * (20 << 20)}).encode()},
    ),
    "hostile/nan-config": (
        BERT_TAGS,
        {
            "config.json": b'{"model_type": "bert", "architectures": ["BertForMaskedLM"], '
            b'"layer_norm_eps": NaN, "initializer_range": Infinity}'
        },
    ),
    "hostile/wrong-types": (
        BERT_TAGS,
        {"config.json": json.dumps({"model_type": 42, "architectures": "x", "num_hidden_layers": "many"}).encode()},
    ),
    "hostile/binary-garbage": (BERT_TAGS, {"config.json": bytes(random.Random(0).randrange(256) for _ in range(4096))}),
    "hostile/not-a-mapping": (BERT_TAGS, {"config.json": b"[1, 2, 3]"}),
    "hostile/diffusers-nested": (
        DIFFUSERS_TAGS,
        {"model_index.json": b'{"unet": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"},
    ),
    "hostile/diffusers-component": (
        DIFFUSERS_TAGS,
        {
            "model_index.json": json.dumps(
                {"_class_name": "StableDiffusionPipeline", "unet": ["diffusers", "UNet2DConditionModel"]}
            ).encode(),
            "unet/config.json": b"\xff\xfe" * 512,
        },
    ),
}
GOOD_ID = "plain/bert-after-them"  # synthetic repo, validated after every hostile one
# listed by the Hub (or a mirror) but refused at sync: never a row
BAD_LISTED = ["bad id/with spaces", "org/" + "a" * 300, "nul\x00/id", "org/negative-downloads"]
EXPECTED_ROWS = {*HOSTILE_REPOS, GOOD_ID}


@pytest.fixture(scope="module")
def hostile_hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile-hub")
    catalog = root / "catalog.csv"
    repos: dict[str, str] = {}
    with open(catalog, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["model_id", "downloads", "tasks", "parameters", "tags"])
        downloads = 10_000
        for repo, (tags, files) in HOSTILE_REPOS.items():  # the most downloaded first: a crash would stop the rest
            folder = root / "repos" / repo
            for name, content in {**files, "model.safetensors": EMPTY_SAFETENSORS}.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(content)
            repos[repo] = str(folder)
            w.writerow([repo, downloads, "fill-mask", "", tags])
            downloads -= 100
        for bad in BAD_LISTED:
            w.writerow([bad, -5 if "negative" in bad else downloads, "fill-mask", "", BERT_TAGS])
        w.writerow([GOOD_ID, 1, "fill-mask", "", BERT_TAGS])
    base, stop = start_standin(str(catalog), repos)
    yield base
    stop()


def _hub_env(hub: str, workdir: Path, **extra: str) -> dict[str, str]:
    return child_env(
        HF_ENDPOINT=hub, HF_HUB_OFFLINE="0", HF_HUB_CACHE=str(workdir / "hf"), HF_HUB_DISABLE_PROGRESS_BARS="1", **extra
    )


def _rows(db_url: str) -> list[tuple[str, str, str | None, str]]:
    eng = create_engine(db_url)
    with eng.connect() as c:
        rows = c.execute(text("SELECT model_id, status, reason, error FROM results ORDER BY model_id")).all()
    eng.dispose()
    return [(m, s, r, json.dumps(e) if not isinstance(e, str) else e) for m, s, r, e in rows]


def _check_run(proc, rows) -> None:
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert f"{len(EXPECTED_ROWS)} results stored" in proc.stdout, proc.stdout
    ids = [r[0] for r in rows]
    assert sorted(ids) == sorted(EXPECTED_ROWS), ids  # exactly one row each; the refused ids none
    by_id = {m: (s, r, e) for m, s, r, e in rows}
    assert (
        by_id["hostile/nested-brackets"][:2] == ("unsupported", "library_unsupported")
        and "nests deeper than" in by_id["hostile/nested-brackets"][2]
    )
    assert (
        by_id["hostile/untagged-nested"][:2] == ("unsupported", "library_unsupported")
        and "nests deeper than" in by_id["hostile/untagged-nested"][2]
    )
    assert (
        by_id["hostile/diffusers-nested"][:2] == ("unsupported", "library_unsupported")
        and "model_index.json nests deeper" in by_id["hostile/diffusers-nested"][2]
    )
    assert (
        by_id["hostile/diffusers-component"][:2] == ("unsupported", "library_unsupported")
        and "unet/config.json is not UTF-8" in by_id["hostile/diffusers-component"][2]
    )
    assert (
        by_id["hostile/huge-config"][:2] == ("unsupported", "too_large")
        and "over Zoo's limit of 5 MB" in by_id["hostile/huge-config"][2]
    )
    assert (
        by_id["hostile/binary-garbage"][:2] == ("unsupported", "library_unsupported")
        and "not UTF-8" in by_id["hostile/binary-garbage"][2]
    )
    assert (
        by_id["hostile/not-a-mapping"][:2] == ("unsupported", "library_unsupported")
        and "not a mapping" in by_id["hostile/not-a-mapping"][2]
    )
    assert by_id["hostile/wrong-types"][0] in ("unsupported", "reference_error"), by_id["hostile/wrong-types"]
    assert by_id[GOOD_ID][0] == "pass", by_id[GOOD_ID]
    for bad in ("bad id/with spaces", "org/negative-downloads"):
        assert repr(bad) in proc.stderr, proc.stderr[-3000:]  # reported at sync, with the reason
    assert "over the Hub's limit of 96" in proc.stderr and "NUL byte" in proc.stderr


def test_hostile_repos_in_process_run(hostile_hub, zoo, tmp_path):
    proc = zoo(
        ["run", "--top", "50", "--backend", "cpu", "--jobs", "1"],
        timeout=600,
        HF_ENDPOINT=hostile_hub,
        HF_HUB_OFFLINE="0",
        HF_HUB_CACHE=str(tmp_path / "hf"),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
    )
    _check_run(proc, _rows(zoo.db_url))


@pytest.mark.services
def test_hostile_repos_through_a_celery_worker(hostile_hub, tmp_path, pg_server_url, redis_url):
    from tests.test_workers import start_worker, stop

    _reset_pg(pg_server_url)
    env = _hub_env(hostile_hub, tmp_path, ZOO_DATABASE_URL=pg_server_url, ZOO_BROKER_URL=redis_url)
    worker = start_worker(env, tmp_path, name="hostile")
    try:
        proc = run_zoo(["run", "--top", "50", "--backend", "cpu"], env, tmp_path, timeout=600)
        log = (tmp_path / "hostile.log").read_text()
        _check_run(proc, _rows(pg_server_url))
    finally:
        stop(worker)
    assert "zoo.validate" in log and "Retry in" not in log, log[
        -3000:
    ]  # each hostile model is one row at once, not a retried task


# ---------------------------------------------------------------- the parsers, in-process


@pytest.mark.parametrize(
    "content, reason, words",
    [
        (b"[" * 100_000 + b"]" * 100_000, "library_unsupported", "nests deeper than Zoo's limit of 64"),
        (b"x" * (6 << 20), "too_large", "over Zoo's limit of 5 MB"),
        (b"\xff\xfe{\x00}\x00", "library_unsupported", "not UTF-8"),
        (b'{"a": 1,}', "library_unsupported", "not valid JSON"),
        (b"1" * 5000, "library_unsupported", "not valid JSON"),
        (b"[1, 2]", "library_unsupported", "not a mapping"),
    ],
)
def test_json_limits(tmp_path, content, reason, words):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(UntrustedFile) as info:
        untrusted.load_mapping(path)
    assert info.value.reason == reason and words in str(info.value) and str(info.value).startswith("config.json ")


def test_json_keeps_nan_and_deep_brackets_inside_strings(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"eps": NaN, "top": Infinity, "s": "[[[[[[\\"[[[[' + "[" * 1000 + '"}')
    cfg = untrusted.load_mapping(path)
    assert cfg["eps"] != cfg["eps"] and cfg["top"] == float("inf") and cfg["s"].startswith("[[[")
    with pytest.raises(UntrustedFile, match="NaN is not allowed"):
        untrusted.load_json(path, allow_nan=False)


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefg", "bcdefgh")
)


@pytest.mark.parametrize(
    "content, words",
    [
        (LAUGHS, "expands to more than"),  # a billion laughs: 9^8 values from 1 KB
        ("a: &a [*a]\n", "nests deeper"),  # a cycle
        ("[" * 10_000 + "]" * 10_000, "YAML"),
        (
            "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v\n",
            "nests deeper than Zoo's limit of 64",
        ),
        ("model: !!python/object/apply:os.system [echo hi]\n", "not valid YAML"),
        ("blob: !!binary aGVsbG8=\n", "not plain data"),
        ("- 1\n- 2\n", "not a mapping"),
    ],
)
def test_yaml_limits(tmp_path, content, words):
    path = tmp_path / "config.yaml"
    path.write_text(content)
    with pytest.raises(UntrustedFile, match=words):
        untrusted.load_mapping(path)


def test_yaml_dates_become_strings(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "version: 2024-01-01\nmodel: {_target_: pyannote.audio.models.segmentation.PyanNet, sample_rate: 16000}\n"
    )
    cfg = untrusted.load_mapping(path)
    assert cfg == {
        "version": "2024-01-01",
        "model": {"_target_": "pyannote.audio.models.segmentation.PyanNet", "sample_rate": 16000},
    }
    json.dumps(cfg)  # travels to the model process as JSON


def test_prepare_failure_is_the_models_row(monkeypatch):
    """Any exception while preparing a model (a bug, a config of the wrong shape) is its row."""
    from services import validation
    from zoo_runner.request import ValidationRequest

    def boom(req):
        raise RecursionError("maximum recursion depth exceeded while decoding a JSON array")

    monkeypatch.setattr(validation, "prepare", boom)
    row = validation.run_validation(ValidationRequest("org/model", backend="cpu")).to_dict()
    assert (row["status"], row["reason"]) == ("reference_error", "prepare_failed")
    assert row["error"]["signature"].startswith("RecursionError: maximum recursion depth")


def test_prepare_failure_is_stored_as_one_row(monkeypatch, sqlite_url):
    from sqlalchemy import select

    from db.models import Result
    from db.session import session_scope
    from services import validation
    from zoo_runner.request import ValidationRequest

    def wrong_shape(req):
        raise TypeError("'int' object is not subscriptable")

    monkeypatch.setattr(validation, "prepare", wrong_shape)
    validation.validate_and_store(ValidationRequest("org/model", backend="cpu"), run_id=None)
    with session_scope() as s:
        rows = s.execute(select(Result.model_id, Result.status, Result.reason, Result.error_signature)).all()
    assert rows == [("org/model", "reference_error", "prepare_failed", "TypeError: '…' object is not subscriptable")]


# ---------------------------------------------------------------- catalog CSVs

HEADER = "model_id,downloads,tasks,parameters,tags\n"


def _write(tmp_path: Path, name: str, content: bytes | str) -> Path:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return path


def _unreadable(proc, *words: str) -> str:
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and all(w in err[0] for w in words), proc.stderr
    return err[0]


def test_unreadable_catalogs_are_one_line_and_exit_2(zoo, tmp_path):
    binary = _write(tmp_path, "weights.csv", bytes(random.Random(1).randrange(256) for _ in range(65536)))
    _unreadable(zoo(["sync", "--from-file", str(binary)]), "weights.csv", "not")
    _unreadable(
        zoo(["sync", "--from-file", str(_write(tmp_path, "nul.csv", b"\x00\x01\x02,\n" * 10))]), "nul.csv", "binary"
    )
    latin1 = _write(
        tmp_path, "latin1.csv", (HEADER + "org/a,1,,,\"['transformers']\"\norg/caf\u00e9,2,,,\n").encode("latin-1")
    )
    _unreadable(zoo(["sync", "--from-file", str(latin1)]), "latin1.csv:3", "not UTF-8", "0xe9")
    _unreadable(
        zoo(["sync", "--from-file", str(_write(tmp_path, "utf16.csv", (HEADER + "org/a,1,,,\n").encode("utf-16")))]),
        "utf16.csv:1",
        "not UTF-8",
    )
    _unreadable(
        zoo(["sync", "--from-file", str(_write(tmp_path, "oneline.csv", "x" * (10 << 20)))]),
        "oneline.csv",
        "header line is over 1 MB",
    )
    _unreadable(zoo(["sync", "--from-file", str(tmp_path)]), "is not a regular file")  # a directory
    eng = create_engine(zoo.db_url)
    with eng.connect() as c:  # nothing was stored by any of them: no empty snapshot either
        assert c.execute(text("SELECT count(*) FROM snapshots")).scalar() == 0
    eng.dispose()


def _sync_file(path: Path):
    from services import catalog

    report = catalog.IngestReport(str(path))
    snap, n = catalog.sync(catalog.from_file(str(path), report), f"file:{path}")
    return snap, n, report


def test_hostile_catalog_rows_are_reported_and_skipped(database_url, tmp_path, caplog):
    """On SQLite and PostgreSQL (a 300-character id used to crash it there)."""
    rows = [
        HEADER.strip(),
        "org/good,100,fill-mask,110000000.0,\"['transformers', 'bert']\"",  # 2
        "org/negative,-5,,,",  # 3
        "org/" + "a" * 300 + ",7,,,",  # 4
        "org/nul\x00,7,,,",  # 5
        "org/tag-nul,7,,,\"['a\x00b']\"",  # 6
        "ORG/GOOD,5,,,",  # 7: a duplicate (the Hub's ids are case-insensitive)
        "org/lots,lots,,,",  # 8
        "org/" + "b" * 10 + ",1,,,\"['" + "x" * (10 << 20) + "']\"",  # 9: a 10 MB line
        "not an id!,1,,,",  # 10
        "org/float-downloads,1.5,,,",  # 11
        "arch:BertModel,50,,,",  # 12
        "arch:Not-A-Class,50,,,",  # 13
        "org/good,1,,,",  # 14: a duplicate
        "org/task," + "9,x" + "t" * 300 + ",,",  # 15: a task over 128 characters
        "org/last,1,,,",  # 16
    ]
    path = _write(tmp_path, "hostile.csv", "\n".join(rows) + "\n")
    with caplog.at_level("WARNING", logger="services.catalog"):
        snap, n, report = _sync_file(path)
    assert n == 3 and report.accepted == 3 and report.duplicates == 2 and report.invalid == 10, report.problems
    lines = {int(p.split(":", 2)[1].split("-")[0]) for p in report.problems}
    assert lines == {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15}
    assert any(
        p.endswith("hostile.csv:7: 'ORG/GOOD' duplicates 'org/good' of line 2: skipped, the first row kept")
        for p in report.problems
    )
    assert any("hostile.csv:3: downloads '-5' is negative" in p for p in report.problems)
    assert any("hostile.csv:4:" in p and "over the Hub's limit of 96" in p for p in report.problems)
    assert any("hostile.csv:9: the line is longer than 1 MB" in p for p in report.problems)
    assert "12 row(s) skipped (10 invalid, 2 duplicate)" in caplog.text
    from db import queries
    from db.session import session_scope

    with session_scope() as s:
        stored = {m.id: d for m, d in queries.snapshot_models(s, queries.latest_snapshot(s))}
    assert stored == {"org/good": 100, "arch:BertModel": 50, "org/last": 1}


def test_a_catalog_without_valid_rows_stores_nothing(database_url, tmp_path):
    path = _write(tmp_path, "allbad.csv", HEADER + "org/a,-1,,,\nbad id,1,,,\n")
    with pytest.raises(CatalogError, match="no valid catalog rows"):
        _sync_file(path)
    from db import queries
    from db.session import session_scope

    with session_scope() as s:
        assert queries.latest_snapshot(s) is None  # rolled back: `zoo run` still syncs by itself


def test_hub_listing_with_bad_items_is_checked_too():
    from types import SimpleNamespace

    from services import catalog

    def info(model_id, downloads=1, **kw):
        base = dict(
            id=model_id,
            downloads=downloads,
            tags=["transformers"],
            config={"model_type": 42},
            library_name=None,
            pipeline_tag=None,
            gated=False,
            sha=None,
            safetensors=None,
        )
        return SimpleNamespace(**{**base, **kw})

    good = catalog._hub_entry(info("org/ok"))
    assert good.model_type is None and good.downloads == 1  # model_type 42 is not a name
    for bad in (
        info("x" * 300),
        info("org/a", downloads=-1),
        info("org/a", tags="transformers"),
        info("org/a", pipeline_tag="t" * 500),
        info("org/\x00"),
    ):
        with pytest.raises(catalog.BadRow):
            catalog._hub_entry(bad)
