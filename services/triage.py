"""Triage a failure end to end: whose bug it is, a minimal standalone repro, a draft issue.

:func:`triage_model` validates the model again in a sandboxed model process with the triage on
(:mod:`zoo_runner.triage.ladder`: the attribution ladder, the failing FX graph, torch's FX
minifier), checks the graph it hands back (:func:`zoo_runner.triage.graph.check_graph`), writes
``repro.py`` (only torch and what registers the backend), ``repro.safetensors`` and ``issue.md``
into the output directory, stores the row with ``details.triage`` and returns the summary that
``zoo triage`` prints. :func:`triage_clusters` does it for the largest clusters of a backend.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from db import queries
from db.repository import store_result
from db.session import session_scope
from zoo_runner.backends import BackendSpec, compiler_plugin, device_plugin
from zoo_runner.compare import BUDGETS
from zoo_runner.exceptions import NotSupported
from zoo_runner.hub import prepare
from zoo_runner.launcher import run_isolated
from zoo_runner.precision import factor
from zoo_runner.request import ValidationRequest
from zoo_runner.result import failure_result
from zoo_runner.settings import settings
from zoo_runner.statuses import BACKEND_FAILING, Status
from zoo_runner.triage.graph import BadGraph, check_graph, check_tensors, plain, render_repro

log = logging.getLogger(__name__)

BUILTIN = {"inductor", "eager", "aot_eager", "cudagraphs"}
LADDERLESS = {Status.TIMEOUT.value, Status.CRASH.value, Status.OOM.value}


def standalone_backend(compiler: str) -> tuple[str, str] | None:
    """For a dynamo backend Zoo ships itself (a :class:`CompilerPlugin` with ``backend``): its
    module's source without Zoo (relative imports and the ``register_compiler`` call removed),
    registering the backend with dynamo under its name; ``(module name, source)``, else None."""
    import ast
    import inspect

    plugin = compiler_plugin(compiler)
    fn = getattr(plugin, "backend", None)
    if fn is None:
        return None
    module = inspect.getmodule(fn)
    if module is None or not module.__name__.startswith("zoo_runner."):
        return None
    tree = ast.parse(inspect.getsource(module))
    keep = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            continue
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            name = getattr(node.value.func, "id", "")
            if name == "register_compiler":
                continue
        keep.append(node)
    tree.body = keep
    source = (
        f"# {compiler!r}: the dynamo backend Zoo ships in {module.__name__}, without Zoo (written by zoo triage)\n"
        + ast.unparse(tree)
        + f"\n\nimport torch._dynamo\n\nif {compiler!r} not in torch._dynamo.list_backends(exclude_tags=()):\n"
        f"    torch._dynamo.register_backend(name={compiler!r})({fn.__name__})\n"
    )
    return f"zoo_backend_{compiler}", source


def _imports(spec: BackendSpec, plugins: str | None, out: Path | None = None) -> list[str]:
    """The lines of a repro that register its backend with dynamo, from what Zoo knows of it: its
    compiler plugin's packages (``openvino.torch``), its device plugin's package (``torch_xla``), Zoo's
    own backend written beside the repro, else the ``ZOO_PLUGINS`` modules outside Zoo."""
    compiler = spec.compiler or ""
    if compiler in BUILTIN:
        return []
    shipped = standalone_backend(compiler)
    if shipped is not None:
        name, source = shipped
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / f"{name}.py").write_text(source)
        return [
            "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))",
            f"import {name}  # registers torch.compile(backend={compiler!r}): Zoo's own backend, beside this file",
        ]
    plugin, device = compiler_plugin(compiler), device_plugin(spec.device)
    mods = [*(plugin.packages if plugin else ()), *([device.package] if device and device.package else [])]
    if mods:
        what = f"torch.compile(backend={compiler!r})" if compiler else f"the device {spec.device!r}"
        return [f"import {m}  # registers {what}" for m in dict.fromkeys(mods)]
    mods = [m.strip() for m in (plugins or "").split(",") if m.strip() and not m.strip().startswith("zoo_runner")]
    return [f"import {m}  # registers torch.compile(backend={compiler!r})" for m in mods]


def _repro_command(row: dict[str, Any]) -> str:
    return f"zoo validate {row['model_id']} --backend {row['backend']} --tier {row['tier']}"


def write_repro(row: dict[str, Any], box: Path, out: Path, plugins: str | None) -> str | None:
    """``repro.py`` from the checked graph in ``box`` (None where there is none); returns its path."""
    from safetensors.torch import load_file

    tri = row["details"]["triage"]
    graph_file = box / "graph.json"
    if not graph_file.exists():
        return None
    tensors = load_file(str(box / "repro.safetensors"))
    check_tensors(tensors)
    data = check_graph(json.loads(graph_file.read_text()), set(tensors))  # checked again: nothing trusted
    spec = BackendSpec.parse(row["backend"])
    signature = (row.get("error") or {}).get("signature")
    if row["status"] != Status.MISMATCH and not (isinstance(signature, str) and signature):
        raise BadGraph("a failure without an error signature: nothing for a repro to expect")
    torch_level = data.get("level") == "torch"
    # a torch-level graph: one that fails as dynamo builds its guards (the default), or the graph dynamo
    # handed the backend where its ATen lowering does not fail (``expect``: the row's error or mismatch)
    expected = data.get("expect", "guards") if torch_level else None
    guards = expected == "guards"
    row_kind = "mismatch" if row["status"] == Status.MISMATCH else "error"
    if torch_level and not (expected == row_kind or (guards and row_kind == "error")):
        raise BadGraph(f"the graph expects {expected}, the row is {row_kind}")
    if row["status"] == Status.MISMATCH:
        # the budget the triage's graph-level judge applied (compare's fp32 rule on the graph's own fp32 and fp64)
        expect = {"kind": "mismatch", "factor": factor("fp32"), "floor": BUDGETS["float32"][1]}
    elif guards:  # the row failed building dynamo's guards: so must the repro
        expect = {"kind": "guards", "signature": (row.get("error") or {}).get("signature")}
    else:
        expect = {"kind": "error", "signature": (row.get("error") or {}).get("signature")}
    # the device raised in one ATen op of the model's eager run (or gave it other shapes than the CPU's):
    # the repro runs that op there, uncompiled
    on_device = tri.get("attribution") in ("device_eager", "device_compile") and spec.device != "cpu"
    device = spec.device if on_device else None
    eager = device is not None and tri.get("attribution") == "device_eager"
    if data.get("expect") == "shape":
        if not eager or row["status"] == Status.MISMATCH:
            raise BadGraph("a shape repro is a device's eager failure")
        expect = {"kind": "shape", "signature": expect.get("signature")}
    versions = ", ".join(f"{k} {v}" for k, v in sorted((row.get("versions") or {}).items()))
    about = (
        f"Minimal repro generated by Zoo for {row['model_id']} on {row['backend']} "
        f"(tier {row['tier']}, judged at {row.get('precision') or 'fp32'}).\n"
        f"Failure: {row['status']}: {(row.get('error') or {}).get('signature') or ''}\n"
        f"Attribution: {tri.get('attribution')} (the first rung of {_ladder_words(spec)} that fails).\n"
        + _what_the_repro_is(tri, device, eager, guards, torch_level, data.get("expect") == "shape")
        + f"Versions: {versions}\nIn Zoo: {_repro_command(row)}"
    )
    imports = _imports(spec, plugins, out)
    text = render_repro(data, compiler=spec.compiler or "eager", imports=imports,
                        expect=expect, about=about, device=device, eager=eager)  # fmt: skip
    try:
        compile(text, "repro.py", "exec")  # what does not parse is not written
    except SyntaxError as exc:
        raise BadGraph(f"the rendered repro does not parse: {exc.msg}") from None
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(box / "repro.safetensors", out / "repro.safetensors")
    (out / "repro.py").write_text(text, encoding="utf-8")
    return str(out / "repro.py")


def _ladder_words(spec: BackendSpec) -> str:
    """The attribution ladder's rungs, in words, for a repro's header."""
    if spec.device == "cpu":
        return "eager -> aot_eager -> the backend"
    return f"the CPU -> {spec.device} eager -> {spec.device} compiled"


def _what_the_repro_is(
    tri: dict[str, Any], device: str | None, eager: bool, guards: bool, torch_level: bool, shape: bool
) -> str:
    """A line of a repro's header: which graph it is and how it was cut down."""
    nodes, small = tri.get("graph_nodes"), tri.get("repro_nodes")
    if eager and shape:
        return (
            f"The model ran eagerly on {device}; no ATen op raised its error, but one gave other output shapes on "
            f"{device} than torch's: the repro calls that op (1 node) on {device} and on the CPU and compares them.\n"
        )
    if eager:
        return (
            f"The model ran eagerly on {device} and the device raised in one ATen op: the repro calls that op on "
            f"{device} with the same inputs (1 node), then on the CPU as a control.\n"
        )
    if guards:
        return (
            f"The graph the backend compiled last had {nodes} torch-level nodes; the failure comes as dynamo builds "
            f"its guards, so the repro calls it at torch level, cut to its shortest failing prefix: {small} nodes.\n"
        )
    if torch_level and device:
        return (
            f"The failing graph had {nodes} torch-level nodes; the repro compiles it for {device} as dynamo "
            f"hands it to the backend, and judges it against the same graph on the CPU, cut to its shortest failing "
            f"prefix: {small} nodes.\n"
        )
    if torch_level:
        return (
            f"The failing graph had {nodes} torch-level nodes; lowered to ATen it does not fail (the backend lowers "
            f"what dynamo hands it its own way), so the repro compiles it at torch level, as dynamo hands it to the "
            f"backend, cut to its shortest failing prefix: {small} nodes.\n"
        )
    return f"The failing FX graph had {nodes} nodes; minified by torch's FX minifier to {small}.\n"


