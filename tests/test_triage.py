"""``zoo triage``: attribution, a minimal standalone repro and a draft issue (issue 28).

Two compile backends with one bug each (tests/plugins/triage_backends.py): one computes
``aten.gelu`` 10 % off, one refuses to compile it. For each, a real ``zoo triage`` (a sandboxed
model process, torch's FX minifier) must blame the backend, write a repro of at most 10 graph nodes
that imports neither Zoo nor transformers, exits 1 with plain ``python`` and 0 once the bug is gone.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, child_env, run_zoo
from zoo_runner.triage.graph import BadGraph, check_graph, render_repro

PLUGIN = "tests.plugins.triage_backends"


def _triage(backend: str, tmp_path: Path) -> tuple[dict, Path, Path]:
    out, db = tmp_path / "D", tmp_path / "zoo.db"
    env = child_env(ZOO_PLUGINS=PLUGIN, ZOO_DATABASE_URL=f"sqlite:///{db}")
    proc = run_zoo(["triage", "arch:BertModel", "--backend", backend, "--tier", "tiny", "--out", str(out)], env,
                   tmp_path, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout), out, db


def _run_repro(repro: Path, **env: str) -> subprocess.CompletedProcess:
    """Plain python, from another directory, with only the plugin module importable (it registers
    the backend; the repro imports it and torch, nothing else of this repository)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("ZOO_", "PYTHON"))}
    clean.update({"PYTHONPATH": str(ROOT), **env})  # for tests.plugins.triage_backends alone
    return subprocess.run([sys.executable, str(repro)], env=clean, cwd="/", capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def _imports(text: str) -> set[str]:
    return {ln.split()[1].split(".")[0] for ln in text.splitlines() if ln.startswith(("import ", "from "))}


def _check_repro(summary: dict, out: Path, fixed_env: dict[str, str]) -> str:
    assert summary["attribution"] == "backend", summary
    assert summary["repro_nodes"] is not None and summary["repro_nodes"] <= 10, summary
    assert summary["graph_nodes"] > summary["repro_nodes"], summary
    text = (out / "repro.py").read_text()
    assert _imports(text) <= {"json", "operator", "os", "re", "struct", "sys", "torch", "tests"}, _imports(text)
    assert "zoo_runner" not in text.split("# In Zoo:")[1].split("\n", 1)[1] and "transformers" not in _imports(text)
    bad = _run_repro(out / "repro.py")
    assert bad.returncode == 1 and "REPRODUCED" in bad.stdout, (bad.stdout, bad.stderr[-2000:])
    good = _run_repro(out / "repro.py", **fixed_env)
    assert good.returncode == 0, (good.stdout, good.stderr[-2000:])
    issue = (out / "issue.md").read_text()
    assert "**Attribution:** backend" in issue and "```python" in issue and "torch 2" in issue
    return bad.stdout


def test_a_backend_computing_one_op_wrong_is_blamed_with_a_tiny_repro(tmp_path):
    """Over 60 s in CI (two workers on two cores): the triage ladder's three rungs and the minifier's cuts, each a
    model process, then the repro run twice in fresh interpreters."""
    summary, out, db = _triage("cpu+zoo_test_offop", tmp_path)
    assert summary["status"] == "mismatch"
    printed = _check_repro(summary, out, {"ZOO_TEST_OFFOP_FIXED": "1"})
    assert "exceeds the budget" in printed
    (details,) = sqlite3.connect(db).execute("SELECT details FROM results WHERE model_id = 'arch:BertModel'").fetchone()
    triage = json.loads(details)["triage"]
    assert triage["attribution"] == "backend"
    assert [r["rung"] for r in triage["ladder"]] == ["dynamo", "aot_autograd", "backend"]
    assert [r["status"] for r in triage["ladder"]] == ["pass", "pass", "mismatch"]


def test_a_backend_refusing_one_op_is_blamed_with_the_rows_signature(tmp_path, monkeypatch):
    """Through the cluster path: a stored compile_error row, `zoo triage --clusters 1`, then the
    failures API and the report link the cluster's repro.py and issue.md, served by the API.

    Over 60 s in CI (two workers on two cores): a validation, then the whole triage ladder and the minifier, each
    rung a model process, then the repro in a fresh interpreter.
    """
    db, root = tmp_path / "zoo.db", tmp_path / "triage"
    env = child_env(ZOO_PLUGINS=PLUGIN, ZOO_DATABASE_URL=f"sqlite:///{db}", ZOO_TRIAGE_DIR=str(root))
    backend = "cpu+zoo_test_raiseop"
    row = run_zoo(["validate", "arch:BertModel", "--backend", backend, "--tier", "tiny", "--json"], env, tmp_path)
    assert json.loads(row.stdout)["status"] == "compile_error", row.stderr[-2000:]
    proc = run_zoo(["triage", "--clusters", "1", "--backend", backend], env, tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (summary,) = json.loads(proc.stdout)
    sig = json.loads(row.stdout)["error"]["signature"]
    assert summary["status"] == "compile_error" and summary["signature"] == sig == summary["cluster"], summary
    assert "NotImplementedError" in sig
    out = Path(summary["repro"]).parent
    assert out.parent.parent == root
    printed = _check_repro(summary, out, {"ZOO_TEST_RAISEOP_FIXED": "1"})
    assert sig in printed
    week = json.loads(row.stdout)["started_at"][:10]
    import datetime as dt

    iso = dt.date.fromisoformat(week).isocalendar()
    issue = (out / "issue.md").read_text()
    assert f"**Since:** first seen {iso.year}-W{iso.week:02d}; the models last passed never" in issue, issue
    assert "**Affected:** 1 models" in issue

    from fastapi.testclient import TestClient

    from api.app import create_app
    from db import queries

    monkeypatch.setenv("ZOO_DATABASE_URL", f"sqlite:///{db}")
    monkeypatch.setenv("ZOO_TRIAGE_DIR", str(root))
    from db import session as dbs

    dbs._READY.clear()
    queries.clear_cache()
    client = TestClient(create_app())
    body = client.get("/api/v1/failures", params={"backend": backend}).json()
    (cluster,) = body["items"]
    assert cluster["owner"] == "backend" and cluster["triage"]["attribution"] == "backend", cluster
    repro = client.get(cluster["triage"]["repro_url"])
    assert repro.status_code == 200 and repro.text == (out / "repro.py").read_text()
    assert client.get(cluster["triage"]["issue_url"]).text.startswith(f"# [{backend}] compile_error")
    assert client.get(cluster["triage"]["repro_url"].replace("repro.py", "../zoo.db")).status_code == 404
    page = client.get("/failures", params={"backend": backend}).text
    assert cluster["triage"]["repro_url"] in page and cluster["triage"]["issue_url"] in page
    from dashboards.report import render_markdown
    from services.reports import build_report

    md = render_markdown(build_report(backend=backend, tier="tiny"))
    assert f"[repro.py]({cluster['triage']['repro_url']})" in md


NODES = [
    {"op": "placeholder", "name": "x"},
    {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": [{"node": "x"}], "kwargs": {}},
    {"op": "output", "args": [{"node": "g"}]},
]


@pytest.mark.parametrize(
    "evil",
    [
        {"op": "call_function", "name": "g", "target": "os.system", "args": ["id"], "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "aten.gelu.default; import os", "args": [], "kwargs": {}},
        {
            "op": "call_function",
            "name": "g = __import__('os')\n",
            "target": "aten.gelu.default",
            "args": [],
            "kwargs": {},
        },
        {
            "op": "call_function",
            "name": "g",
            "target": "aten.gelu.default",
            "args": [{"dtype": "float32); os.system('x'"}],
            "kwargs": {},
        },
        {
            "op": "call_function",
            "name": "g",
            "target": "aten.gelu.default",
            "args": ["'); import os; ('"],
            "kwargs": {},
        },
        {"op": "call_function", "name": "g", "target": "aten.no_such_op.default", "args": [], "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": [{"node": "later"}], "kwargs": {}},
        {"op": "call_module", "name": "g", "target": "x", "args": [], "kwargs": {}},
        # from the adversarial review: effects outside the graph, shapes the renderer cannot take
        {
            "op": "call_function",
            "name": "g",
            "target": "aten.from_file.default",
            "args": ["sympy.py", True, 200],
            "kwargs": {},
        },
        {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": 5, "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": [[[[[[1]]]]]], "kwargs": {}},
        {"op": "call_function", "name": "g\n", "target": "aten.gelu.default", "args": [], "kwargs": {}},
        {"op": "call_function", "name": "lambda", "target": "aten.gelu.default", "args": [], "kwargs": {}},
        {"op": "call_function", "name": "torch", "target": "aten.gelu.default", "args": [], "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": [{"layout": "True"}], "kwargs": {}},
        {
            "op": "call_function",
            "name": "g",
            "target": "aten.gelu.default",
            "args": [],
            "kwargs": {"approximate": "x'"},
        },
        {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": ["tanh"], "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "aten.gelu.default", "args": [float("inf")], "kwargs": {}},
        {"op": "placeholder", "name": "g", "value": [1, {"node": "x"}]},
    ],
)
def test_the_parent_refuses_a_graph_that_is_not_data(evil):
    with pytest.raises(BadGraph):
        check_graph({"nodes": [NODES[0], evil, NODES[2]]}, {"x"})


def test_a_checked_graph_renders_to_code_that_names_only_aten_ops():
    data = check_graph({"nodes": NODES}, {"x"})
    text = render_repro(data, compiler="inductor", imports=[], expect={"kind": "error", "signature": "E: x"}, about="t")
    assert "    g = torch.ops.aten.gelu.default(x)\n    return [g]" in text
    compile(text, "repro.py", "exec")


def test_clusters_whose_triage_coincides_are_one_finding(tmp_path):
    """Two messages of one bug (as OpenVINO's guard clusters: dynamo's assertion changes between
    runs) are one finding when the triage finds the same thing; another repro graph is another."""
    from services.triage import finding_key, group_findings

    def row(sig: str, index: int | None = None) -> dict:
        details = {"failed_input": {"index": index, "shapes": {}}} if index is not None else {}
        return {"status": "compile_error", "error": {"signature": sig}, "details": details}

    a = finding_key("backend", None, row("AssertionError: sources must not be empty for symbol sN", 1))
    b = finding_key("backend", None, row("AssertionError: Guard failed on the same frame it was created.", 1))
    c = finding_key("backend", None, row("IndexError: list index out of range"))
    assert a == b != c
    repro1, repro2 = tmp_path / "r1.py", tmp_path / "r2.py"
    body = "x\ndef graph(x):\n    g = torch.ops.aten.gelu.default(x)\n    return [g]\n\nFP64 = False\n"
    repro1.write_text("# about one model\n" + body)
    repro2.write_text("# about another model\n" + body.replace("gelu", "relu"))
    same = tmp_path / "r3.py"
    same.write_text("# about a third model\n" + body)
    k1, k2, k3 = (finding_key("backend", r, row("E: x")) for r in (repro1, repro2, same))
    assert k1 == k3 != k2
    found = group_findings(
        [
            {"finding": a, "cluster": "s1", "cluster_models": 117, "cluster_downloads": 456, "attribution": "backend"},
            {"finding": b, "cluster": "s2", "cluster_models": 162, "cluster_downloads": 453, "attribution": "backend"},
            {"finding": c, "cluster": "s3", "cluster_models": 313, "cluster_downloads": 327, "attribution": "backend"},
        ]
    )
    assert [(g["clusters"], g["models"], g["downloads"]) for g in found] == [
        (["s1", "s2"], 279, 909),
        (["s3"], 313, 327),
    ]


def test_a_repro_header_carries_no_encoding_trick_and_the_parent_rebuilds_the_triage():
    """What the model process wrote into its signature or triage cannot become code in repro.py."""
    from zoo_runner.triage.graph import clean_triage

    data = check_graph({"nodes": NODES}, {"x"})
    about = "Failure: x coding:raw_unicode_escape\nAttribution: backend\\u000aimport os;os.system('id')#\u202e"
    text = render_repro(data, compiler="inductor", imports=[], expect={"kind": "error", "signature": "E"}, about=about)
    lines = text.splitlines()
    assert lines[0] == "# -*- coding: utf-8 -*-" and "coding:raw" not in "\n".join(lines[:2])
    assert "\\" not in "\n".join(ln for ln in lines if ln.startswith("#")) and "\u202e" not in text
    tri = clean_triage(
        {"attribution": "backend\nimport os", "ladder": [1, {}, {"rung": "dynamo", "compiler": "eager", "device": "cpu",
         "status": "pass", "seconds": 1.0}], "graph_nodes": "9", "note": "ok\u202e"}
    )  # fmt: skip
    assert "attribution" not in tri and "graph_nodes" not in tri and tri["note"] == "ok?"
    assert tri["ladder"] == [{"rung": "dynamo", "compiler": "eager", "device": "cpu", "status": "pass", "seconds": 1.0}]
    scalars = check_graph(
        {
            "nodes": [
                {"op": "placeholder", "name": "s", "value": True},
                *NODES[:2],
                {"op": "output", "args": [{"node": "g"}]},
            ]
        },
        {"x"},
    )
    rendered = render_repro(
        scalars, compiler="inductor", imports=[], expect={"kind": "error", "signature": "E"}, about="t"
    )
    assert 'SCALARS = {"s": True}' in rendered
    compile(rendered, "repro.py", "exec")


# ---------------------------------------------------------------- torch-level graphs (guard failures)

TORCH_NODES = [
    {"op": "placeholder", "name": "x"},
    {"op": "call_method", "name": "n", "method": "size", "args": [{"node": "x"}, 1], "kwargs": {}},
    {
        "op": "call_function",
        "name": "s",
        "target": "operator.getitem",
        "args": [{"node": "x"}, {"tuple": [{"slice": [None, None, None]}, {"slice": [0, {"node": "n"}, None]}]}],
        "kwargs": {},
    },
    {"op": "call_function", "name": "g", "target": "torch.nn.functional.gelu", "args": [{"node": "s"}], "kwargs": {}},
    {"op": "output", "args": {"tuple": [{"node": "g"}]}},
]


def _torch_graph(*nodes: dict, **extra) -> dict:
    return {"nodes": [TORCH_NODES[0], *nodes, TORCH_NODES[-1]], "level": "torch", "first_call": [], **extra}


@pytest.mark.parametrize(
    "evil",
    [
        _torch_graph({"op": "call_function", "name": "g", "target": "torch.save", "args": [], "kwargs": {}}),
        _torch_graph({"op": "call_function", "name": "g", "target": "torch.hub.load", "args": [], "kwargs": {}}),
        _torch_graph({"op": "call_function", "name": "g", "target": "builtins.eval", "args": ["1"], "kwargs": {}}),
        _torch_graph({"op": "call_function", "name": "g", "target": "torch.load", "args": ["/x"], "kwargs": {}}),
        _torch_graph(
            {"op": "call_method", "name": "g", "method": "register_hook", "args": [{"node": "x"}], "kwargs": {}}
        ),
        _torch_graph({"op": "call_method", "name": "g", "method": "__class__", "args": [{"node": "x"}], "kwargs": {}}),
        _torch_graph({"op": "call_method", "name": "g", "method": "numpy", "args": [{"node": "x"}], "kwargs": {}}),
        _torch_graph({"op": "call_method", "name": "g", "method": "view", "args": [5], "kwargs": {}}),
        _torch_graph({"op": "call_method", "name": "g", "method": "view", "args": [], "kwargs": {}}),
        _torch_graph(
            {
                "op": "call_function",
                "name": "g",
                "target": "operator.getitem",
                "args": [{"node": "x"}, {"slice": ["a", None, None]}],
                "kwargs": {},
            }
        ),  # fmt: skip
        _torch_graph(
            {
                "op": "call_function",
                "name": "g",
                "target": "operator.getitem",
                "args": [{"node": "x"}, {"slice": [None, None]}],
                "kwargs": {},
            }
        ),  # fmt: skip
        _torch_graph(
            {
                "op": "call_function",
                "name": "g",
                "target": "operator.getitem",
                "args": [{"node": "x"}, {"ellipsis": "os.system('id')"}],
                "kwargs": {},
            }
        ),  # fmt: skip
        _torch_graph(
            {
                "op": "call_function",
                "name": "slice",
                "target": "torch.nn.functional.gelu",
                "args": [{"node": "x"}],
                "kwargs": {},
            }
        ),  # fmt: skip
        {**_torch_graph(), "first_call": [["nope", 1, 3]]},
        {**_torch_graph(), "first_call": [["x", -1, 3]]},
        {**_torch_graph(), "first_call": [["x", 1, True]]},
        {**_torch_graph(), "first_call": [["x", 1, "3); import os"]]},
        {**_torch_graph(), "level": "python"},
        {**_torch_graph(), "code": "import os"},
        {"nodes": NODES, "first_call": [["x", 0, 1]]},  # narrowing is for torch-level graphs only
        # from the adversarial review of the torch level
        _torch_graph(
            {"op": "call_function", "name": "__debug__", "target": "torch.abs", "args": [{"node": "x"}], "kwargs": {}}
        ),  # fmt: skip
        _torch_graph(
            {"op": "call_function", "name": "__a", "target": "torch.abs", "args": [{"node": "x"}], "kwargs": {}}
        ),  # fmt: skip
        _torch_graph({"op": "call_method", "name": "g", "method": [], "args": [{"node": "x"}], "kwargs": {}}),
        _torch_graph({"op": "call_function", "name": "g", "target": [], "args": [], "kwargs": {}}),
        {**_torch_graph(), "first_call": [[["x"], 1, 3]]},
        {**_torch_graph(), "first_call": [["x", 1, 3], ["x", 1, 2]]},
        _torch_graph(
            {"op": "call_function", "name": "g", "target": "torch.full", "args": [[65536, 65536, 8], 1.0], "kwargs": {}}
        ),  # fmt: skip
        _torch_graph(
            {"op": "call_function", "name": "g", "target": "torch.arange", "args": [0, 1 << 40], "kwargs": {}}
        ),  # fmt: skip
        _torch_graph({"op": "call_function", "name": "g", "target": "torch.empty", "args": [[4]], "kwargs": {}}),
        # a mismatch repro's fp64 reference: no pinned precision, nothing random; "expect" is torch level's
        _torch_graph(
            {"op": "call_method", "name": "g", "method": "float", "args": [{"node": "x"}], "kwargs": {}},
            expect="mismatch",
        ),  # fmt: skip
        _torch_graph(
            {
                "op": "call_function",
                "name": "g",
                "target": "torch.nn.functional.dropout",
                "args": [{"node": "x"}, 0.5, True, False],
                "kwargs": {},
            },
            expect="mismatch",
        ),  # fmt: skip
        _torch_graph(
            {
                "op": "call_function",
                "name": "g",
                "target": "torch.nn.functional.dropout",
                "args": [{"node": "x"}],
                "kwargs": {"p": 0.5},
            },
            expect="mismatch",
        ),  # fmt: skip
        _torch_graph(expect="crash"),
        {"nodes": NODES, "expect": "mismatch"},
    ],
)
def test_the_parent_refuses_a_torch_level_graph_that_is_not_data(evil):
    with pytest.raises(BadGraph):
        check_graph(evil, {"x"})


@pytest.mark.parametrize(
    "node",
    [
        {"op": "call_function", "name": "g", "target": "torch.nn.functional.normalize", "args": [{"node": "x"}],
         "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "torch.nn.functional.dropout",
         "args": [{"node": "x"}, 0.1, False, False], "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "torch.nn.functional.dropout", "args": [{"node": "x"}],
         "kwargs": {"p": 0.1, "training": False}},
    ],
)  # fmt: skip
def test_a_mismatch_graph_may_normalise_and_hold_dropout_at_inference(node):
    check_graph(_torch_graph(node, expect="mismatch"), {"x"})


def test_a_torch_level_graph_renders_to_a_graph_module_called_twice():
    data = check_graph(_torch_graph(*TORCH_NODES[1:-1], first_call=[["x", 1, 3]]), {"x"})
    text = render_repro(data, compiler="eager", imports=[], expect={"kind": "guards", "signature": "E"}, about="t")
    assert "        n = x.size(1)\n" in text
    assert "        s = operator.getitem(x, (slice(None, None, None), slice(0, n, None), ))\n" in text
    assert "        g = torch.nn.functional.gelu(s)\n" in text
    assert "graph = Graph()" in text and 'FIRST_CALL = [["x", 1, 3]]' in text
    assert text.index("def _dt(") < text.index("class Graph(")  # defined before anything can call it
    namespace: dict = {"__file__": "/nonexistent/repro.py"}
    exec(compile(text.replace('if __name__ == "__main__":', "if False:"), "repro.py", "exec"), namespace)
    import torch

    x = torch.randn(2, 5)
    assert torch.equal(namespace["graph"](x)[0], torch.nn.functional.gelu(x))


def test_openvinos_guard_failure_gets_a_torch_level_repro_that_fails_alone(tmp_path):
    """The real OpenVINO (issue 28's real findings): tiny BERT fails as dynamo builds the guards of the
    graph OpenVINO compiled at the recompile for the second input shape; no graph raises, and lowered
    to ATen it no longer fails. Zoo keeps it at torch level, calls it twice (narrowed, then as it was)
    and cuts it to its shortest failing prefix; the repro needs only torch and openvino, exits 1 on
    its own, and 0 with the backend swapped for dynamo's eager one.

    Over 60 s in CI (two workers on two cores): triage compiles BertModel through the real OpenVINO at each rung and
    each cut of the graph, then runs the repro twice in fresh interpreters.
    """
    pytest.importorskip("openvino")
    out, db = tmp_path / "D", tmp_path / "zoo.db"
    env = child_env(ZOO_DATABASE_URL=f"sqlite:///{db}")
    proc = run_zoo(["triage", "arch:BertModel", "--backend", "cpu+openvino", "--tier", "tiny", "--out", str(out)], env,
                   tmp_path, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "compile_error" and summary["attribution"] == "backend", summary
    assert summary["repro_nodes"] is not None and summary["repro_nodes"] <= 10 < summary["graph_nodes"], summary
    text = (out / "repro.py").read_text()
    assert _imports(text) <= {"json", "operator", "os", "re", "struct", "sys", "torch", "openvino"}, _imports(text)
    assert "FIRST_CALL = [[" in text and "\nEXPECT = {'kind': 'guards'" in text
    bad = _run_repro(out / "repro.py")
    assert bad.returncode == 1 and "REPRODUCED" in bad.stdout, (bad.stdout, bad.stderr[-2000:])
    eager = out / "repro_eager.py"
    eager.write_text(text.replace('COMPILER = "openvino"', 'COMPILER = "eager"'))
    good = _run_repro(eager)
    assert good.returncode == 0 and "not reproduced" in good.stdout, (good.stdout, good.stderr[-2000:])
    (details,) = sqlite3.connect(db).execute("SELECT details FROM results WHERE model_id = 'arch:BertModel'").fetchone()
    triage = json.loads(details)["triage"]
    assert triage["repro_kind"] == "graph" and "torch level" in triage["note"], triage
    assert triage["repro_signature"].startswith(("AssertionError", "IndexError")), triage


def test_rendered_repros_are_one_finding_only_when_their_graphs_are(tmp_path):
    """finding_key reads the graph out of the repro Zoo renders (whatever the template puts around it)."""
    from services.triage import finding_key

    relu = [dict(NODES[1], target="aten.relu.default") if n is NODES[1] else n for n in NODES]
    paths = []
    for i, (nodes, about) in enumerate([(NODES, "model a"), (NODES, "model b"), (relu, "model c")]):
        text = render_repro(check_graph({"nodes": nodes}, {"x"}), compiler="inductor", imports=["import x"],
                            expect={"kind": "error", "signature": "E"}, about=about)  # fmt: skip
        paths.append(tmp_path / f"r{i}.py")
        paths[-1].write_text(text)
    row = {"status": "compile_error", "error": {"signature": "E"}, "details": {}}
    a, b, c = (finding_key("backend", p, row) for p in paths)
    assert a == b != c


def test_a_backend_failing_only_on_dynamos_graph_gets_a_torch_level_repro(tmp_path):
    """A backend that lowers dynamo's graph itself and has no lowering for F.linear (as OpenVINO's
    Marian failure: gone once the graph is lowered to ATen). The repro is the torch-level graph,
    compiled alone, cut to its shortest failing prefix: it raises the row's signature with plain
    python, and passes once the bug is gone."""
    summary, out, db = _triage("cpu+zoo_test_rawlinear", tmp_path)
    assert summary["status"] == "compile_error" and summary["attribution"] == "backend", summary
    assert "zoo_test_rawlinear has no lowering" in summary["signature"]
    assert summary["repro_nodes"] is not None and summary["repro_nodes"] < summary["graph_nodes"], summary
    text = (out / "repro.py").read_text()
    assert "\nEXPECT = {'kind': 'error'" in text and "torch._C._nn.linear(" in text, text[:3000]
    assert _imports(text) <= {"json", "operator", "os", "re", "struct", "sys", "torch", "tests"}, _imports(text)
    bad = _run_repro(out / "repro.py")
    assert bad.returncode == 1 and summary["signature"] in bad.stdout, (bad.stdout, bad.stderr[-2000:])
    good = _run_repro(out / "repro.py", ZOO_TEST_RAWLINEAR_FIXED="1")
    assert good.returncode == 0, (good.stdout, good.stderr[-2000:])
    (details,) = sqlite3.connect(db).execute("SELECT details FROM results WHERE model_id = 'arch:BertModel'").fetchone()
    triage = json.loads(details)["triage"]
    assert triage["repro_kind"] == "graph" and "does not fail once lowered to ATen" in triage["note"], triage


@pytest.mark.parametrize("bug", ["broken", "misshapen"])
def test_a_devices_eager_failure_gets_the_op_at_fault_as_its_repro(tmp_path, bug):
    """A device whose gelu kernel raises in eager mode, or gives a wrong shape that makes the next
    matmul raise (the fake neuron, tests.plugins.broken_neuron / misshapen_neuron): the attribution is
    device_eager and the repro is gelu on the device with the model's inputs to it (not the matmul
    that raised). It imports what registers the device (``torch_neuronx``: here a shim that loads the
    fake), exits 1 (the CPU runs the same call, or gives the right shape), and 0 once it is fixed."""
    out, db = tmp_path / "D", tmp_path / "zoo.db"
    env = child_env(ZOO_PLUGINS=f"tests.plugins.{bug}_neuron", ZOO_DATABASE_URL=f"sqlite:///{db}")
    proc = run_zoo(["triage", "arch:BertModel", "--backend", "neuron", "--tier", "tiny", "--out", str(out)], env,
                   tmp_path, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["status"] == "runtime_error" and summary["attribution"] == "device_eager", summary
    assert summary["repro_nodes"] == 1, summary
    text = (out / "repro.py").read_text()
    assert "DEVICE = 'neuron'" in text and "torch.ops.aten.gelu.default(" in text, text[:3000]
    assert _imports(text) <= {"json", "operator", "os", "re", "struct", "sys", "torch", "torch_neuronx"}
    shim = tmp_path / "shim"
    shim.mkdir()
    (shim / "torch_neuronx.py").write_text(f"import tests.plugins.{bug}_neuron  # the fake device, for this test\n")
    bad = _run_repro(out / "repro.py", PYTHONPATH=f"{shim}:{ROOT}")
    assert bad.returncode == 1 and summary["signature"] in bad.stdout, (bad.stdout, bad.stderr[-2000:])
    if bug == "broken":
        assert "on the CPU the same call runs" in bad.stdout
    else:
        assert "\nEXPECT = {'kind': 'shape'" in text, summary
        assert "on neuron" in bad.stdout and "on the CPU" in bad.stdout, bad.stdout
    good = _run_repro(out / "repro.py", PYTHONPATH=f"{shim}:{ROOT}", ZOO_TEST_NEURON_FIXED="1")
    assert good.returncode == 0 and "not reproduced" in good.stdout, (good.stdout, good.stderr[-2000:])


def test_a_torch_level_mismatch_repro_judges_against_its_own_fp64_run(tmp_path):
    """A torch-level graph handed back for a mismatch renders a repro whose reference is the same
    graph in fp64: a correct backend passes it (exit 0), one computing gelu 10 % off does not (exit 1);
    a graph that expects another failure than the row's is refused."""
    import torch
    from safetensors.torch import save_file

    from services.triage import write_repro

    box = tmp_path / "box"
    box.mkdir()
    (box / "graph.json").write_text(json.dumps(_torch_graph(*TORCH_NODES[1:-1], expect="mismatch")))
    save_file({"x": torch.randn(2, 5)}, str(box / "repro.safetensors"))
    row = {"model_id": "org/m", "backend": "cpu+eager", "tier": "tiny", "status": "mismatch", "error": None,
           "details": {"triage": {"attribution": "backend"}}, "versions": {}}  # fmt: skip
    text = Path(write_repro(row, box, tmp_path / "out", None)).read_text()
    assert "\nEXPECT = {'kind': 'mismatch'" in text and "at torch level, as dynamo hands it" in text
    done = _run_repro(tmp_path / "out" / "repro.py")
    assert done.returncode == 0 and "within the budget" in done.stdout, (done.stdout, done.stderr[-2000:])
    wrong = dict(row, status="compile_error", error={"signature": "E: x"})
    with pytest.raises(BadGraph):
        write_repro(wrong, box, tmp_path / "out2", None)
    off = Path(write_repro(dict(row, backend="cpu+zoo_test_offop"), box, tmp_path / "off", PLUGIN))
    bad = _run_repro(off)
    assert bad.returncode == 1 and "exceeds the budget" in bad.stdout, (bad.stdout, bad.stderr[-2000:])
    fixed = _run_repro(off, ZOO_TEST_OFFOP_FIXED="1")
    assert fixed.returncode == 0, (fixed.stdout, fixed.stderr[-2000:])


def test_a_repro_is_refused_without_a_signature_or_for_a_mismatch_at_torch_level(tmp_path):
    """JSON's null in EXPECT would be a NameError, exit 1, "reproduced"; a torch-level graph is only
    ever a guard failure's repro (random ops, dtype methods the fp64 switch does not reach)."""
    import torch
    from safetensors.torch import save_file

    from services.triage import write_repro

    box = tmp_path / "box"
    box.mkdir()
    graph = _torch_graph(*TORCH_NODES[1:-1])
    (box / "graph.json").write_text(json.dumps(graph))
    save_file({"x": torch.ones(2, 5)}, str(box / "repro.safetensors"))
    for status, error in (("compile_error", None), ("compile_error", {"signature": ""}), ("mismatch", None)):
        row = {"model_id": "org/m", "backend": "cpu+eager", "tier": "tiny", "status": status, "error": error,
               "details": {"triage": {"attribution": "backend"}}, "versions": {}}  # fmt: skip
        with pytest.raises(BadGraph):
            write_repro(row, box, tmp_path / "out", None)
    triage = {"triage": {"attribution": "backend"}}
    row = {"model_id": "org/m", "backend": "cpu+eager", "tier": "tiny", "status": "compile_error",
           "error": {"signature": "E: x"}, "details": triage, "versions": {}}  # fmt: skip
    path = write_repro(row, box, tmp_path / "out", None)
    text = Path(path).read_text()
    assert "\nEXPECT = {'kind': 'guards', 'signature': 'E: x'}" in text
    # the control run: with dynamo's eager backend the graph compiles and runs, so "not reproduced", exit 0
    done = _run_repro(Path(path))
    assert done.returncode == 0 and "not reproduced" in done.stdout, (done.stdout, done.stderr[-2000:])


@pytest.mark.services
def test_clusters_are_triaged_through_celery_on_a_worker(tmp_path, pg_server_url, redis_url):
    """With a broker, `zoo triage --clusters 1` sends one task to the backend's queue; a real worker
    process triages there, writes under its own ZOO_TRIAGE_DIR, and the result comes back.

    Over 60 s in CI (two workers on two cores): a Celery worker process starts (it imports torch and transformers),
    then triages a cluster through the whole ladder there.
    """
    from tests.conftest import _reset_pg
    from tests.test_workers import start_worker, stop

    _reset_pg(pg_server_url)
    backend = "cpu+zoo_test_raiseop"
    worker_root, cli_root = tmp_path / "worker-triage", tmp_path / "cli-triage"
    env = child_env(ZOO_PLUGINS=PLUGIN, ZOO_DATABASE_URL=pg_server_url, ZOO_TRIAGE_DIR=str(cli_root))
    row = run_zoo(["validate", "arch:BertModel", "--backend", backend, "--tier", "tiny", "--json"], env, tmp_path)
    assert json.loads(row.stdout)["status"] == "compile_error", row.stderr[-2000:]
    worker = start_worker({**env, "ZOO_BROKER_URL": redis_url, "ZOO_TRIAGE_DIR": str(worker_root)}, tmp_path)
    try:
        proc = run_zoo(["triage", "--clusters", "1", "--backend", backend], {**env, "ZOO_BROKER_URL": redis_url},
                       tmp_path, timeout=900)  # fmt: skip
        log = (tmp_path / "w1.log").read_text()
        assert proc.returncode == 0, proc.stderr[-3000:] + log[-3000:]
        assert "sent to queue 'cpu'" in proc.stderr
        refused = run_zoo(["triage", "--clusters", "1", "--backend", backend, "--out", str(tmp_path / "x")],
                          {**env, "ZOO_BROKER_URL": redis_url}, tmp_path)  # fmt: skip
    finally:
        stop(worker)
    (summary,) = json.loads(proc.stdout)
    assert summary["worker"].startswith("w1@") and summary["status"] == "compile_error", summary
    assert summary["signature"] == json.loads(row.stdout)["error"]["signature"]
    repro = Path(summary["repro"])
    assert repro.is_file() and worker_root in repro.parents and not cli_root.exists()
    assert "zoo.triage_clusters" in log
    assert refused.returncode == 2 and "--here" in refused.stderr and "Traceback" not in refused.stderr


def test_a_repro_compiled_for_a_device_places_its_inputs_and_device_arguments_there(tmp_path):
    """A device-compile repro (DEVICE set, not EAGER): inputs and every device argument of the graph
    (``_dev()``) go to DEVICE for the compiled run, the results are read back, and the references
    run on the CPU. Here DEVICE is the CPU itself (no second device in CI), the backend computes gelu
    10 % off: exit 1, and 0 once it is fixed."""
    import torch
    from safetensors.torch import save_file

    nodes = [
        TORCH_NODES[0],
        {"op": "call_function", "name": "r", "target": "torch.arange", "args": [5],
         "kwargs": {"device": {"device": "cpu"}, "dtype": {"dtype": "float32"}}},
        {"op": "call_function", "name": "y", "target": "operator.add", "args": [{"node": "x"}, {"node": "r"}],
         "kwargs": {}},
        {"op": "call_function", "name": "g", "target": "torch.nn.functional.gelu", "args": [{"node": "y"}],
         "kwargs": {}},
        {"op": "output", "args": {"tuple": [{"node": "g"}]}},
    ]  # fmt: skip
    data = check_graph({"nodes": nodes, "level": "torch", "first_call": [], "expect": "mismatch"}, {"x"})
    expect = {"kind": "mismatch", "factor": 10.0, "floor": 1e-6}
    text = render_repro(data, compiler="zoo_test_offop", imports=[f"import {PLUGIN}"], expect=expect, about="t",
                        device="cpu")  # fmt: skip
    assert "DEVICE = 'cpu'" in text and "EAGER = False" in text and "device=_dev()" in text
    (tmp_path / "repro.py").write_text(text)
    save_file({"x": torch.randn(2, 5)}, str(tmp_path / "repro.safetensors"))
    bad = _run_repro(tmp_path / "repro.py")
    assert bad.returncode == 1 and "exceeds the budget" in bad.stdout, (bad.stdout, bad.stderr[-2000:])
    good = _run_repro(tmp_path / "repro.py", ZOO_TEST_OFFOP_FIXED="1")
    assert good.returncode == 0, (good.stdout, good.stderr[-2000:])
    with pytest.raises(BadGraph):  # a device-compile repro is a torch-level graph
        render_repro({"nodes": NODES}, compiler="x", imports=[], expect=expect, about="t", device="cpu")


def test_the_smallest_cut_drops_what_follows_and_finds_a_cut_the_binary_search_skips():
    """Failing is not monotone in the cut (Longformer's graph on xla+openxla: the cut at its
    ``as_strided`` fails, a later one ending on a size passes): the cuts before the one the binary
    search found are tried in order. In-place writes after the cut go with it (103 -> 101 nodes
    before, 10 after)."""
    import operator

    import torch

    from zoo_runner.triage.ladder import smallest_cut

    g = torch.fx.Graph()
    x = g.placeholder("x")
    strided = g.call_method("as_strided", (x, (2, 3), (1, 2)))  # the node at fault
    size = g.call_method("size", (x, 0))
    scores = g.call_method("new_zeros", (x, (4, 4)))
    g.call_function(operator.setitem, (scores, (slice(None), 0), 1.0))  # in place: never dead code
    last = g.call_function(torch.add, (strided, 1.0))
    g.output((last, size))
    gm = torch.fx.GraphModule(torch.nn.Module(), g)
    fails_on = {strided.name, last.name}  # what the output is decides, not how long the cut is

    def fails(cut: torch.fx.GraphModule, inputs: list, first: list) -> bool:
        out = next(n for n in cut.graph.nodes if n.op == "output").args[0][0]
        return out.name in fails_on

    small, inputs, _ = smallest_cut(gm, [torch.randn(4, 4)], [], fails, 60.0)
    kept = [n.name for n in small.graph.nodes if n.op not in ("placeholder", "output")]
    assert kept == [strided.name], kept
    assert len(inputs) == 1

    # a failure that needs an in-place write and a tensor output: no prefix before the write has the
    # write, so the shortest prefix runs to the end (4 nodes); the slice keeps the write (3)
    def fails_with_the_write(cut: torch.fx.GraphModule, inputs: list, first: list) -> bool:
        out = next(n for n in cut.graph.nodes if n.op == "output").args[0][0]
        return out.target is not operator.setitem and any(n.target is operator.setitem for n in cut.graph.nodes)

    small, _, _ = smallest_cut(gm, [torch.randn(4, 4)], [], fails_with_the_write, 60.0)
    kept = [n.name for n in small.graph.nodes if n.op not in ("placeholder", "output")]
    assert kept == [strided.name, scores.name, "setitem"], kept
