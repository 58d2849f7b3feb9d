"""One check of user input (issue 31): a backend typo or a week off the ISO calendar is one line
and exit 2 on every command, 422 in the API and a 4xx error page on a page, never 200 with n/a;
backend names are checked before torch is imported, with the closest known name offered."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from db import repository
from db.session import session_scope
from db.weeks import BadWeek, check_week
from tests.test_cli import _one_clear_line
from tests.test_storage import _result
from zoo_runner.backends import spec_problem


def test_weeks_are_iso_weeks_of_the_calendar():
    assert check_week("2026-W49") == "2026-W49" and check_week(None) is None
    assert check_week("2026-W53") == "2026-W53"  # 2026 has 53 ISO weeks
    for bad in ("2026-99", "W49", "2026-W60", "2026-W00", "2025-W53", "2026-W4"):
        with pytest.raises(BadWeek):
            check_week(bad)


def test_backend_typos_get_the_closest_name_and_no_test_only_backends():
    assert "did you mean 'neuron'" in spec_problem("nueron")
    assert "did you mean 'cpu+inductor'" in spec_problem("cpu+inductr")
    assert spec_problem("cpu+inductor") is None and spec_problem("neuron+neuron") is None
    assert "did you mean 'neuron+neuron'" in spec_problem("neuron+neuro")  # the compiler fixed, not the device
    from zoo_runner.backends import typo_problem

    assert "did you mean 'neuron'" in typo_problem("nueron")
    # a compiler alone names its CPU spec; names are lowercase, whatever the case typed
    assert "did you mean 'cpu+openvino'" in typo_problem("openvino")
    assert "did you mean 'cpu+openvino'" in typo_problem("OpenVINO")
    assert "did you mean 'cpu+openvino'" in typo_problem("cpu+OpenVINO")
    assert "did you mean 'cpu+inductor'" in typo_problem("CPU+Inductor")
    assert "did you mean 'cpu+onnxrt@bfloat16'" in typo_problem("onnxrt@bfloat16")
    # a name nothing close to a known one is torch's to judge (it may register it), not refused before torch
    assert typo_problem("cuda+eager_noexcept") is None and typo_problem("cpu+tensorrt") is None
    from zoo_runner.backends import compiler_available

    ok, why = compiler_available("inductr")
    assert not ok and "did you mean 'inductor'" in why and "TESTING_ONLY" not in why


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["report", "--week", "2026-99"], "not an ISO week"),
        (["report", "--week", "W49"], "not an ISO week"),
        (["report", "--week", "2026-W60"], "not an ISO week"),
        (["coverage", "--week", "2026-99"], "not an ISO week"),
        (["report", "--week", "2025-W53"], "52 ISO weeks"),
        (["coverage", "--backend", "nueron"], "did you mean 'neuron'"),
        (["report", "--backend", "nueron"], "did you mean 'neuron'"),
        (["report", "--week", "2026-W10"], "no results in 2026-W10"),
        (["validate", "arch:BertModel", "--backend", "nueron"], "did you mean 'neuron'"),
        (["run", "--top", "1", "--backend", "cpu+inductr"], "did you mean 'cpu+inductor'"),
        (["run", "--top", "1", "--backend", "openvino"], "did you mean 'cpu+openvino'"),
        (["compare", "--env", "default", "--env", "x", "--backend", "nueron"], "did you mean 'neuron'"),
        (["triage", "arch:BertModel", "--backend", "nueron"], "did you mean 'neuron'"),
        (
            [
                "bisect",
                "arch:BertModel",
                "--backend",
                "nueron",
                "--package",
                "openvino",
                "--good",
                "2025.0.0",
                "--bad",
                "2026.4.1",
            ],
            "did you mean 'neuron'",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2_on_the_cli(zoo, argv, words):
    proc = zoo(argv)
    assert proc.returncode == 2 and words in _one_clear_line(proc), proc.stderr


def test_a_backend_typo_answers_before_torch_is_imported():
    code = (
        "import sys, time; t0 = time.perf_counter(); from zoo.cli import main\n"
        "rc = main(['validate', 'arch:BertModel', '--backend', 'nueron'])\n"
        "print(rc, 'torch' in sys.modules, round(time.perf_counter() - t0, 2))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    rc, torch_loaded, seconds = proc.stdout.split()
    assert (rc, torch_loaded) == ("2", "False") and float(seconds) < 2, proc.stdout
    assert "did you mean 'neuron'" in proc.stderr


def test_api_says_422_and_pages_say_it_in_words(sqlite_url):
    from fastapi.testclient import TestClient

    from api.app import create_app

    with session_scope() as s:
        repository.store_result(s, _result("org/a", "pass", backend="cpu"))
    client = TestClient(create_app())
    for url in ("/api/v1/coverage?backend=nueron", "/api/v1/coverage?week=2025-W53", "/api/v1/reports/2025-W53"):
        r = client.get(url)
        assert r.status_code == 422 and r.headers["content-type"].startswith("application/json"), (url, r.text)
    pages = {
        "/?backend=bogus": "unknown device 'bogus'",
        "/?backend=nueron": "did you mean 'neuron'",
        "/ops?backend=cpu%2Binductr": "did you mean 'cpu+inductor'",
        "/failures?week=2025-W53": "52 ISO weeks",
        "/?week=2026-99": "not an ISO week",
        "/regressions?tier=huge": "tier",
    }
    for url, words in pages.items():
        r = client.get(url)
        assert r.status_code == 422 and r.headers["content-type"].startswith("text/html"), (url, r.status_code)
        message = re.search(r'id="error-message">([^<]*)<', r.text).group(1).replace("&#39;", "'")
        assert words in message, (url, message)
    r = client.get("/models/arch:Nope")  # an HTML route answers an HTML error
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html") and "arch:Nope" in r.text
    assert client.get("/?backend=cpu").status_code == 200  # a real one still shows
    assert client.get("/api/v1/models/arch:Nope").json()["detail"] == "unknown model arch:Nope"


def test_the_model_page_prints_numbers_for_people_with_the_exact_value_beside(sqlite_url):
    from fastapi.testclient import TestClient

    from api.app import create_app

    metrics = {
        "max_abs_diff": 1.326227800468871e-06,
        "max_rel_diff": 0.0001311617916713112,
        "cosine": 0.9999999999999412,
        "rmse_ratio": 1.0,
        "peak_mem_bytes": 568954880,
        "reference_ms": 12.345678,
    }
    with session_scope() as s:
        repository.store_result(s, _result("org/a", "pass", backend="cpu", metrics=metrics))
    page = TestClient(create_app()).get("/models/org/a").text
    assert 'title="1.326227800468871e-06">1.33e-06<' in page and ">0.000131<" in page
    assert ">543 MiB<" in page and 'title="568,954,880 B"' in page and ">12.3</span> ms" in page
    assert "1.326227800468871e-06 ·" not in page and "568,954,880 B</td>" not in page
    assert "None" not in page  # no graph_breaks measured: not "graph breaks None"