def _md(text: Any) -> str:
    """A model process's words on one Markdown line: plain ASCII, Markdown's own characters escaped."""
    import re

    return re.sub(r"([`<>\[\]@*_#|!])", r"\\\1", plain(" ".join(str(text).split())))


def _fenced(text: str, lang: str = "") -> list[str]:
    """``text`` in a code fence longer than any run of backticks inside it."""
    import re

    fence = "`" * max(3, 1 + max((len(m) for m in re.findall(r"`+", text)), default=0))
    return [fence + lang, text.rstrip(), fence]


def issue_markdown(
    row: dict[str, Any],
    repro: str | None,
    cluster: dict[str, Any] | None = None,
    bisections: list[dict[str, Any]] | None = None,
) -> str:
    """The draft issue for the backend's tracker (every word a model process had a hand in escaped);
    ``bisections``: the stored ``zoo bisect`` outcomes of its models on the backend."""
    tri = row["details"].get("triage") or {}
    err = row.get("error") or {}
    sig = _md(err.get("signature") or row["status"])
    title = f"[{row['backend']}] {row['status']}: {sig[:120]}"
    lines = [f"# {title}", ""]
    lines += [f"**Attribution:** {_md(tri.get('attribution'))} — the first rung that reproduces it:", ""]
    for r in tri.get("ladder") or []:
        said = f" ({_md(r['signature'])})" if r.get("signature") else ""
        lines.append(f"- {_md(r['compiler'])} on {_md(r['device'])}: {_md(r['status'])}{said}")
    lines += ["", "**Versions:** " + ", ".join(f"{k} {v}" for k, v in sorted((row.get("versions") or {}).items())), ""]
    if repro:
        text = Path(repro).read_text()
        lines += [
            "**Repro** (standalone: torch and the backend only; "
            + (
                "the one ATen op at fault, run on the device and on the CPU"
                if tri.get("attribution") == "device_eager"
                else f"{tri.get('graph_nodes')} graph nodes minified to {tri.get('repro_nodes')}"
            )
            + "; weights in `repro.safetensors` beside it). `python repro.py` exits 1 "
            "when the failure reproduces:",
            "",
        ]
        if len(text.splitlines()) <= 300:
            lines += [*_fenced(text, "python"), ""]
        else:
            lines += ["See `repro.py`.", ""]
    else:
        why = f" — {_md(tri.get('note') or tri.get('unfinished'))}" if tri.get("note") or tri.get("unfinished") else ""
        lines += [f"**Repro:** the whole model: `{_repro_command(row)}`{why}", ""]
        if tri.get("attribution") == "backend":
            lines += [
                'It passes under `torch.compile(backend="eager")` and `"aot_eager"` on the same inputs, '
                "so dynamo and AOTAutograd alone do not fail: the backend's compile is what makes it fail.",
                "",
            ]
    if err.get("message"):
        lines += ["**Error:**", "", *_fenced(plain(err["message"][:1500])), ""]
    if cluster:
        lines += [
            f"**Affected:** {cluster['models']} models, {cluster['downloads']:,} downloads this week; largest: "
            + ", ".join(f"{e['model_id']} ({e['downloads']:,})" for e in cluster["example_models"][:5]),
            "",
        ]
        if "first_seen" in cluster:
            lines += [
                f"**Since:** first seen {cluster.get('first_seen') or 'this week'}; "
                f"the models last passed {cluster.get('last_pass') or 'never, in the stored history'}.",
                "",
            ]
    for b in bisections or []:
        tried = ", ".join(f"{_md(s['version'])} {_md(s['status'])}" for s in b["steps"])
        lines += [
            f"**First bad version:** {_md(b['package'])} {_md(b['first_bad'])} (last good {_md(b['last_good'])}) "
            f"for {_md(b['model_id'])}: {tried}. "
            + (f"Skipped (no verdict): {_md(', '.join(b['skipped']))}. " if b.get("skipped") else "")
            + f"`zoo bisect {b['model_id']} --backend {b['backend']} --package {b['package']} --good {b['good']} "
            f"--bad {b['bad']}`",
            "",
        ]
    lines += [
        f"Found by Zoo: `{_repro_command(row)}`; "
        f"triaged with `zoo triage {row['model_id']} --backend {row['backend']}`."
    ]
    return "\n".join(lines) + "\n"


