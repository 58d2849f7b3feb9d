"""The class census report counts failures with a known-failure row apart from those without."""

from __future__ import annotations

from benchmarks.classes import report


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
