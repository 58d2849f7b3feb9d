"""``zoo doctor``: what this machine offers Zoo — sandbox features, backends and their declared
precision, services reachable. Prints no secret: URLs lose their passwords, tokens are only
said to be set or not."""

from __future__ import annotations

import os
import socket
from typing import Any
from urllib.parse import urlsplit

from zoo_runner.settings import settings

BACKENDS = (
    "cpu",
    "cpu+inductor",
    "cpu+aot_eager",
    "cuda",
    "cuda+inductor",
    "neuron",
    "neuron+neuron",
    "xpu",
    "mps",
    "xla",
    "cpu+openvino",
    "cpu+onnxrt",
)


def redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def reachable(host: str, port: int, timeout: float = 2.0) -> tuple[bool, str]:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True, f"{host}:{port} answers"
    except OSError as exc:
        return False, f"{host}:{port}: {exc.strerror or exc}"


def _service(url: str | None, default_port: int) -> dict[str, Any]:
    if not url:
        return {"configured": False}
    parts = urlsplit(url)
    out: dict[str, Any] = {"configured": True, "url": redact(url)}
    if parts.scheme.startswith("sqlite"):
        path = url.split("///", 1)[-1] if "///" in url else ""
        folder = os.path.dirname(os.path.abspath(path or "zoo.db"))
        out.update(reachable=os.access(folder, os.W_OK), detail=f"SQLite file in {folder}")
        return out
    ok, detail = reachable(parts.hostname or "127.0.0.1", parts.port or default_port)
    out.update(reachable=ok, detail=detail)
    return out


def sandbox_facts() -> dict[str, Any]:
    from zoo_runner import sandbox

    facts: dict[str, Any] = {"mode": "best_effort"}
    try:
        facts["mode"] = sandbox.mode()
        uid, gid = sandbox.sandbox_ids()
        caps = sandbox.capabilities(uid, gid)
    except Exception as exc:  # a bad ZOO_SANDBOX* value: say so, keep going
        facts["error"] = str(exc)
        if getattr(exc, "variable", None) == "ZOO_SANDBOX":  # the mode as it was set
            facts["mode"] = exc.value  # type: ignore[attr-defined]
        return facts
    facts.update(
        sandbox_uid=uid,
        sandbox_gid=gid,
        capabilities=caps,
        missing=sandbox.missing(caps),
        why=sandbox.why_missing(caps),
    )
    return facts


def backend_facts() -> list[dict[str, Any]]:
    from zoo_runner import backends

    try:
        backends.load_plugins()
    except Exception as exc:
        return [{"backend": "ZOO_PLUGINS", "available": False, "why": str(exc)}]
    out = []
    for text in BACKENDS:
        spec = backends.BackendSpec.parse(text)
        row: dict[str, Any] = {"backend": text}
        try:
            backends.check_backend(spec, parent=True)  # never starts a device's runtime here (neuron's)
            row["available"] = True
            row["precision"] = backends.declared_precision(spec) or "fp32"
        except Exception as exc:
            row.update(
                available=False, why=str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            )
        out.append(row)
    return out


def service_facts() -> dict[str, Any]:
    from db.session import database_url

    hub = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    facts = {
        "database": _service(database_url(), 5432),
        "broker": _service(settings().broker_url, 6379),
        "hub": {
            "url": redact(hub),
            "offline": os.environ.get("HF_HUB_OFFLINE", "") not in ("", "0", "false"),
            "token": "set" if os.environ.get("HF_TOKEN") else "not set",
        },
    }
    if not facts["hub"]["offline"]:
        parts = urlsplit(hub)
        facts["hub"]["reachable"], facts["hub"]["detail"] = reachable(
            parts.hostname or "huggingface.co", parts.port or (443 if parts.scheme == "https" else 80)
        )
    return facts


def collect() -> dict[str, Any]:
    return {"sandbox": sandbox_facts(), "backends": backend_facts(), "services": service_facts()}


def preconditions(backend: str) -> list[dict[str, Any]]:
    """``zoo doctor --backend SPEC``: the device plugin's checks for a first run here (each
    ``{check, ok, detail, fix}``), after whether the spec resolves; checked without starting the device's
    runtime. Raises UnknownBackend for a spec that names nothing."""
    from zoo_runner import backends

    backends.load_plugins()
    spec = backends.BackendSpec.parse(backend)
    problem = backends.spec_problem(str(spec))
    if problem:
        raise backends.UnknownBackend(problem)
    plugin = backends.device_plugin(spec.device)
    if plugin is not None and plugin.preconditions is not None:
        return plugin.preconditions()
    try:
        backends.check_backend(spec, parent=True)
        return [{"check": str(spec), "ok": True, "detail": "available", "fix": ""}]
    except Exception as exc:
        return [{"check": str(spec), "ok": False, "detail": str(exc).splitlines()[0][:200], "fix": ""}]


def render_preconditions(backend: str, checks: list[dict[str, Any]]) -> str:
    failed = [c for c in checks if not c["ok"]]
    lines = [f"{backend}: {len(checks) - len(failed)} of {len(checks)} preconditions hold"]
    for c in checks:
        mark = "ok  " if c["ok"] else "FAIL"
        lines.append(f"  {mark} {c['check']}: {c['detail']}" + (f" -> {c['fix']}" if c["fix"] else ""))
    return "\n".join(lines)


