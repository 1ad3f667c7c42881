"""The imports run one way: CLI -> sections -> domain -> engine -> storage. The engine
imports no domain package, not even inside a function (a builder is imported by name
when it runs: nsyswrap.builders), so no import circle joins the engine and crossrank/."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "nsyswrap"
DOMAIN = ("crossrank", "report", "html_report", "comparison", "annotate", "launch", "synth")
ENGINE = ("api", "builders", "cache", "cache_keys", "connection", "dask_engine", "errors",
          "opener", "opening", "plan", "planner", "pool", "processes", "queries", "rank_labels",
          "raw_tables", "reports", "run", "sql_files", "sql_guard", "sql_objects",
          "sqlite_source", "store", "stream", "validate")


def _imports(path: Path) -> set[str]:
    """Every nsyswrap module `path` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nsyswrap")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nsyswrap"):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_the_engine_imports_no_domain_package():
    assert {p.stem for p in ROOT.glob("*.py")} >= set(ENGINE)
    for name in ENGINE:
        domain = {m for m in _imports(ROOT / f"{name}.py")
                  if m.split(".")[1:2] and m.split(".")[1] in DOMAIN}
        assert not domain, f"nsyswrap/{name}.py imports {sorted(domain)}"


def test_the_engine_has_no_import_circle():
    """Not even inside a function: each engine module imports only modules below it."""
    graph = {name: {m.split(".")[1] for m in _imports(ROOT / f"{name}.py")
                    if m.split(".")[1:2] and m.split(".")[1] in ENGINE} for name in ENGINE}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, "import circle: " + " -> ".join(path[path.index(name):] + [name])
        if name not in done:
            for imported in graph[name]:
                visit(imported, path + [name])
            done.add(name)

    for name in ENGINE:
        visit(name, [])


def test_crossrank_reaches_the_engine_through_its_interface():
    """crossrank/ reads declared objects and modules (queries, run) and never the
    planner's insides."""
    for path in (ROOT / "crossrank").glob("*.py"):
        assert not {m for m in _imports(path) if m.startswith("nsyswrap.planner")}, path.name