def triage_model(
    model_id: str,
    backend: str,
    out: str | Path,
    tier: str = "tiny",
    precision: str = "auto",
    cluster: dict[str, Any] | None = None,
    store: bool = True,
    timeout_s: float | None = None,
    env: str | None = None,
) -> dict[str, Any]:
    """Validate and triage ``model_id`` on ``backend``; writes ``repro.py``, ``repro.safetensors``
    and ``issue.md`` under ``out``; returns the summary ``zoo triage`` prints."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    box = out / ".graph"
    shutil.rmtree(box, ignore_errors=True)
    req = ValidationRequest(model_id=model_id, backend=backend, tier=tier, precision=precision,
                            plugins=settings().plugins, triage=True, triage_outbox=str(box), env=env)  # fmt: skip
    if timeout_s:
        req.timeout_s = timeout_s
    try:  # the parent's policy and files first, as for any validation: a refusal is the row
        req, row = prepare(req), None
    except NotSupported as exc:
        row = failure_result(req, exc, Status.UNSUPPORTED, exc.reason).to_dict()
    if row is None:
        row = run_isolated(req)
    tri = row.setdefault("details", {}).setdefault("triage", {})
    stored_sig = (cluster or {}).get("signature")
    now_sig = (row.get("error") or {}).get("signature") or row["status"]
    if stored_sig and stored_sig != now_sig:  # the same model, another message: recorded, both kept
        tri["signature_changed"] = {"stored": stored_sig, "now": now_sig}
    repro = None
    if row["status"] in BACKEND_FAILING:
        try:
            repro = write_repro(row, box, out, req.plugins)
        except Exception as exc:  # whatever the model process handed back: refused, the row stands
            tri["refused"] = f"{type(exc).__name__}: {plain(str(exc))[:200]}"
    else:
        tri.setdefault(
            "attribution", "zoo" if row["status"] in (Status.REFERENCE_ERROR, Status.UNSUPPORTED) else "none"
        )
    shutil.rmtree(box, ignore_errors=True)
    issue = out / "issue.md"
    if row["status"] in BACKEND_FAILING:
        examples = [e["model_id"] for e in (cluster or {}).get("example_models", [])]
        with session_scope() as s:
            found = queries.bisections(s, list(dict.fromkeys([model_id, *examples])), backend)
        newest: dict[tuple[str, str], dict[str, Any]] = {}
        for b in found:  # newest first: one per model and package
            newest.setdefault((b["model_id"], b["package"]), b)
        issue.write_text(issue_markdown(row, repro, cluster, list(newest.values())[:3]))
    tri.update(repro=repro, issue=str(issue) if issue.exists() else None, dir=str(out.resolve()))
    if store:
        with session_scope() as s:
            store_result(s, row)
    summary = {
        "model_id": model_id,
        "backend": backend,
        "status": row["status"],
        "signature": (row.get("error") or {}).get("signature"),
        "attribution": tri.get("attribution"),
        "graph_nodes": tri.get("graph_nodes"),
        "repro_nodes": tri.get("repro_nodes"),
        "repro": repro,
        "issue": tri["issue"],
        **({"note": tri["note"]} if tri.get("note") else {}),
        **({"unfinished": tri["unfinished"]} if tri.get("unfinished") else {}),
        **({"ended": tri["ended"]} if tri.get("ended") else {}),
        **({"refused": tri["refused"]} if tri.get("refused") else {}),
        **({"signature_changed": tri["signature_changed"]} if tri.get("signature_changed") else {}),
        "finding": finding_key(tri.get("attribution"), out / "repro.py" if repro else None, row),
        **({"failed_input": row["details"]["failed_input"]} if row["details"].get("failed_input") else {}),
    }
    summary["finding_basis"] = finding_basis(summary)
    (out / "triage.json").write_text(json.dumps(summary, indent=2, default=str))
    return summary


FILES = ("repro.py", "issue.md", "repro.safetensors")


def finding_key(attribution: str | None, repro: Path | None, row: dict[str, Any]) -> str:
    """What a triage found, as a key: the attribution and the minimal repro's graph (its code, not
    its tensors' values), or, without a graph, the attribution and the signature. Clusters with the
    same key are one finding, whatever their messages said."""
    import hashlib

    if repro is not None and repro.is_file() and GUARDS_EXPECTED in repro.read_text():
        # a torch-level repro that fails alone as dynamo builds the guards of what the backend compiled:
        # one bug, whichever of its messages dynamo printed (it changes with how the graph is wrapped)
        what = f"{attribution}|guards|{row['status']}"
    elif repro is not None and repro.is_file():
        what = f"{attribution}|graph|{_graph_body(repro.read_text())}"
    elif ((row.get("details") or {}).get("failed_input") or {}).get("index"):
        # no graph fails alone: the failure comes at dynamo's recompile for a later input shape under
        # this backend (eager and aot_eager pass), whatever message dynamo's assertion prints this time
        what = f"{attribution}|recompile|{row['status']}|{row['details']['failed_input']['index']}"
    else:
        what = f"{attribution}|signature|{(row.get('error') or {}).get('signature') or row['status']}"
    return hashlib.sha1(what.encode()).hexdigest()[:12]


GUARDS_EXPECTED = "\nEXPECT = {'kind': 'guards'"  # a line of repro.py (comments start with #), never the header


def _graph_body(text: str) -> str:
    """The graph's code in a repro.py (its ``def graph``, up to what the template puts after it)."""
    marks = [i for i in (text.find("\ndef graph("), text.find("\nclass Graph(")) if i >= 0]
    if not marks:
        return text
    start = min(marks)
    ends = [i for i in (text.find(mark, start) for mark in ("\nFP64 = ", "\ndef signature(")) if i > start]
    return text[start : min(ends)] if ends else text[start:]


