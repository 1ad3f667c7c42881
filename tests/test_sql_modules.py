"""Every SQL file is a documented module, and every prebuilt query matches its golden output."""
from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.cache import VIEWS
from nsyswrap.connection import CachedReport, connect, reduction_names
from nsyswrap.queries import catalog, parse, run_module
from nsyswrap.sql_files import sql_root

from conftest import FIXTURES

GOLDEN = Path(__file__).parent / "golden"
GOLDEN_RUN = FIXTURES / "run4_straggler"
MODULES = sorted(catalog())
UPDATE = os.environ.get("NSYSWRAP_UPDATE_GOLDEN") == "1"


def test_every_sql_file_has_a_header():
    for path in sql_root().rglob("*.sql"):
        first = path.read_text().splitlines()[0]
        assert first.startswith("-- ") and len(first) > 10, path


@pytest.fixture(scope="module")
def golden_run():
    with open_run([GOLDEN_RUN]) as run:
        yield run


@pytest.mark.parametrize("name", MODULES)
def test_module_columns_are_documented(golden_run, name):
    module = catalog()[name]
    df = run_module(golden_run, name)
    assert list(df.columns) == [c.name for c in module.columns], "@column lines must match the result"
    for column in module.columns:
        assert column.doc, f"{name}.{column.name} has no description"


@pytest.mark.parametrize("name", MODULES)
def test_module_matches_golden(golden_run, name):
    df = run_module(golden_run, name)
    df = df.drop(columns=[c for c in df.columns if c == "report"])
    path = GOLDEN / f"{name}.csv"
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no golden file {path}; run NSYSWRAP_UPDATE_GOLDEN=1 pytest {__file__}")
        GOLDEN.mkdir(exist_ok=True)
        df.to_csv(path, index=False)
    expected = pd.read_csv(path)
    actual = pd.read_csv(pd.io.common.StringIO(df.to_csv(index=False)))
    pd.testing.assert_frame_equal(actual, expected, check_dtype=False, rtol=1e-9)


@pytest.mark.parametrize("view", VIEWS)
def test_view_columns_are_documented(golden_run, view):
    module = parse(sql_root() / "_views" / f"{view}.sql", view)
    columns = golden_run.df(f"SELECT * FROM {view} LIMIT 0").columns.tolist()
    assert columns == ["rank", "report"] + [c.name for c in module.columns]


@pytest.mark.parametrize("name", reduction_names())
def test_reduction_columns_are_documented(golden_run, name):
    """A reduction's header declares each column with its type: while the reductions are
    built, the declared columns stand in for it (see nsyswrap.connection)."""
    module = parse(sql_root() / "_reductions" / f"{name}.sql", name)
    assert module.summary and not module.params
    described = golden_run.con.execute(f"DESCRIBE {name}").fetchall()
    assert [(c[0], c[1]) for c in described] == [("rank", "INTEGER"), ("report", "VARCHAR")] + [
        (c.name, c.type) for c in module.columns]
    for column in module.columns:
        assert column.doc, f"{name}.{column.name} has no description"


def test_reductions_cannot_read_each_other(golden_run, tmp_path):
    """While a report's reductions are built, reading any reduction fails loudly."""
    cached = golden_run.cached[0]
    con = connect([CachedReport(0, cached.path, cached.views_dir, None)], memory_limit="1GB",
                  spill_dir=tmp_path)
    try:
        for name in reduction_names():
            with pytest.raises(duckdb.Error, match="while the reductions are built"):
                con.execute(f"SELECT count(*) FROM {name}").fetchall()
    finally:
        con.close()


@pytest.mark.parametrize("name", [n for n in MODULES if catalog()[n].per_rank])
def test_per_rank_module_orders_by_its_columns(name):
    """Per-rank results are merged in the module's ORDER BY: its keys must be columns."""
    module = catalog()[name]
    keys = [k for k, _ in module.order()]
    assert keys and set(keys) <= {c.name for c in module.columns}
