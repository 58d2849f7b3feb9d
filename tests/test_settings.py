"""zoo_runner.settings: every ZOO_* variable the product reads, read at call time, documented."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from zoo_runner import reference_cache, sandbox
from zoo_runner.exceptions import BadInput
from zoo_runner.settings import ConfigError, Settings, markdown_table, settings

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("zoo_runner", "db", "services", "workers", "api", "dashboards", "zoo")
ALIASES = [str(f.validation_alias) for f in Settings.model_fields.values()]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in list(os.environ):
        if name in ALIASES:
            monkeypatch.delenv(name)


# ---------------------------------------------------------------- one place, documented


def _env_reads(source: str) -> list[str]:
    """The ZOO_* names ``source`` reads from os.environ / os.getenv (module-level constants followed)."""
    tree = ast.parse(source)
    consts = {
        t.id: node.value.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
        for t in node.targets
        if isinstance(t, ast.Name)
    }

    def name_of(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return consts.get(node.id)
        return None

    def is_environ(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
            isinstance(node, ast.Name) and node.id == "environ"
        )

    # helpers that read the variable their first parameter names (def _env_int(name, ...))
    readers = set()
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef) and fn.args.args:
            param = fn.args.args[0].arg
            for node in ast.walk(fn):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and is_environ(node.func.value)
                    and node.args
                    and isinstance(node.args[0], ast.Name)
                    and node.args[0].id == param
                ):
                    readers.add(fn.name)

    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in readers and node.args:
            key = name_of(node.args[0])
        elif isinstance(node, ast.Call) and node.args:
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault") and is_environ(f.value):
                key = name_of(node.args[0])
            elif (isinstance(f, ast.Attribute) and f.attr == "getenv") or (
                isinstance(f, ast.Name) and f.id == "getenv"
            ):
                key = name_of(node.args[0])
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and is_environ(node.value):
            key = name_of(node.slice)
        elif isinstance(node, ast.Compare) and any(is_environ(c) for c in node.comparators):
            key = name_of(node.left)
        if key and key.startswith("ZOO_"):
            found.append(key)
    # and anything the AST walk could miss: a ZOO_ name on the same line as a read of the environment
    for line in source.splitlines():
        if re.search(r"(environ\b[^#]*|getenv\([^#]*)['\"]ZOO_", line):
            found.append(line.strip())
    return found


def test_the_checker_finds_direct_reads():
    for snippet in (
        'import os\nx = os.environ.get("ZOO_X", "1")',
        'import os\nx = os.getenv("ZOO_X")',
        'import os\nx = os.environ["ZOO_X"]',
        'import os\nx = "ZOO_X" in os.environ',
        'import os\nENV = "ZOO_X"\nx = os.environ.get(ENV, "").strip()',
        'from os import environ\nx = environ.get("ZOO_X")',
        'import os\ndef _env_int(name, d):\n    return int(os.environ.get(name, d))\nx = _env_int("ZOO_X", 1)',
    ):
        assert _env_reads(snippet), snippet
    assert not _env_reads('env = {}\nenv["ZOO_X"] = "off"\nx = env["ZOO_X"]')


def test_no_product_module_reads_a_zoo_variable_itself():
    offenders = {}
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "zoo_runner" / "settings.py":
                continue
            reads = _env_reads(path.read_text())
            if reads:
                offenders[str(path.relative_to(ROOT))] = reads
    assert not offenders, f"read these through zoo_runner.settings.settings(): {offenders}"


def test_every_variable_is_in_the_readme_table():
    readme = (ROOT / "README.md").read_text()
    assert "## Configuration" in readme
    for alias in ALIASES:
        assert f"| `{alias}` |" in readme, alias
    assert markdown_table() in readme, "README's table is stale: paste `python -m zoo_runner.settings` into it"


def test_every_field_has_a_variable_and_a_description():
    assert len(set(ALIASES)) == len(ALIASES) >= 30
    for name, field in Settings.model_fields.items():
        assert str(field.validation_alias).startswith("ZOO_"), name
        assert field.description, name


# ---------------------------------------------------------------- read at call time, as before


def test_values_are_read_when_asked_for(monkeypatch):
    assert settings().sync_top == 1000
    monkeypatch.setenv("ZOO_SYNC_TOP", "7")
    assert settings().sync_top == 7
    monkeypatch.setenv("ZOO_SYNC_TOP", "8")
    assert settings().sync_top == 8
    monkeypatch.delenv("ZOO_SYNC_TOP")
    assert settings().sync_top == 1000


def test_names_are_case_sensitive(monkeypatch):
    monkeypatch.setenv("zoo_sync_top", "7")
    assert settings().sync_top == 1000


def test_settings_are_frozen():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        settings().sync_top = 3  # type: ignore[misc]


def test_empty_and_unset_stay_apart(monkeypatch):
    from workers.celery_app import broker_url

    assert settings().broker_url is None and broker_url() == "redis://127.0.0.1:6379/0"
    monkeypatch.setenv("ZOO_BROKER_URL", "")
    assert settings().broker_url == "" and broker_url() == ""
    assert reference_cache.configured_dir() == reference_cache.default_dir()
    monkeypatch.setenv("ZOO_REFERENCE_CACHE", "")
    assert reference_cache.configured_dir() is None
    monkeypatch.setenv("ZOO_SCHEDULE_BACKEND", "cuda")
    monkeypatch.setenv("ZOO_SCHEDULE_BACKENDS", "")
    from workers.timetable import beat_schedule, schedule_backends

    assert schedule_backends() == ["cuda"]
    monkeypatch.setenv("ZOO_BEAT_SWEEP_EVERY_S", "")
    assert beat_schedule()["weekly-sweep"]["schedule"].__class__.__name__ == "crontab"
    monkeypatch.setenv("ZOO_BEAT_SWEEP_EVERY_S", "2.5")
    assert beat_schedule()["weekly-sweep"]["schedule"].total_seconds() == 2.5


def test_sandbox_numbers_keep_their_defaults_and_errors(monkeypatch):
    assert sandbox.sandbox_ids() == (65533, 65533)
    monkeypatch.setenv("ZOO_SANDBOX_UID", " 4000 ")
    assert sandbox.sandbox_ids() == (4000, 4000)
    monkeypatch.setenv("ZOO_SANDBOX_GID", "")
    assert sandbox.sandbox_ids() == (4000, 4000)
    monkeypatch.setenv("ZOO_SANDBOX_GID", "4001")
    assert sandbox.sandbox_ids() == (4000, 4001)
    monkeypatch.setenv("ZOO_SANDBOX_UID", "abc")
    with pytest.raises(BadInput, match=r"^ZOO_SANDBOX_UID must be a whole number, not 'abc'$"):
        sandbox.sandbox_ids()
    monkeypatch.setenv("ZOO_SANDBOX_UID", "0")
    with pytest.raises(BadInput, match=r"^ZOO_SANDBOX_UID must be at least 1, not 0$"):
        sandbox.sandbox_ids()


def test_a_bad_value_fails_where_it_is_read_and_only_there(monkeypatch):
    monkeypatch.setenv("ZOO_RATE_LIMIT", "lots")
    monkeypatch.setenv("ZOO_SYNC_TOP", "12")
    s = settings()
    assert s.sync_top == 12  # the other variables still read
    with pytest.raises(ConfigError, match=r"^ZOO_RATE_LIMIT='lots' is not a number$") as info:
        _ = s.rate_limit
    assert isinstance(info.value, BadInput) and "\n" not in str(info.value)
    with pytest.raises(ConfigError):  # every time
        _ = s.rate_limit
    from api.middleware import RateLimit

    with pytest.raises(ConfigError, match="ZOO_RATE_LIMIT"):
        RateLimit(None)


def test_values_read_leniently_before_still_are(monkeypatch):
    monkeypatch.setenv("ZOO_REFERENCE_CACHE_MB", "lots")
    assert reference_cache._max_bytes() == 2048 << 20
    monkeypatch.setenv("ZOO_REFERENCE_CACHE_MB", "0.5")
    assert reference_cache._max_bytes() == 1 << 19
    monkeypatch.setenv("ZOO_LAUNCHER", "threads")
    assert settings().launcher == "forkserver"
    monkeypatch.setenv("ZOO_LAUNCHER", "spawn")
    assert settings().launcher == "spawn"
    monkeypatch.setenv("ZOO_SANDBOX", " Best-Effort ")
    assert sandbox.mode() == "best_effort"


def test_doctor_shows_a_bad_mode_as_it_was_set(monkeypatch):
    from zoo.doctor import sandbox_facts

    monkeypatch.setenv("ZOO_SANDBOX", "sometimes")
    facts = sandbox_facts()
    assert facts["mode"] == "sometimes" and "ZOO_SANDBOX must be one of" in facts["error"]


def test_a_child_process_reads_its_own_environment():
    env = {**os.environ, "ZOO_SYNC_TOP": "5", "ZOO_SANDBOX": "off"}
    code = "from zoo_runner.settings import settings; s = settings(); print(s.sync_top, s.sandbox)"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["5", "off"]


def test_a_bad_worker_limit_is_one_line_and_exit_2():
    env = {**os.environ, "ZOO_TASK_TIME_LIMIT": "an hour"}
    proc = subprocess.run(
        [sys.executable, "-c", "import workers.celery_app"], env=env, cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == "zoo: error: ZOO_TASK_TIME_LIMIT='an hour' is not a number of seconds"
