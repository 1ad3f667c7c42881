"""A new window reuses what does not depend on it: the stored per-report pieces (the
analysed window, step regions, host-sync islands, each NCCL kernel's context) equal what
the metrics macros compute for that window, and collectives.exposure over nccl_context
equals the former query that computed the context for the window's kernels alone (kept
here as the reference: tests/data/collectives_exposure_reference.sql)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from helpers.paths import FIXTURES, TESTS
from helpers.windows import WINDOWS

from nsyswrap import open_run
from nsyswrap.engine import planner, sql_objects
from nsyswrap.synth import preset

REFERENCE = (TESTS / "data" / "collectives_exposure_reference.sql").read_text()
MACROS = {
    "device_windows": "analysis_window($window_nvtx, $step_pattern, $step_from, $step_to)",
    "device_step_regions": "step_regions($step_pattern)",
    "device_sync_islands": "sync_islands()",
}


def _used(sql: str, params: dict) -> dict:
    return {k: v for k, v in params.items() if f"${k}" in sql}


def _sorted(df: pd.DataFrame) -> pd.DataFrame:
    df = df.drop(columns=[c for c in ("report",) if c in df.columns])
    return df.sort_values(list(df.columns), ignore_index=True, na_position="first")


@pytest.fixture(scope="module")
def hybrid8(generated_run):
    _, out = generated_run(preset("hybrid8").replace(steps=4))
    return out


@pytest.mark.parametrize("fixture", ["run2", "run4_straggler", "edge_cases"])
def test_stored_pieces_equal_the_window_computed_alone(fixture):
    _check(sorted((FIXTURES / fixture).glob("*.sqlite")))


def test_stored_pieces_on_hybrid8(hybrid8):
    _check(sorted(hybrid8.glob("*.sqlite"))[:2])


def _check(reports: list[Path]) -> None:
    exposure = sql_objects.get("collectives.exposure")
    for report in reports:
        with open_run([report], jobs=1) as run:
            for window in WINDOWS:
                params = exposure.values(window)
                planner.prepare(run, "collectives.exposure", params)
                con = run.con  # with the macro libraries the reference queries call
                new = con.execute(exposure.sql, exposure.bound(params)).df()
                old = con.execute(REFERENCE, _used(REFERENCE, params)).df()
                pd.testing.assert_frame_equal(
                    _sorted(new),
                    _sorted(old),
                    check_dtype=False,
                    obj=f"collectives.exposure {report.name} {window}",
                )
                for name, macro in MACROS.items():
                    planner.bind(run, name, params)
                    stored = con.execute(f"SELECT * EXCLUDE (report) FROM {name}").df()
                    direct = con.execute(f"SELECT * FROM {macro}", _used(macro, params)).df()
                    pd.testing.assert_frame_equal(
                        _sorted(stored),
                        _sorted(direct),
                        check_dtype=False,
                        obj=f"{name} {report.name} {window}",
                    )
