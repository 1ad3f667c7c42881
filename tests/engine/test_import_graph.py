"""The layout shows the architecture and the imports run one way: CLI -> sections ->
domain -> engine (nsyswrap/engine) -> storage (nsyswrap/storage). The engine imports no
domain package, not even inside a function (a builder is imported by name when it runs:
nsyswrap.engine.builders), so no import circle joins the engine and crossrank/."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "nsyswrap"
LAYERS = {"engine": ("engine", "storage"), "storage": ("storage",)}
# What stays at the top of the package: the CLI and its output, the public API, the one
# error type, the single-rank metric calls and the generator of the manual's references
# (`python -m nsyswrap.docs`).
TOP = {
    "__init__",
    "__main__",
    "api",
    "cli",
    "docs",
    "errors",
    "metrics",
    "output",
    "text_table",
}


def _imports(path: Path) -> set[str]:
    """Every nsyswrap module `path` imports, at the top or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nsyswrap")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nsyswrap"):
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return found


def _modules(package: str) -> dict[str, Path]:
    return {
        f"nsyswrap.{package}.{p.stem}": p
        for p in (ROOT / package).glob("*.py")
        if p.stem != "__init__"
    }


def test_the_top_of_the_package_holds_only_its_entry_points():
    assert {p.stem for p in ROOT.glob("*.py")} == TOP


def test_each_layer_imports_only_itself_and_the_layers_below():
    """The engine imports the engine, storage and the error type; storage only storage."""
    for layer, allowed in LAYERS.items():
        for name, path in _modules(layer).items():
            above = {
                m
                for m in _imports(path)
                if m.split(".")[1:2] and m.split(".")[1] not in (*allowed, "errors")
            }
            assert not above, f"{name} imports {sorted(above)}"


def test_the_engine_has_no_import_circle():
    """Not even inside a function: each engine or storage module imports only modules
    below it."""
    modules = _modules("engine") | _modules("storage")
    graph = {name: {m for m in _imports(path) if m in modules} for name, path in modules.items()}
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        assert name not in path, "import circle: " + " -> ".join(path[path.index(name) :] + [name])
        if name not in done:
            for imported in graph[name]:
                visit(imported, path + [name])
            done.add(name)

    for name in modules:
        visit(name, [])


def test_crossrank_reaches_the_engine_through_its_interface():
    """crossrank/ reads declared objects and modules (queries, run) and never the
    planner's insides."""
    for path in (ROOT / "crossrank").glob("*.py"):
        assert not {m for m in _imports(path) if m.startswith("nsyswrap.engine.planner")}, path.name


DOMAIN = ("crossrank", "sample", "annotate", "synth", "sweep")
ABOVE_THE_DOMAIN = ("report", "html_report", "comparison", "launch", "agent", "cli")


def test_the_domain_imports_no_section_and_no_workflow():
    """Sections (report, html_report, comparison) and workflows (launch, the MCP server of
    nsyswrap.agent, the CLI) read the domain packages, never the other way; the report
    over sample files is a section (nsyswrap.report.samples), a process's rank and host
    are the annotation's (nsyswrap.annotate.ranks)."""
    for package in DOMAIN:
        for name, path in _modules(package).items():
            above = {
                m for m in _imports(path) if m.split(".")[1:2] in [[a] for a in ABOVE_THE_DOMAIN]
            }
            assert not above, f"{name} imports {sorted(above)}"


def test_the_generator_imports_nothing_it_checks():
    """nsyswrap.synth's truth comes from its own simulation: it imports only itself and the
    error type, never the analysis (crossrank, report, the engine) whose figures it checks."""
    for name, path in (
        _modules("synth") | {"nsyswrap.synth": ROOT / "synth" / "__init__.py"}
    ).items():
        other = {m for m in _imports(path) if m.split(".")[1:2] not in (["synth"], ["errors"])}
        assert not other, f"{name} imports {sorted(other)}"


def _from_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of every `from nsyswrap... import name` of `path`."""
    return [
        (node.module, a.name)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("nsyswrap")
        for a in node.names
    ]


def test_no_module_imports_another_modules_privates():
    """A name starting with _ is its module's own: no other module imports it."""
    for path in ROOT.rglob("*.py"):
        private = [f"{m}.{n}" for m, n in _from_imports(path) if n.startswith("_")]
        assert not private, f"{path.relative_to(ROOT)} imports {private}"


def test_the_report_never_imports_its_page():
    """The HTML page (nsyswrap.html_report) is drawn from the report's answer: it imports
    nsyswrap.report, never the other way."""
    for name, path in _modules("report").items():
        up = {m for m in _imports(path) if m.startswith("nsyswrap.html_report")}
        assert not up, f"{name} imports {sorted(up)}"
    for path in (ROOT / "report" / "diagnosis").rglob("*.py"):
        assert not {m for m in _imports(path) if m.startswith("nsyswrap.html_report")}, path


SECTIONS = ("single_rank", "compute", "cross_rank", "memory", "host", "trace_facts")
SECTIONS += ("data_quality", "plots", "samples", "captured")  # captured: what sections read


def test_no_section_calls_the_engine():
    """A section is built from the rows of the modules it declares (nsyswrap.report.registry);
    only the report flow (nsyswrap.report.flow) computes them, and the page draws from the
    answer: neither a section nor the page calls run_module or opens a run."""
    engine = ("nsyswrap.engine.queries", "nsyswrap.engine.run", "nsyswrap.engine.opener")
    paths = [ROOT / "report" / f"{s}.py" for s in SECTIONS]
    paths += list((ROOT / "html_report").glob("*.py"))
    for path in paths:
        called = {m for m in _imports(path) if m.startswith(engine)}
        assert not called, f"{path.relative_to(ROOT)} imports {sorted(called)}"
