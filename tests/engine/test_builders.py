"""Objects built in Python (`-- @builder module:function`, nsyswrap.engine.builders): per-report and
run objects, typed by their @column lines, reading only what they declare."""

from __future__ import annotations

import pandas as pd
import pytest
from helpers.paths import FIXTURES

from nsyswrap import open_run
from nsyswrap.engine import planner, sql_objects

HEADERS = {
    "_reductions/test_device_counts.sql": """-- One row per device of one report: its activities.
-- @reads kernels
-- @param min_dur_ns BIGINT = 0   Count activities at least this long (ns).
-- @builder test_builders:device_counts
-- @column device BIGINT      CUDA device id.
-- @column activities BIGINT  Activities on it.
""",
    "_run/test_run_total.sql": """-- One row: the run's activities (a run builder of two objects).
-- @reads test_device_counts
-- @param min_dur_ns BIGINT = 0   Count activities at least this long (ns).
-- @builder test_builders:run_totals
-- @column activities BIGINT  Activities of the run.
""",
    "_run/test_run_devices.sql": """-- One row per device (made by the same call as test_run_total).
-- @reads test_device_counts
-- @param min_dur_ns BIGINT = 0   Count activities at least this long (ns).
-- @builder test_builders:run_totals
-- @column rank INTEGER       Rank.
-- @column devices BIGINT     Devices.
""",
    "_run/test_run_sneaky.sql": """-- A builder reading what it does not declare.
-- @reads session
-- @builder test_builders:sneaky
-- @column n BIGINT           Rows.
""",
}
CALLS = {"run_totals": 0}


def device_counts(inputs):
    kernels = inputs.arrow("kernels", ["device", "dur_ns"]).to_pandas()
    kept = kernels[kernels["dur_ns"] >= inputs.params["min_dur_ns"]]
    return kept.groupby("device", as_index=False).size().rename(columns={"size": "activities"})


def run_totals(inputs):
    CALLS["run_totals"] += 1
    counts = inputs.frame("test_device_counts")
    return {
        "test_run_total": pd.DataFrame({"activities": [counts["activities"].sum()]}),
        "test_run_devices": counts.groupby("rank", as_index=False)
        .size()
        .rename(columns={"size": "devices"}),
    }


def sneaky(inputs):
    return pd.DataFrame({"n": [len(inputs.frame("kernels"))]})


@pytest.fixture
def declared(tmp_path, monkeypatch, cache):
    """The test objects above, declared beside nsyswrap's own."""
    found = sql_objects.objects()
    for rel, text in HEADERS.items():
        path = tmp_path / "sql" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        name = path.stem
        kind = sql_objects.KINDS[path.parent.name]
        monkeypatch.setitem(found, name, sql_objects.parse(path, name, kind))
    yield
    for cached in (sql_objects.needs, sql_objects.digest):
        cached.cache_clear()


def test_built_objects_are_typed_stored_and_built_once(declared):
    with open_run([FIXTURES / "run2"], jobs=1) as run:
        planner.bind(run, "test_run_total", {"min_dur_ns": 0})
        planner.bind(run, "test_run_devices", {"min_dur_ns": 0})
        total = run.df("SELECT * FROM test_run_total")
        assert run.df("SELECT count(*) AS n FROM kernels")["n"][0] == total["activities"][0]
        described = run.connection.execute("DESCRIBE test_device_counts").fetchall()
        assert [(c[0], c[1]) for c in described] == [
            ("rank", "INTEGER"),
            ("report", "VARCHAR"),
            ("device", "BIGINT"),
            ("activities", "BIGINT"),
        ]
        assert run.df("SELECT * FROM test_run_devices")["rank"].tolist() == [0, 1]
    assert CALLS["run_totals"] == 1  # one call made both objects
    with open_run([FIXTURES / "run2"], jobs=1) as run:  # stored: not built again
        planner.bind(run, "test_run_devices", {"min_dur_ns": 0})
    assert CALLS["run_totals"] == 1


def test_a_builder_reads_only_what_it_declares(declared):
    with open_run([FIXTURES / "run2"], jobs=1) as run:
        with pytest.raises(RuntimeError, match="reads kernels, which its header .* not declare"):
            planner.bind(run, "test_run_sneaky", {})


def test_a_built_object_has_no_sql_body(tmp_path):
    path = tmp_path / "x.sql"
    path.write_text("-- One row.\n-- @builder a.b:c\n-- @column n BIGINT  N.\nSELECT 1 AS n\n")
    with pytest.raises(sql_objects.HeaderError, match="no SQL body"):
        sql_objects.parse(path, "x", "run")


def test_a_cycle_of_headers_names_its_files(tmp_path, monkeypatch):
    """An object that needs itself through what it reads is refused before anything runs,
    naming each file of the cycle (never a bare RecursionError)."""
    texts = {
        "a": "-- A.\n-- @reads b\n-- @column x BIGINT  X.\nSELECT x FROM b\n",
        "b": "-- B.\n-- @reads a\n-- @column x BIGINT  X.\nSELECT x FROM a\n",
    }
    for name, text in texts.items():
        (tmp_path / "_reductions").mkdir(exist_ok=True)
        (tmp_path / "_reductions" / f"{name}.sql").write_text(text)
    monkeypatch.setattr(sql_objects, "sql_root", lambda: tmp_path)
    sql_objects.objects.cache_clear()
    try:
        with pytest.raises(sql_objects.HeaderError) as found:
            sql_objects.objects()
    finally:
        monkeypatch.undo()
        sql_objects.objects.cache_clear()
    a, b = tmp_path / "_reductions" / "a.sql", tmp_path / "_reductions" / "b.sql"
    assert str(found.value) == f"a cycle of @reads/@include: a ({a}) -> b ({b}) -> a ({a})"
