"""Every SQL file is a documented module, and every prebuilt query matches its golden output."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from nsyswrap import open_run
from nsyswrap.cache import VIEWS
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
