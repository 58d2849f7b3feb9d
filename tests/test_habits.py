"""House rules checked on the source (CONTRIBUTING.md, "Rules"): no module of the product imports
another module's private (``_name``) names, and the dashboards' report does not import the pages.

Tests may use the private names of the code under test; this scans the product packages only.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("zoo_runner", "db", "services", "workers", "api", "dashboards", "zoo", "benchmarks")


def _private(name: str) -> bool:
    """``_name``; not ``__dunder__`` nor ``_sunder_`` (the enum's public API, ``_value2member_map_``)."""
    return name.startswith("_") and not name.startswith("__") and not name.endswith("_")


def _ours(module: str | None, level: int) -> bool:
    """Whether ``from <module> import ...`` (``level`` dots) names a module of the product."""
    return level > 0 or (module or "").split(".")[0] in PACKAGES


def private_imports(path: Path, source: str | None = None) -> list[str]:
    """Every ``from <product module> import _name`` and ``<product module>._name`` in one file."""
    tree = ast.parse(path.read_text(encoding="utf-8") if source is None else source, filename=str(path))
    where = path.relative_to(ROOT)
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in PACKAGES:
                    modules.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and _ours(node.module, node.level):
            for a in node.names:
                if _private(a.name):
                    found.append(f"{where}:{node.lineno}: from {'.' * node.level}{node.module or ''} import {a.name}")
                else:
                    modules.add(a.asname or a.name)  # may be a module (from dashboards import report)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append(f"{where}:{node.lineno}: {ast.unparse(node)}")
    return found


def product_files() -> list[Path]:
    return sorted(f for pkg in PACKAGES for f in (ROOT / pkg).rglob("*.py"))


def test_the_scan_sees_the_product():
    files = {f.relative_to(ROOT).as_posix() for f in product_files()}
    assert {"zoo_runner/engine.py", "dashboards/pages.py", "zoo/cli.py", "db/session.py"} <= files


def test_the_scan_finds_a_private_import():
    src = "from .report import _pct\nfrom db import session\nsession._redact('x')\nimport os\nos._exit(0)\n"
    assert private_imports(ROOT / "dashboards" / "x.py", src) == [
        "dashboards/x.py:1: from .report import _pct",
        "dashboards/x.py:3: session._redact",
    ]


def test_no_private_names_are_imported_across_modules():
    found = [hit for f in product_files() for hit in private_imports(f)]
    assert not found, "private names used across modules (make them public or move them):\n" + "\n".join(found)


def test_the_report_does_not_import_the_pages():
    """dashboards.pages imports the report's helpers; the report must not import the pages back
    (the shared pieces live in dashboards.format and dashboards.templating)."""
    for name in ("report.py", "format.py", "templating.py"):
        tree = ast.parse((ROOT / "dashboards" / name).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                target = ("." * node.level) + (node.module or "")
                names = {a.name for a in node.names} if target in (".", "dashboards") else set()
                assert target not in (".pages", "dashboards.pages") and "pages" not in names, (
                    f"dashboards/{name} imports the pages"
                )
            elif isinstance(node, ast.Import):
                assert all(a.name != "dashboards.pages" for a in node.names), f"dashboards/{name} imports pages"


LAYERED = ("zoo_runner", "db", "services", "workers", "api", "dashboards", "zoo")  # [tool.importlinter]


def import_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module in ``edges`` (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_cycle_finder_finds_a_cycle():
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert import_cycles(edges) == [["a", "b", "c"]]
    assert import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_itself_round_a_cycle():
    """No file-level import cycle in the product, imports inside functions included (grimp reads
    them all, as lint-imports does): a package's ``__init__`` that re-exports a module which imports
    the package back counts too."""
    import grimp

    graph = grimp.build_graph(*LAYERED, include_external_packages=False)
    edges = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    assert len(edges) > 100, "the scan did not see the product"
    cycles = import_cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)
