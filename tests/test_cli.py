"""The CLI as users run it: JSON results, repro commands, and one clear line on bad input."""

from __future__ import annotations

import json
import shlex

import pytest


def _one_clear_line(proc):
    assert proc.returncode != 0
    err = proc.stderr.strip()
    assert "Traceback" not in proc.stderr, proc.stderr
    assert len(err.splitlines()) == 1, err
    return err


def test_validate_json_then_repro_reproduces(zoo):
    """Through a compiling backend, so the repro carries one; aot_eager, since the compiler is not what this is
    about (tests/test_compile_cache.py and tests/test_cache_poisoning.py compile with inductor)."""
    first = zoo(["validate", "arch:BertModel", "--backend", "cpu+aot_eager", "--tier", "tiny", "--json"])
    assert first.returncode == 0, first.stderr
    result = json.loads(first.stdout)  # the result, alone on stdout
    assert result["status"] == "pass" and result["fingerprint"] and result["versions"]["torch"]
    assert result["backend"] == "cpu+aot_eager" and result["metrics"]["compile_s"] > 0
    argv = shlex.split(result["repro"])
    assert argv[:2] == ["zoo", "validate"]
    again = zoo(argv[1:])
    assert again.returncode == 0, again.stderr
    second = json.loads(again.stdout)
    assert (second["status"], second["fingerprint"], second["backend"], second["tier"]) == (
        result["status"],
        result["fingerprint"],
        result["backend"],
        result["tier"],
    )
    assert second["metrics"]["max_abs_diff"] == result["metrics"]["max_abs_diff"]


def test_unknown_model_id(zoo):
    err = _one_clear_line(zoo(["validate", "arch:NotARealModel", "--backend", "cpu"]))
    assert "unknown model" in err


def test_unknown_hub_model_offline(zoo):
    err = _one_clear_line(zoo(["validate", "nobody/nothing", "--backend", "cpu"]))
    assert "nobody/nothing" in err


def test_unknown_and_unavailable_backends(zoo):
    assert "unknown backend" in _one_clear_line(zoo(["validate", "arch:BertModel", "--backend", "cpu@int3"]))
    assert "unknown device" in _one_clear_line(zoo(["validate", "arch:BertModel", "--backend", "warp"]))
    assert "backend neuron is not available here" in _one_clear_line(
        zoo(["validate", "arch:BertModel", "--backend", "neuron"])
    )


def test_malformed_csv(zoo, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("name,count\nfoo,1\n")
    assert "missing column" in _one_clear_line(zoo(["sync", "--from-file", str(bad)]))
    bad.write_text('model_id,downloads,tags\norg/a,12,"[\'transformers\']"\norg/b,lots,"[]"\n')
    # a bad row is reported with its line number and skipped; the good ones are stored (exit 0)
    proc = zoo(["sync", "--from-file", str(bad)])
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "stored 1 models" in proc.stdout
    assert "bad.csv:3: downloads 'lots' is not a non-negative whole number; row skipped" in proc.stderr
    # nothing valid at all: the rows are listed, then one error line, exit 2
    bad.write_text('model_id,downloads,tags\norg/b,lots,"[]"\n')
    proc = zoo(["sync", "--from-file", str(bad)])
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        "bad.csv:2: downloads 'lots'" in proc.stderr
        and proc.stderr.strip().splitlines()[-1] == f"zoo: error: {bad}: no valid catalog rows (1 skipped, see above)"
    )
    assert "does not exist" in _one_clear_line(zoo(["sync", "--from-file", str(tmp_path / "missing.csv")]))


def test_unreachable_database(zoo):
    err = _one_clear_line(zoo(["coverage"], ZOO_DATABASE_URL="postgresql://nobody@127.0.0.1:1/zoo"))
    assert "unreachable" in err and "127.0.0.1:1" in err


def test_bad_arguments_are_one_line_usage_errors(zoo):
    proc = zoo(["run", "--top", "-3"])
    assert proc.returncode == 2 and "must be positive" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "cmd", ["sync", "run", "validate", "worker", "beat", "db", "serve", "report", "coverage", "seed"]
)
def test_every_command_has_help(zoo, cmd):
    proc = zoo([cmd, "--help"])
    assert proc.returncode == 0 and "usage: zoo " + cmd in proc.stdout


def test_sync_from_shared_file_stores_999_models(zoo):
    from tests.conftest import SNAPSHOT_CSV

    proc = zoo(["sync", "--from-file", str(SNAPSHOT_CSV)])
    assert proc.returncode == 0, proc.stderr
    assert "stored 999 models" in proc.stdout
