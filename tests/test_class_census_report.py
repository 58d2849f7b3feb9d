"""The class census report counts failures with a known-failure row apart from those without."""

from __future__ import annotations

import json

from benchmarks.classes import _failed, _row, report


def test_failures_with_a_known_failure_row_are_marked_and_counted():
    fail = {"status": "reference_error", "error": {"signature": "ValueError: bad"}}
    rows = {
        "AModel": {"status": "pass", "details": {}},
        "BModel": {**fail, "details": {"known_failure": {"reason": "needs detectron2"}}},
        "CModel": {**fail, "details": {}},
    }
    text = report(rows, {n: {"base"} for n in rows}, 1.0, "header")
    assert "overall: 1/3 attempted classes have a valid reference (33.3%)" in text
    assert "1 of the 2 failures have a known-failure row" in text and "1 have none" in text
    assert "BModel*, CModel" in text


def test_a_rows_file_round_trips_and_retry_takes_only_the_classes_without_a_valid_reference(tmp_path):
    rows = {
        "AModel": {"status": "pass", "details": {}},
        "BModel": {"status": "reference_error", "error": {"signature": "ValueError: bad", "message": "boom"}},
        "CModel": {"status": "unsupported", "reason": "no input generator", "details": {}},
        "DModel": {"status": "mismatch", "details": {}},
    }
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps(_row(n, r)) + "\n" for n, r in rows.items()))
    assert _failed(rows_file) == ["BModel", "CModel"]
    assert json.loads(rows_file.read_text().splitlines()[1])["message"] == "boom"