def _yes(value: Any) -> str:
    return "yes" if value else "no"


def _cgroup_line() -> str:
    from zoo_runner import cgroups

    kind = cgroups.mode()
    if kind == "none":
        return "no (rlimits only: memory written into memfds or /dev/shm is not counted)"
    return f"yes (cgroup {kind}: the budget counts shared memory, an oom is the kernel's own count)"


def render(facts: dict[str, Any]) -> str:
    lines = []
    sb = facts["sandbox"]
    caps = sb.get("capabilities", {})
    if sb.get("mode") == "off":
        lines.append(
            f"sandbox (ZOO_SANDBOX=off: NOT APPLIED, model processes run as uid {os.geteuid()}; "
            "what the machine allows:)"
        )
    else:
        lines.append(f"sandbox (ZOO_SANDBOX={sb.get('mode')}, model processes as uid {sb.get('sandbox_uid', '?')})")
    if "error" in sb:
        lines.append(f"  error: {sb['error']}")
    else:
        errors = caps.get("errors") or {}
        rows = [
            ("running as root (uid switch possible)", _yes(caps.get("root"))),
            (
                "uid switch, no capabilities left",
                _yes(caps.get("uid_switched") and caps.get("capabilities") == 0)
                + (f" ({errors['uid']})" if "uid" in errors else ""),
            ),
            ("user namespace (not root)", _yes(caps.get("userns"))),
            (
                "network namespace, loopback only",
                _yes(caps.get("netns"))
                + (f" ({errors.get('namespaces', '')})" if not caps.get("netns") and errors.get("namespaces") else ""),
            ),
            (
                "mount namespace: read-only, /tmp /run homes hidden",
                _yes(caps.get("mountns")) + (f" ({errors['mountns']})" if "mountns" in errors else ""),
            ),
            (
                "PID namespace, a /proc of its own",
                _yes(caps.get("pidns") and caps.get("private_proc"))
                + (f" ({errors['pidns']})" if "pidns" in errors else ""),
            ),
            ("no_new_privs", _yes(caps.get("no_new_privs"))),
            (
                "system-call filter: no namespaces, keyrings, mounts",
                _yes(caps.get("seccomp") and caps.get("unshare_denied"))
                + (f" ({errors['seccomp']})" if "seccomp" in errors else ""),
            ),
            ("a fresh session keyring per run", _yes(caps.get("keyring"))),
            ("cgroup per model process (memory, memfds, pids)", _cgroup_line()),
            ("rlimits (beside the memory budget)", ", ".join(caps.get("rlimits", [])) or "none"),
            (
                "bubblewrap",
                (caps.get("bwrap") or "not installed") + " (not used: Zoo unshares itself, inside forked processes)",
            ),
        ]
        lines += [f"  {k:<52} {v}" for k, v in rows]
        mode = sb.get("mode")
        if mode == "off":
            lines.append(
                "  ZOO_SANDBOX=off: none of the above is applied. Model processes run as Zoo's own user "
                f"(uid {os.geteuid()}), on its network and file system, and can write the caches other "
                "models read; only the environment allowlist and the staged HF_HOME remain"
            )
            lines.append("  this machine could give: " + ("every protection" if not sb.get("missing") else sb["why"]))
        elif sb.get("missing"):
            lines.append(
                f"  missing: {sb['why']} -> "
                + (
                    "strict refuses to run models"
                    if mode == "strict"
                    else "best_effort runs models without them, with a one-line warning"
                )
            )
        else:
            lines.append(f"  full sandbox available and applied (ZOO_SANDBOX={mode})")
        if not (caps.get("pidns") and caps.get("private_proc")):
            lines.append(
                "  without a PID namespace the process table is shared: a model process can read every "
                "other process's command line"
            )
        lines.append(
            "  shared in every mode: the process limit (ZOO_SANDBOX_NPROC) counts every model process of "
            "the uid together"
        )
    lines.append("backends (declared compute precision)")
    for b in facts["backends"]:
        lines.append(
            f"  {b['backend']:<16} "
            + (f"available   {b.get('precision')}" if b.get("available") else f"unavailable: {b.get('why', '')}")
        )
    lines.append("services")
    for name in ("database", "broker"):
        s = facts["services"][name]
        if not s.get("configured"):
            lines.append(f"  {name:<9} not configured" + (" (validations run in-process)" if name == "broker" else ""))
        else:
            lines.append(
                f"  {name:<9} {s['url']}: {'reachable' if s.get('reachable') else 'UNREACHABLE'} "
                f"({s.get('detail', '')})"
            )
    hub = facts["services"]["hub"]
    state = (
        "offline (HF_HUB_OFFLINE)"
        if hub["offline"]
        else ("reachable" if hub.get("reachable") else f"unreachable ({hub.get('detail', '')})")
    )
    lines.append(f"  {'hub':<9} {hub['url']}: {state}; HF_TOKEN {hub['token']}")
    return "\n".join(lines)