def finding_basis(summary: dict[str, Any]) -> str:
    """In words, what made clusters one finding (:func:`finding_key`)."""
    repro = Path(summary["repro"]) if summary.get("repro") else None
    if repro is not None and repro.is_file() and GUARDS_EXPECTED in repro.read_text():
        return (
            f"the same attribution ({summary.get('attribution')}) and status, and each cluster's repro fails alone "
            "as dynamo builds the guards of what the backend compiled (its message changes with how the graph is "
            "wrapped)"
        )
    if summary.get("repro"):
        return "the same attribution and the same minimal repro graph"
    if (summary.get("failed_input") or {}).get("index"):
        return (
            f"the same attribution ({summary.get('attribution')}), status, and the failure at dynamo's recompile "
            f"for input {summary['failed_input'].get('index')}, with no graph failing alone"
        )
    return "the same attribution and error signature"


def group_findings(done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Triaged clusters grouped by what the triage found (:func:`finding_key`): one entry per finding
    with its clusters, largest first."""
    groups: dict[str, dict[str, Any]] = {}
    for d in done:
        g = groups.setdefault(
            d.get("finding") or d.get("cluster") or "",
            {"finding": d.get("finding"), "attribution": d.get("attribution"), "basis": d.get("finding_basis"),
             "clusters": [], "models": 0, "downloads": 0, "repro": d.get("repro")},
        )  # fmt: skip
        g["clusters"].append(d.get("cluster"))
        g["models"] += d.get("cluster_models") or 0
        g["downloads"] += d.get("cluster_downloads") or 0
    return sorted(groups.values(), key=lambda g: (-g["downloads"], -len(g["clusters"])))


def cluster_key(signature: str) -> str:
    """A cluster's directory name: the first 12 hex digits of its signature's SHA-1."""
    import hashlib

    return hashlib.sha1(signature.encode()).hexdigest()[:12]


def backend_key(backend: str) -> str:
    """A backend spec as a directory name (``cpu+openvino`` stays; anything but ``[A-Za-z0-9+@._-]`` goes)."""
    import re

    return re.sub(r"[^A-Za-z0-9+@._-]", "_", backend)[:64]


def cluster_dir(root: str | Path, backend: str, signature: str) -> Path:
    """Where a cluster's triage goes: ``<root>/<backend>/<signature hash>``."""
    return Path(root) / backend_key(backend) / cluster_key(signature)


def attach_triage(clusters: dict[str, Any], root: str | Path | None = None) -> dict[str, Any]:
    """``clusters`` (from :func:`db.queries.failure_clusters`) with each triaged cluster's
    ``triage``: attribution, node counts and the API links to its ``repro.py`` and ``issue.md``."""
    root = Path(root or settings().triage_dir)
    backend = clusters.get("backend")
    if not backend:
        return clusters
    items = []
    for c in clusters.get("items") or []:
        d = cluster_dir(root, backend, c["signature"])
        summary_file = d / "triage.json"
        if c.get("owner", "backend") == "backend" and summary_file.is_file():
            try:
                summary = json.loads(summary_file.read_text())
            except (OSError, ValueError):
                summary = {}
            base = f"/api/v1/triage/{backend_key(backend)}/{d.name}"
            c = {
                **c,
                "triage": {
                    "attribution": summary.get("attribution"),
                    "model_id": summary.get("model_id") or "",
                    "graph_nodes": summary.get("graph_nodes"),
                    "repro_nodes": summary.get("repro_nodes"),
                    "repro_url": f"{base}/repro.py" if (d / "repro.py").is_file() else None,
                    "issue_url": f"{base}/issue.md" if (d / "issue.md").is_file() else None,
                },
            }
        items.append(c)
    return {**clusters, "items": items}


def triage_file(backend: str, cluster: str, name: str, root: str | Path | None = None) -> Path | None:
    """The file ``name`` of a triaged cluster, or None (names and keys checked: no path escapes)."""
    import re

    if name not in FILES or not re.fullmatch(r"[0-9a-f]{12}", cluster) or backend != backend_key(backend):
        return None
    if backend in (".", "..") or not backend:
        return None
    path = Path(root or settings().triage_dir) / backend / cluster / name
    return path if path.is_file() and not path.is_symlink() else None


def triage_clusters(
    backend: str, n: int, root: str | Path, tier: str = "tiny", timeout_s: float | None = None
) -> list[dict[str, Any]]:
    """Triage the ``n`` largest clusters of the backend's failures by downloads (its most downloaded
    model each; timeouts, crashes and ooms left out: their rows say where they stopped); each in
    ``cluster_dir(root, backend, signature)``, and what they found, grouped, in ``findings.json``."""
    with session_scope() as s:
        fc = queries.failure_clusters(s, backend=backend, tier=tier, limit=max(n, 1) * 3)
        fc = {**fc, "items": [dict(c) for c in fc["items"]]}  # the query's result is cached: never changed
        for c in fc["items"]:
            models = [e["model_id"] for e in c["example_models"]]
            c.update(queries.cluster_history(s, backend, fc["tier"] or tier, c["signature"], models))
    # a timeout, crash or oom is not re-run three times over: its row already says where it was stuck
    items = [c for c in fc["items"] if c.get("owner") == "backend" and not set(c["statuses"]) & LADDERLESS][:n]
    done = []
    for c in items:
        model = c["example_models"][0]["model_id"]
        c = {**c, "week": fc["week"], "triaged_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
        summary = triage_model(
            model, backend, cluster_dir(root, backend, c["signature"]), tier=tier, cluster=c, timeout_s=timeout_s
        )
        summary.update(cluster=c["signature"], cluster_models=c["models"], cluster_downloads=c["downloads"])
        done.append(summary)
    if not done:
        return done
    findings = group_findings(done)
    out = Path(root) / backend_key(backend)
    out.mkdir(parents=True, exist_ok=True)
    (out / "findings.json").write_text(json.dumps(findings, indent=2, default=str))
    return done
