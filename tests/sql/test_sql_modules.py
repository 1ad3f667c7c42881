"""Every SQL file is a declared object whose header tells the truth (what it reads and
returns), and every prebuilt query matches its golden output."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.engine import planner, sql_objects
from nsyswrap.engine.connection import VIEWS, session
from nsyswrap.engine.queries import bind, catalog, run_module

GOLDEN = Path(__file__).parents[1] / "golden"
GOLDEN_RUN = FIXTURES / "run4_straggler"
MODULES = sorted(catalog())
OBJECTS = sorted(o.name for o in sql_objects.objects().values() if o.kind in ("report", "run"))
# Objects built in Python (`@builder`, nsyswrap.engine.builders) have no SQL body: their builder
# can read only what @reads declares (nsyswrap.engine.builders.Inputs refuses anything else).
CHECKED = sorted(
    o.name
    for o in sql_objects.objects().values()
    if o.kind != "view" and o.path.parent.name != "_views" and not o.builder
)
UPDATE = os.environ.get("NSYSWRAP_UPDATE_GOLDEN") == "1"


@pytest.fixture(scope="module")
def golden_run():
    with open_run([GOLDEN_RUN]) as run:
        yield run


def test_every_object_declares_the_parameters_of_what_it_reads():
    for name in sql_objects.objects():
        sql_objects.check_params(name)


@pytest.mark.parametrize("name", MODULES)
def test_module_columns_are_documented(golden_run, name):
    """A module returns exactly the columns its header declares, names and types."""
    module = catalog()[name]
    df = run_module(golden_run, name)
    assert list(df.columns) == [c.name for c in module.columns], (
        "@column lines must match the result"
    )
    params = bind(module, {})
    planner.prepare(golden_run, name, params)
    described = golden_run.connection.execute(
        f"DESCRIBE {module.sql}", module.bound(params)
    ).fetchall()
    assert [(c[0], c[1]) for c in described] == [(c.name, c.type) for c in module.columns]
    for column in module.columns:
        assert column.doc, f"{name}.{column.name} has no description"
    if module.per_report:
        assert module.order and {k for k, _ in module.order} <= set(df.columns), (
            "a per-report module declares the @order its rows are merged in"
        )


def _golden_csv(df: pd.DataFrame) -> str:
    return df.drop(columns=[c for c in df.columns if c == "report"]).to_csv(index=False)


@pytest.mark.parametrize("name", MODULES)
def test_module_matches_golden(golden_run, name):
    """NSYSWRAP_UPDATE_GOLDEN=1 writes `<golden>.new` beside a golden that differs (or
    is missing) and prints the diff: a person reviews it and renames the file."""
    text = _golden_csv(run_module(golden_run, name))
    path = GOLDEN / f"{name}.csv"
    if not path.exists() or UPDATE:
        old = path.read_text() if path.exists() else ""
        if old != text:
            path.with_suffix(".csv.new").write_text(text)
            print(
                "".join(
                    difflib.unified_diff(
                        old.splitlines(True), text.splitlines(True), str(path), f"{path}.new"
                    )
                )
            )
        if not path.exists():
            pytest.fail(f"no golden file {path}: review {path}.new and rename it")
    expected = pd.read_csv(path)
    actual = pd.read_csv(pd.io.common.StringIO(text))
    pd.testing.assert_frame_equal(actual, expected, check_dtype=False, rtol=1e-9)


@pytest.mark.parametrize("view", VIEWS)
def test_view_columns_are_documented(golden_run, view):
    columns = golden_run.df(f"SELECT * FROM {view} LIMIT 0").columns.tolist()
    assert columns == ["rank", "report"] + [c.name for c in sql_objects.get(view).columns]


@pytest.mark.parametrize("name", OBJECTS)
def test_object_columns_are_declared(golden_run, name):
    """What an object returns is what its header declares, name and type (a per-report
    object's view adds `rank` and `report` first)."""
    obj = sql_objects.get(name)
    planner.bind(golden_run, name, {})
    described = [(c[0], c[1]) for c in golden_run.connection.execute(f"DESCRIBE {name}").fetchall()]
    extra = [("rank", "INTEGER"), ("report", "VARCHAR")] if obj.kind == "report" else []
    assert described == extra + [(c.name, c.type) for c in obj.columns]
    assert obj.summary and all(c.doc for c in obj.columns)


def _schemas(golden_run) -> dict[str, list[tuple[str, str]]]:
    """(column, type) of every view and object of the golden run."""
    for name in OBJECTS:
        planner.bind(golden_run, name, {})
    return {
        name: [(c[0], c[1]) for c in golden_run.con.execute(f"DESCRIBE {name}").fetchall()]
        for name in [*VIEWS, *OBJECTS]
    }


@pytest.fixture(scope="module")
def schemas(golden_run):
    return _schemas(golden_run)


def _bare(tmp_path: Path, schemas: dict, inputs: set[str]) -> duckdb.DuckDBPyConnection:
    """A connection holding only `inputs`, as empty tables of their real columns."""
    con = session(memory_limit="512MB", spill_dir=tmp_path)
    for name in inputs:
        columns = ", ".join(f'"{c}" {t}' for c, t in schemas[name])
        con.execute(f'CREATE TABLE "{name}" ({columns})')
    return con


def _runs_on(tmp_path, schemas, obj, inputs: set[str], libraries=None) -> bool:
    """Whether `obj` (its libraries loaded) binds and runs with only `inputs` there."""
    con = _bare(tmp_path, schemas, inputs)
    try:
        for lib in obj.includes if libraries is None else libraries:
            con.execute(sql_objects.get(lib).sql)
        if obj.kind == "library":
            con.execute(obj.sql)
        else:
            con.execute(
                f"SELECT * FROM ({obj.sql}) LIMIT 0",
                {p: sql_objects.get(obj.name).values({})[p] for p in obj.uses},
            )
        return True
    except (duckdb.CatalogException, duckdb.BinderException):
        return False
    finally:
        con.close()


@pytest.mark.parametrize("name", CHECKED)
def test_object_reads_what_its_header_declares(tmp_path, schemas, name):
    """Each object runs on a connection that holds only what it declares (the views and
    objects of `@reads`, those its libraries read, its libraries), and needs each of them."""
    obj = sql_objects.get(name)
    by_libraries = {r for lib in obj.includes for r in sql_objects.get(lib).reads}
    assert _runs_on(tmp_path, schemas, obj, set(obj.reads) | by_libraries), (
        f"{name} reads something its header does not declare"
    )
    for read in set(obj.reads) - by_libraries:
        assert not _runs_on(tmp_path, schemas, obj, set(obj.reads) - {read} | by_libraries), (
            f"{name} declares @reads {read} but does not read it"
        )
    for lib in obj.includes:
        assert not _runs_on(
            tmp_path, schemas, obj, set(obj.reads) | by_libraries, set(obj.includes) - {lib}
        ), f"{name} includes {lib} but needs none of it"


def _macro_names() -> set[str]:
    return {
        m for lib in sql_objects.of_kind("library") for m in re.findall(r"MACRO\s+(\w+)", lib.sql)
    }


def test_a_doc_goes_on_on_indented_lines(tmp_path):
    """A @param's or @column's description continued on indented `--` lines is read whole
    (`nsyswrap list`, `nsyswrap views` and docs/queries.md show it); an indented line after
    any other directive is no description."""
    path = tmp_path / "x.sql"
    path.write_text(
        "-- One row per n.\n"
        "-- @scope report\n"
        "-- @param n BIGINT = 0   How many,\n"
        "--                       at most.\n"
        "-- @column n BIGINT     Its n,\n"
        "--                       in ns.\n"
        "-- @order n\n"
        "--                       not a description\n"
        "SELECT $n AS n\n"
    )
    obj = sql_objects.parse(path, "a.x", "module")
    assert [p.doc for p in obj.params] == ["How many, at most."]
    assert [c.doc for c in obj.columns] == ["Its n, in ns."]
    assert obj.summary == "One row per n."


def test_nothing_is_shadowed():
    """No TEMP object in nsyswrap takes the name of a real one (a view, an SQL object, a
    raw or exported table): every object has one name, its own. (The synthetic report
    writer's SQLite TEMP tables are scratch tables with names of their own.)"""
    from nsyswrap.storage.raw_tables import RAW_TABLES

    real = {n.lower() for n in [*sql_objects.objects(), *_macro_names()]}
    real |= {f"raw_{k}" for k in RAW_TABLES}
    real |= {t.lower() for names, _ in RAW_TABLES.values() for t in names}
    temp = re.compile(
        r"\bCREATE\s+(?:OR\s+REPLACE\s+)?TEMP(?:ORARY)?\s+(?:TABLE|VIEW|MACRO|FUNCTION)"
        r"\s+(?:IF\s+NOT\s+EXISTS\s+)?\"?(\w+)",
        re.I,
    )
    root = Path(__file__).resolve().parents[2] / "nsyswrap"
    for path in root.rglob("*.py"):
        for name in temp.findall(path.read_text()):
            assert name.lower() not in real, f"{path.name}: TEMP {name} shadows a real object"


def test_nothing_is_inferred_from_sql_text(tmp_path, monkeypatch):
    """What runs is what headers declare: an object named in ad-hoc SQL (even in a
    comment) is neither built nor bound, and asking for a module builds only what its
    header says it needs."""
    monkeypatch.setenv("NSYSWRAP_CACHE_DIR", str(tmp_path))
    with open_run([FIXTURES / "run2"], jobs=1) as run:
        assert run.df("SELECT 1 AS x -- xr_events")["x"].tolist() == [1]
        with pytest.raises(Exception, match="xr_events"):
            run.df("SELECT * FROM xr_events")
        assert not list(tmp_path.rglob("objects/*")) and not run.bound
        run_module(run, "gaps.by_cause")
        built = {p.name.rsplit("-", 1)[0] for p in tmp_path.rglob("objects/*")}
    needed = {n for n in sql_objects.needs("gaps.by_cause") if sql_objects.get(n).kind == "report"}
    assert needed == {
        "device_windows",
        "device_step_regions",
        "device_sync_islands",
        "device_timeline",
        "idle_gap_rows",
    }
    # and the run's rank identity its rows take (nsyswrap.engine.rank_labels: run object rank_map)
    labels = {n for n in sql_objects.needs("rank_map") if sql_objects.get(n).kind == "report"}
    # and what their builders make in the same call (device_timeline: nccl_overlap)
    builders = {sql_objects.get(n).builder for n in needed} - {None}
    made = {o.name for o in sql_objects.objects().values() if o.builder in builders}
    assert built == needed | labels | made | {"gaps.by_cause"}


def test_sections_hold_no_sql():
    """The report's sections and the HTML page ask the planner for named results: no SQL
    text, DDL, macro or object names, no ad-hoc queries on the connection."""
    root = Path(__file__).resolve().parents[2] / "nsyswrap"
    macros = _macro_names()
    objects = {o.name for o in sql_objects.objects().values() if o.kind in ("report", "run")}
    objects.discard("idle_gaps")  # also the id of the report's table of idle gaps
    names = "|".join(sorted(macros | objects))
    words = re.compile(
        rf"\b(SELECT|CREATE|DROP|INSERT|MACRO|TEMP|{names})\b|\.(df|execute|sql)\(|\.con\b"
    )
    for path in [*(root / "report").glob("*.py"), *(root / "html_report").glob("*.py")]:
        found = words.search(path.read_text())
        assert found is None, f"{path.name}: {found[0]!r}"


# The engine's and storage's modules run SQL (nsyswrap/engine, nsyswrap/storage), and so does
# the public API (`nsyswrap.sql` runs the user's); so do the synthetic report writer's, which
# write nsys's own SQLite export format, not analysis.
SQL_RUNNERS = (
    "engine/",
    "storage/",
    "api.py",
    "synth/writer.py",
    "synth/schema.py",
    "synth/extract_schema.py",
)


def test_no_sql_in_python_outside_the_engine():
    """Every package and module outside the engine (domain, sections, CLI) holds no SQL
    text and runs no query: what it needs is a declared object or module in sql/."""
    root = Path(__file__).resolve().parents[2] / "nsyswrap"
    words = re.compile(
        r"\b(SELECT|CREATE|DROP|INSERT|MACRO|TEMP)\b|\b(run|con|connection|self)"
        r"\.(df|execute|sql)\(|\.con\b"
    )
    checked = 0
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(SQL_RUNNERS):
            continue
        found = words.search(path.read_text())
        assert found is None, f"nsyswrap/{rel}: {found[0]!r}"
        checked += 1
    assert checked > 60
