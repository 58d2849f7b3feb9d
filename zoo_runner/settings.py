"""Every ``ZOO_*`` environment variable Zoo reads, in one place: :class:`Settings`.

Read with :func:`settings`, which reads ``os.environ`` on every call: nothing is read at import
time and no value outlives the environment it came from, so a changed environment (a test's
monkeypatch, the allowlisted environment a model process starts with) is seen at once. It is
cheap: no I/O, and a Settings built from the same ``ZOO_*`` values is reused (it is frozen).
A bad value raises :class:`ConfigError` (one line naming the variable) when that variable is
read, and only then: a bad ``ZOO_RATE_LIMIT`` does not stop a worker that never reads it.

Where a variable has a value that depends on something else (the machine, another variable), its
field is unset (None) and the code that reads it says what unset means; the README's
"Configuration" table is :func:`markdown_table` (``python -m zoo_runner.settings`` prints it).

Not here, on purpose: variables only the tests and benchmarks read (``ZOO_TEST_*``, ``ZOO_BENCH_*``,
``ZOO_FAKE_NEURON_EXTRA_OPS``, ``ZOO_REQUIRE_SERVICES``; read in tests/ and benchmarks/) and the
ones only scripts/setup.sh reads (``ZOO_VENV``, ``ZOO_TORCH``). Variables Zoo writes for a model
process (``ZOO_REFERENCE_CACHE``, the allowlist in :mod:`zoo_runner.sandbox`) are read back here
by the child.
"""

from __future__ import annotations

import os
import sys
import types
import typing
from typing import Any, Literal

from pydantic import Field, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from .exceptions import ConfigError, ZooError

SANDBOX_MODES = ("off", "best_effort", "strict")
DEFAULT_SANDBOX_UID = 65533  # Debian reserves 65000-65533 and allocates none of them to accounts
DEFAULT_REFERENCE_CACHE_MB = 2048
DEFAULT_API_MAX_BODY = 1 << 20  # 1 MiB: POST /validations with 1,000 ids of the longest allowed length is 260 KB
LAUNCHERS = ("forkserver", "spawn")


class _Bad(ValueError):
    """A validator's refusal: ``message`` is the whole line, ``error`` the ZooError class to raise."""

    def __init__(self, message: str, error: type[ZooError] = ConfigError) -> None:
        super().__init__(message)
        self.message, self.error = message, error


class _Invalid:
    """Stands in for a field whose value did not validate; reading the field raises the error,
    with ``variable`` and ``value`` (the variable's name and its value as set) on it."""

    __slots__ = ("error", "message", "variable", "value")

    def __init__(self, error: type[ZooError], message: str, variable: str, value: Any) -> None:
        self.error, self.message, self.variable, self.value = error, message, variable, value

    def exception(self) -> ZooError:
        exc = self.error(self.message)
        exc.variable, exc.value = self.variable, self.value  # type: ignore[attr-defined]
        return exc


def _default_launcher() -> str:
    return "forkserver" if sys.platform.startswith("linux") else "spawn"


def _var(name: str, description: str, default: Any = None, **kw: Any) -> Any:
    return Field(default, validation_alias=name, description=description, **kw)


