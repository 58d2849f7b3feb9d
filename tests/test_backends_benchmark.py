"""The backends benchmark carries a slice across sittings: ``--state`` keeps every stored result
and the wall times, a new sitting on a fresh database skips what is stored and adds its own wall
time, and the report is rebuilt from the state alone."""

from __future__ import annotations

import csv
import gzip
import json

import pytest

from benchmarks import backends

SNAPSHOT = backends.SNAPSHOT_CSV


def _small_csv(tmp_path, n: int):
    with SNAPSHOT.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    keep = [r for r in rows if r["model_id"].startswith(("FacebookAI/", "google-bert/"))][:n]
    path = tmp_path / "top.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(keep)
    return path, [r["model_id"] for r in keep]


def _rows(state):
    with gzip.open(state / "rows.jsonl.gz", "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def test_a_slice_resumes_on_a_fresh_database_and_the_report_comes_from_the_state(tmp_path, monkeypatch):
    csv_path, ids = _small_csv(tmp_path, 2)
    state = tmp_path / "state"
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work1"))
    # the first sitting covers the top 1 only, as a sitting cut short would
    assert backends.main(["--csv", str(csv_path), "--plan", "cpu:1", "--state", str(state), "--jobs", "1"]) == 0
    first = _rows(state)
    assert [r["model_id"] for r in first] == ids[:1]
    walls = json.loads((state / "walls.json").read_text())
    assert walls["cpu@declared/fp32:1"]["stored"] == 1
    assert first[0]["backend"] == "cpu" and first[0]["status"] in ("pass", "pass_with_fallback")

    # a new machine: another work directory, so a fresh database; the state brings the rows back
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work2"))
    out = tmp_path / "report.txt"
    args = ["--csv", str(csv_path), "--plan", "cpu:2", "--state", str(state), "--jobs", "1", "--out", str(out)]
    assert backends.main(args) == 0
    rows = _rows(state)
    assert sorted(r["model_id"] for r in rows) == sorted(ids)
    # the model stored in the first sitting was not validated again
    assert [r for r in rows if r["model_id"] == ids[0]][0]["started_at"] == first[0]["started_at"]
    walls = json.loads((state / "walls.json").read_text())
    entry = walls["cpu@declared/fp32:2"]
    assert entry["top"] == 2
    assert [s["models"] for s in entry["passes"][0]["sittings"]] == [1]  # one model was stored by the top-1 slice
    assert walls["cpu@declared/fp32:1"]["stored"] == 1  # that slice keeps its own entry
    assert entry["stored"] == 2
    text = out.read_text()
    assert "top 2 models" in text and "(2/2)" in text
    assert "in progress" not in text
    # both pass: no cluster is the backend's
    assert "no failure of the backend's" in text

    # the report alone, from the state on a third fresh database, says the same
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work3"))
    again = tmp_path / "again.txt"
    assert backends.main(["--csv", str(csv_path), "--state", str(state), "--report-only", "--out", str(again)]) == 0
    body = lambda t: t.split("\n", 2)[2]  # noqa: E731 - the header names the load at the start
    assert body(again.read_text()) == body(text)


def test_a_flag_run_over_a_declared_row_stays_declared_through_the_state(tmp_path, sqlite_url):
    """``--precision fp32`` over a row judged at fp32 as declared keeps the row declared while its
    details say ``flag``: the state carries the row's source column, so a fresh database gets the
    declared row back, not a flag row."""
    from sqlalchemy import select

    from db import repository
    from db import session as dbs
    from db.models import Result
    from db.session import session_scope

    def result(status: str, source: str) -> dict:
        return {
            "model_id": "org/a",
            "backend": "cpu",
            "tier": "tiny",
            "status": status,
            "precision": "fp32",
            "started_at": "2026-11-25T10:00:00+00:00",
            "details": {"harness_version": "1", "precision_source": source},
        }

    with session_scope() as s:
        repository.store_result(s, result("pass", "default"))
        repository.store_result(s, result("mismatch", "flag"))  # `--precision fp32` on cpu
    path = tmp_path / "state" / "rows.jsonl.gz"
    assert backends._save_rows(path) == 1

    fresh = f"sqlite:///{tmp_path / 'fresh.db'}"
    import os

    os.environ["ZOO_DATABASE_URL"] = fresh  # sqlite_url's monkeypatch restores it
    dbs._READY.clear()
    assert backends._load_rows(path) == 1
    with session_scope() as s:
        row = s.scalars(select(Result)).one()
        assert (row.status, row.precision_source, row.details["precision_source"]) == ("mismatch", "default", "flag")


def test_a_flag_naming_the_declared_precision_reuses_the_declared_rows(tmp_path, monkeypatch):
    """``cpu@fp32`` judges what ``cpu`` judges (cpu declares fp32): under --state it validates no model
    that has its declared result this week, and its section says whose rows it shows."""
    csv_path, ids = _small_csv(tmp_path, 1)
    state = tmp_path / "state"
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work"))
    out = tmp_path / "report.txt"
    args = ["--csv", str(csv_path), "--plan", "cpu:1,cpu@fp32:1", "--state", str(state), "--jobs", "1"]
    assert backends.main([*args, "--out", str(out)]) == 0
    rows = _rows(state)
    assert len(rows) == 1 and rows[0]["stored_precision_source"] in ("default", "plugin")
    walls = json.loads((state / "walls.json").read_text())
    flag = walls["cpu@fp32/fp32:1"]
    assert flag["declared_rows"] is True and flag["stored"] == 1
    assert flag["passes"][0]["sittings"] == []  # nothing validated again
    text = out.read_text()
    assert "--precision fp32 names cpu's declared precision on this machine" in text
    assert "not validated again" in text
    assert "first run (cold caches): none of its own" in text
    assert "in progress" not in text


def _section(text: str, header: str) -> str:
    return next(part for part in text.split("\n== ") if part.startswith(header))


def test_a_machine_that_declares_another_precision_gets_its_own_rows_and_section(tmp_path, monkeypatch):
    """OpenVINO declares what its CPU plugin resolves: fp32 without bf16 units, bf16 with them (told
    here with its inference-precision setting, as the two machines would resolve it). A sitting on
    the bf16 machine takes none of the fp32 machine's rows as its own: it validates its slice again
    at bf16, the state keeps both precisions' rows, and the report has a section for each machine,
    each over its own slice only."""
    openvino = pytest.importorskip("openvino")
    from zoo_runner.plugins import openvino as ov_plugin

    if ov_plugin.resolved_precision(openvino.Core(), {"INFERENCE_PRECISION_HINT": "bf16"}) != "bf16":
        pytest.skip(
            "this CPU has no bf16 units: OpenVINO resolves f32 whatever it is asked, so no sitting declares bf16"
        )
    csv_path, ids = _small_csv(tmp_path, 2)
    state = tmp_path / "state"
    base = ["--csv", str(csv_path), "--state", str(state), "--jobs", "1"]
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work-fp32"))
    monkeypatch.setenv(ov_plugin.ENV, "f32")
    assert backends.main([*base, "--plan", "cpu+openvino:2"]) == 0

    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work-bf16"))  # another machine, a fresh database
    monkeypatch.setenv(ov_plugin.ENV, "bf16")
    out = tmp_path / "report.txt"
    assert backends.main([*base, "--plan", "cpu+openvino:1", "--out", str(out)]) == 0
    rows = sorted((r["model_id"], r["precision"]) for r in _rows(state))
    assert rows == sorted([(ids[0], "fp32"), (ids[1], "fp32"), (ids[0], "bf16")])
    walls = json.loads((state / "walls.json").read_text())
    assert set(walls) == {"cpu+openvino@declared/fp32:2", "cpu+openvino@declared/bf16:1"}
    bf16 = walls["cpu+openvino@declared/bf16:1"]
    assert (bf16["precision"], bf16["stored"]) == ("bf16", 1)
    assert [s["models"] for s in bf16["passes"][0]["sittings"]] == [1]  # validated again, not reused
    assert walls["cpu+openvino@declared/fp32:2"]["precision"] == "fp32"

    text = out.read_text()
    fp32 = _section(text, "cpu+openvino at fp32 (its declared precision), top 2 models")
    mine = _section(text, "cpu+openvino at bf16 (its declared precision), top 1 models")
    assert "harness    by count 100.0% (2/2)" in fp32
    assert "harness    by count 100.0% (1/1)" in mine  # the slice's model only, at bf16


def test_fresh_runs_a_slice_from_nothing_beside_the_larger_slice(tmp_path, monkeypatch):
    """``--fresh`` runs a plan item from nothing although its models have results this week: the
    slice's model is validated again in both passes, the model outside it keeps its row, and the
    smaller slice gets an entry of its own beside the larger one's. A walls file written before keys
    named their slice is read with each key given its entry's slice."""
    csv_path, ids = _small_csv(tmp_path, 2)
    state = tmp_path / "state"
    base = ["--csv", str(csv_path), "--state", str(state), "--jobs", "1"]
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work1"))
    assert backends.main([*base, "--plan", "cpu:2"]) == 0
    before = {r["model_id"]: r["started_at"] for r in _rows(state)}
    walls = json.loads((state / "walls.json").read_text())
    old = {k.partition(":")[0]: w for k, w in walls.items()}  # as an older walls file keyed them
    (state / "walls.json").write_text(json.dumps(old))

    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work2"))
    out = tmp_path / "report.txt"
    assert backends.main([*base, "--plan", "cpu:1x2", "--fresh", "--out", str(out)]) == 0
    rows = {r["model_id"]: r for r in _rows(state)}
    assert sorted(rows) == sorted(ids)
    assert rows[ids[1]]["started_at"] == before[ids[1]], "the model outside the slice keeps its row"
    assert rows[ids[0]]["started_at"] != before[ids[0]] and "deduplicated_from" not in rows[ids[0]]["details"]
    walls = json.loads((state / "walls.json").read_text())
    assert set(walls) == {"cpu@declared/fp32:2", "cpu@declared/fp32:1"}
    fresh = walls["cpu@declared/fp32:1"]
    assert [s["models"] for s in fresh["passes"][0]["sittings"]] == [1]  # validated again from nothing
    assert len(fresh["walls_s"]) == 2 and all(w > 0 for w in fresh["walls_s"])
    assert walls["cpu@declared/fp32:2"]["stored"] == 2
    text = out.read_text()
    assert "top 2 models" in text and "top 1 models" in text and "second run (warm caches)" in text


def test_a_row_refused_before_any_precision_counts_at_every_precision(sqlite_url):
    """A model refused before a precision applied (``unsupported``) is stored keyed at fp32 with no
    source; a bf16 machine's resumed first pass counts it as done instead of validating it again."""
    import datetime as dt

    from db import repository
    from db.session import session_scope
    from zoo_runner.request import HARNESS_VERSION

    now = dt.datetime.now(dt.timezone.utc).isoformat()
    row = {"model_id": "org/refused", "backend": "cpu+openvino", "tier": "tiny", "status": "unsupported"}
    with session_scope() as s:
        repository.store_result(s, {**row, "started_at": now, "details": {"harness_version": HARNESS_VERSION}})
    ids = ["org/refused", "org/other"]
    assert backends._stored_this_week(ids, "cpu+openvino", "auto", "bf16") == {"org/refused"}
    assert backends._stored_this_week(ids, "cpu+openvino", "auto", "fp32") == {"org/refused"}


def test_redo_validates_again_only_the_models_whose_result_has_that_status(tmp_path, monkeypatch):
    """``--redo unsupported`` (after a library was added): the slice's model whose stored result is
    ``unsupported`` is validated again as one more sitting that says so, its new row replacing the
    old; the other model keeps its row; a status that does not exist is refused in one line."""
    csv_path, ids = _small_csv(tmp_path, 2)
    state = tmp_path / "state"
    base = ["--csv", str(csv_path), "--state", str(state), "--jobs", "1", "--plan", "cpu:2"]
    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work1"))
    assert backends.main(base) == 0
    rows = _rows(state)
    # the first model's result as a venv without its library would have stored it
    for r in rows:
        if r["model_id"] == ids[0]:
            r.update(status="unsupported", error={"type": "library_unsupported", "message": "not installed here"})
    with gzip.open(state / "rows.jsonl.gz", "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    before = {r["model_id"]: r["started_at"] for r in rows}

    monkeypatch.setenv("ZOO_BENCH_WORK", str(tmp_path / "work2"))
    out = tmp_path / "report.txt"
    assert backends.main([*base, "--redo", "unsupported", "--out", str(out)]) == 0
    after = {r["model_id"]: r for r in _rows(state)}
    assert sorted(after) == sorted(ids) and len(_rows(state)) == 2  # replaced, not added beside
    assert after[ids[0]]["status"] in ("pass", "pass_with_fallback")
    assert after[ids[0]]["started_at"] != before[ids[0]]
    assert after[ids[1]]["started_at"] == before[ids[1]], "a model without that status keeps its row"
    sittings = json.loads((state / "walls.json").read_text())["cpu@declared/fp32:2"]["passes"][0]["sittings"]
    assert [(s["models"], s.get("redo")) for s in sittings] == [(2, None), (1, ["unsupported"])]
    assert "1 models (their unsupported results validated again)" in out.read_text()

    with pytest.raises(SystemExit):
        backends.main([*base, "--redo", "unsuported"])