class Settings(BaseSettings):
    """The ``ZOO_*`` environment, typed. Build it with :func:`settings`."""

    model_config = SettingsConfigDict(case_sensitive=True, extra="ignore", frozen=True)

    # ---- database, broker, API
    database_url: str = _var(
        "ZOO_DATABASE_URL",
        "results database URL (postgresql://... or sqlite:///...); empty or unset: zoo.db in the working directory",
        "",
    )
    forwarded_allow_ips: str = _var(
        "ZOO_FORWARDED_ALLOW_IPS",
        "comma-separated proxy addresses whose X-Forwarded-For/-Proto `zoo serve` trusts (* for any); "
        "empty: none, the client is the peer address",
        "",
    )
    query_cache_s: float = _var(
        "ZOO_QUERY_CACHE_S", "seconds the dashboards' and API's read queries are cached (0 disables)", 300.0
    )
    broker_url: str | None = _var(
        "ZOO_BROKER_URL",
        "Celery broker URL; unset or empty: `zoo run` and the API validate in-process "
        "(a worker started without it uses redis://127.0.0.1:6379/0)",
    )
    api_keys: str = _var("ZOO_API_KEYS", "comma-separated API keys the write endpoints accept (X-API-Key)", "")
    rate_limit: float = _var(
        "ZOO_RATE_LIMIT", "API requests per minute per client IP (0 switches the limit off)", 600.0
    )
    api_max_body: int = _var(
        "ZOO_API_MAX_BODY", "largest API request body, in bytes (0: no limit)", DEFAULT_API_MAX_BODY
    )

    # ---- workers and beat
    task_time_limit: int = _var("ZOO_TASK_TIME_LIMIT", "seconds: hard time limit of one worker task", 3600)
    visibility_timeout: int | None = _var(
        "ZOO_VISIBILITY_TIMEOUT",
        "seconds an unacknowledged message waits before the broker redelivers it; unset: the hard limit + 600",
    )
    visibility_margin: int = _var(
        "ZOO_VISIBILITY_MARGIN", "seconds the visibility timeout must exceed the hard time limit by", 60
    )
    soft_shutdown_timeout: int = _var(
        "ZOO_SOFT_SHUTDOWN_TIMEOUT", "seconds a worker lets a running task finish after SIGTERM", 30
    )
    max_attempts: int = _var(
        "ZOO_MAX_ATTEMPTS", "deliveries of one task before it is stored as a permanent failure (at least 1)", 3
    )
    schedule_backends: str = _var(
        "ZOO_SCHEDULE_BACKENDS",
        "comma-separated backend specs beat schedules; empty: ZOO_SCHEDULE_BACKEND, else cpu",
        "",
    )
    schedule_backend: str = _var("ZOO_SCHEDULE_BACKEND", "older name of ZOO_SCHEDULE_BACKENDS (one backend)", "")
    schedule_tier: str = _var("ZOO_SCHEDULE_TIER", "tier of the scheduled refreshes and sweeps", "tiny")
    daily_top_k: int = _var("ZOO_DAILY_TOP_K", "models the daily refresh validates", 100)
    beat_sweep_every_s: float | None = _var(
        "ZOO_BEAT_SWEEP_EVERY_S", "send the weekly sweep every this many seconds (tests, demos); unset: Mondays 00:30"
    )
    beat_lock_ttl: float = _var(
        "ZOO_BEAT_LOCK_TTL", "seconds a standby beat waits for the leader's lock to expire (at least 3)", 30.0
    )

    # ---- catalog and planning
    sync_top: int = _var("ZOO_SYNC_TOP", "how many of the Hub's most-downloaded models an automatic sync takes", 1000)
    plan_budget_s: float = _var("ZOO_PLAN_BUDGET_S", "seconds a sweep spends planning model groups", 1800.0)

    # ---- engine: plugins, model processes, caches
    plugins: str = _var("ZOO_PLUGINS", "comma-separated modules imported to register more backends", "")
    launcher: Literal["forkserver", "spawn"] = Field(
        default_factory=_default_launcher,
        validation_alias="ZOO_LAUNCHER",
        description="how model processes start: forkserver (default on Linux) or spawn (default elsewhere); "
        "any other value: forkserver",
    )
    reference_cache: str | None = _var(
        "ZOO_REFERENCE_CACHE",
        "directory of cached CPU reference outputs (off, 0, false, no, none or empty: no cache); "
        "unset: ~/.cache/zoo/references",
    )
    reference_cache_mb: float = _var(
        "ZOO_REFERENCE_CACHE_MB",
        "megabytes the reference cache may hold (a value that is not a number: 2048)",
        float(DEFAULT_REFERENCE_CACHE_MB),
    )
    compile_cache: str = _var(
        "ZOO_COMPILE_CACHE", "directory of backends' compile caches; empty: ~/.cache/zoo/compiled-<sandbox uid>", ""
    )
    compile_cache_mb: float = _var(
        "ZOO_COMPILE_CACHE_MB",
        "megabytes the compile cache may hold; least recently used models' namespaces go first "
        "(a value that is not a number: 8192)",
        8192.0,
    )
    env_home: str = _var(
        "ZOO_ENV_HOME", "where `zoo env create` builds named version sets (venvs); empty: ~/.cache/zoo/envs", ""
    )
    triage_dir: str = _var(
        "ZOO_TRIAGE_DIR",
        "where `zoo triage --clusters` writes each cluster's repro.py and issue.md, and the API serves them from",
        "triage",
    )
    sandbox: Literal["off", "best_effort", "strict"] = _var(
        "ZOO_SANDBOX",
        "model-process sandbox: off, best_effort or strict (refuse without the full sandbox)",
        "best_effort",
    )
    remote_code: Literal["never", "sandboxed"] = _var(
        "ZOO_REMOTE_CODE",
        "custom-code repos (trust_remote_code): never (unsupported, reason remote_code; an architecture transformers "
        "ported from such repos runs on transformers' own classes, its code never fetched) or sandboxed (the "
        "repo's code files, fetched and hashed by Zoo, run only in the model process under the full sandbox)",
        "never",
    )
    sandbox_uid: int = _var("ZOO_SANDBOX_UID", "uid model processes run as when Zoo runs as root", DEFAULT_SANDBOX_UID)
    sandbox_gid: int | None = _var(
        "ZOO_SANDBOX_GID", "gid model processes run as when Zoo runs as root; unset: the uid"
    )
    sandbox_env: str = _var(
        "ZOO_SANDBOX_ENV", "comma-separated extra variables passed to model processes (never a secret)", ""
    )
    sandbox_keep: str = _var(
        "ZOO_SANDBOX_KEEP", "colon-separated directories model processes still see under a hidden one", ""
    )
    sandbox_fsize_mb: int = _var("ZOO_SANDBOX_FSIZE_MB", "largest file a model process may write, in megabytes", 8192)
    sandbox_nproc: int | None = _var(
        "ZOO_SANDBOX_NPROC", "process limit of a model process; unset: 64 per CPU, at least 4096"
    )
    sandbox_nofile: int = _var("ZOO_SANDBOX_NOFILE", "open files a model process may hold at once", 4096)
    sandbox_shm_mb: int = _var("ZOO_SANDBOX_SHM_MB", "megabytes of /dev/shm a model process gets", 512)
    sandbox_as_headroom_gb: int = _var(
        "ZOO_SANDBOX_AS_HEADROOM_GB",
        "address space a model process may reserve beyond its memory budget, in GiB (shared memory counts "
        "against it); none on a device whose runtime reserves more (cuda)",
        48,
    )
    sandbox_disk_mb: int = _var(
        "ZOO_SANDBOX_DISK_MB",
        "megabytes a model process may write in all (its work directory and its compile-cache namespace); "
        "past it the process is killed",
        16384,
    )
    target_budget_s: float = _var(
        "ZOO_TARGET_BUDGET_S",
        "seconds the backend stage (compile and run on the backend) of a census or tiny validation may take, "
        "within its whole budget (a first compile into a cold cache adds its reserve); past it the model process "
        "is a timeout of that stage; 0: only the whole budget",
        300.0,
        ge=0,
    )
    model_threads: int | None = _var(
        "ZOO_MODEL_THREADS",
        "CPU threads of each model process's torch; unset: the cores shared out among the model processes "
        "run at once (--jobs, a worker's --concurrency), else torch's default",
    )
    neuron_cores: str = _var(
        "ZOO_NEURON_CORES",
        "the NeuronCores Zoo's neuron model processes may use on this host, e.g. 0-31 or 0,1,4-7; empty: the "
        "parent's NEURON_RT_VISIBLE_CORES, else every core of the /dev/neuron* devices (ZOO_NEURON_CORES_PER_DEVICE "
        "each), else core 0",
        "",
    )
    neuron_cores_per_device: int = _var(
        "ZOO_NEURON_CORES_PER_DEVICE",
        "logical NeuronCores per /dev/neuron* device when ZOO_NEURON_CORES is empty (Trn2 at its default LNC=2: 4; "
        "Trn1 and Inf2: 2)",
        4,
        ge=1,
    )
    neuron_cores_per_process: int = _var(
        "ZOO_NEURON_CORES_PER_PROCESS",
        "NeuronCores each neuron model process claims (NEURON_RT_VISIBLE_CORES); --jobs defaults to the core sets",
        1,
        ge=1,
    )
    device_lock_dir: str = _var(
        "ZOO_DEVICE_LOCK_DIR",
        "where model processes' device claims are locked host-wide (one lock file per NeuronCore set); empty: "
        "/run/lock/zoo as root, else ~/.cache/zoo/locks",
        "",
    )
    neuron_custom_code: bool = _var(
        "ZOO_NEURON_CUSTOM_CODE",
        "1: custom code (ZOO_REMOTE_CODE=sandboxed) may run on neuron; AWS: a process with access to the Neuron "
        "devices has unrestricted access to the instance's physical memory, so it is refused by default",
        False,
    )
    neuron_cold_compile_s: float = _var(
        "ZOO_NEURON_COLD_COMPILE_S",
        "seconds added to a neuron+neuron model's timeout while its compile cache is cold (a first neuronx-cc "
        "compile may take minutes)",
        900.0,
        ge=0,
    )
    openvino_inference_precision_hint: str = _var(
        "ZOO_OPENVINO_INFERENCE_PRECISION_HINT",
        "inference precision asked of OpenVINO: f32, bf16 or f16; empty: OpenVINO's own choice",
        "",
    )

    def __getattribute__(self, name: str) -> Any:
        value = super().__getattribute__(name)
        if isinstance(value, _Invalid):
            raise value.exception()
        return value

    # ---- how values are read (the same as when each module read os.environ itself)

    @field_validator("sandbox", mode="before")
    @classmethod
    def _sandbox_mode(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        mode = value.strip().lower().replace("-", "_") or "best_effort"
        if mode not in SANDBOX_MODES:
            raise _Bad(f"ZOO_SANDBOX must be one of {', '.join(SANDBOX_MODES)}, not {mode!r}")
        return mode

    @field_validator("launcher", mode="before")
    @classmethod
    def _launcher(cls, value: Any) -> Any:
        return value if value in LAUNCHERS else "forkserver"

    @field_validator(
        "sandbox_uid",
        "sandbox_gid",
        "sandbox_fsize_mb",
        "sandbox_nproc",
        "sandbox_nofile",
        "sandbox_shm_mb",
        "sandbox_as_headroom_gb",
        "sandbox_disk_mb",
        "model_threads",
        mode="before",
    )
    @classmethod
    def _sandbox_int(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        name, raw = _alias(info), value.strip()
        if not raw:
            return cls.model_fields[info.field_name].default
        try:
            number = int(raw)
        except ValueError:
            raise _Bad(f"{name} must be a whole number, not {raw!r}") from None
        if number < 1:
            raise _Bad(f"{name} must be at least 1, not {number}")
        return number

    @field_validator(
        "task_time_limit",
        "visibility_timeout",
        "visibility_margin",
        "soft_shutdown_timeout",
        "max_attempts",
        mode="before",
    )
    @classmethod
    def _seconds(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, str):
            return value
        raw = value.strip()
        if not raw:
            return cls.model_fields[info.field_name].default
        try:
            return int(float(raw))
        except ValueError:
            raise _Bad(f"{_alias(info)}={raw!r} is not a number of seconds") from None

    @field_validator("beat_sweep_every_s", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        return None if value == "" else _number(value, info, float)

    @field_validator("reference_cache_mb", "compile_cache_mb", mode="before")
    @classmethod
    def _lenient_mb(cls, value: Any, info: ValidationInfo) -> Any:
        try:
            return float(value)
        except ValueError:
            return float(cls.model_fields[info.field_name].default)

    @field_validator("query_cache_s", "rate_limit", "plan_budget_s", "beat_lock_ttl", mode="before")
    @classmethod
    def _float(cls, value: Any, info: ValidationInfo) -> Any:
        return _number(value, info, float)

    @field_validator("api_max_body", "sync_top", "daily_top_k", mode="before")
    @classmethod
    def _int(cls, value: Any, info: ValidationInfo) -> Any:
        return _number(value, info, int)


def _alias(info: ValidationInfo) -> str:
    return str(Settings.model_fields[info.field_name].validation_alias)


def _number(value: Any, info: ValidationInfo, kind: type) -> Any:
    """Python's own int()/float() of a string (what each reader did before), as one clear line."""
    if not isinstance(value, str):
        return value
    try:
        return kind(value)
    except ValueError:
        what = "a whole number" if kind is int else "a number"
        raise _Bad(f"{_alias(info)}={value!r} is not {what}") from None


def _error(err: Any) -> _Invalid:
    name, value = str(err["loc"][0]), err.get("input")
    cause = (err.get("ctx") or {}).get("error")
    if isinstance(cause, _Bad):
        return _Invalid(cause.error, cause.message, name, value)
    return _Invalid(ConfigError, f"{name}={value!r} is not valid: {err.get('msg', 'bad value')}", name, value)


def _build() -> Settings:
    try:
        return Settings()
    except ValidationError as exc:
        errors = {str(err["loc"][0]): _error(err) for err in exc.errors() if err.get("loc")}
    # the other variables as they are, the bad ones at their defaults for now ...
    by_alias = {str(f.validation_alias): (name, f) for name, f in Settings.model_fields.items()}
    out = Settings(**{alias: by_alias[alias][1].get_default(call_default_factory=True) for alias in errors})
    for alias, invalid in errors.items():  # ... then raising their error when read
        out.__dict__[by_alias[alias][0]] = invalid
    return out


# Settings by the ZOO_* environment they were built from: the key is today's environment, so an
# entry is never stale (unlike a cache of the first read); it only saves pydantic's ~1 ms a call.
_BUILT: dict[tuple[tuple[str, str], ...], Settings] = {}


def settings() -> Settings:
    """The ``ZOO_*`` environment as it is now (read on every call: never stale; a frozen object).
    A field whose variable has a bad value raises its :class:`ConfigError` when it is read."""
    key = tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("ZOO_")))
    built = _BUILT.get(key)
    if built is None:
        if len(_BUILT) >= 64:
            _BUILT.clear()
        built = _BUILT[key] = _build()
    return built


# ---------------------------------------------------------------- documentation


def _type_text(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is Literal:
        return " / ".join(typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " / ".join(_type_text(a) for a in typing.get_args(annotation) if a is not type(None))
    return getattr(annotation, "__name__", str(annotation))


def _default_text(field: Any) -> str:
    if field.default_factory is not None:
        return "see meaning"
    if field.default is None:
        return "unset"
    if field.default == "":
        return "empty"
    value = field.default
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def markdown_table() -> str:
    """The README's table of every variable: name, type, default, meaning."""
    rows = ["| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
    for field in Settings.model_fields.values():
        meaning = (field.description or "").replace("|", "\\|")
        rows.append(
            f"| `{field.validation_alias}` | {_type_text(field.annotation)} | {_default_text(field)} | {meaning} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
