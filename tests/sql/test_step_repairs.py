"""A step number used again (an epoch restarting at step:0) and step ranges reaching into
the next step are repaired by the one step definition (step_ranges in
sql/_macros/metrics.sql), counted by steps.repairs and said in the data-quality note:
the report of the repaired run is the report of the run as it should have been recorded
(every table the same), never two steps merged or a time counted in two steps."""

from __future__ import annotations

import dataclasses
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

import nsyswrap
from nsyswrap.report import report
from nsyswrap.synth import Scenario, Straggler, generate_run

BASE = Scenario(
    name="repairs",
    seed=11,
    ranks=2,
    steps=8,
    kernels_per_step=10,
    modules=2,
    straggler=Straggler(rank=1, phase="backward", extra_ns=300_000),
)


@pytest.fixture(scope="module")
def clean(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("clean")
    generate_run(dataclasses.replace(BASE), out)
    return out


@pytest.fixture(scope="module")
def clean_report(clean) -> dict:
    return json.loads(json.dumps(report([clean])))


def _edited(clean: Path, folder: Path, edit) -> Path:
    """A copy of `clean` whose step ranges (rowid, start, end, text, in start order) of
    each rank are changed by `edit(con, rank, ranges)`."""
    shutil.copytree(clean, folder)
    for rank, path in enumerate(sorted(folder.glob("rank*.sqlite"))):
        con = sqlite3.connect(path)
        ranges = con.execute(
            'SELECT rowid, start, "end", text FROM NVTX_EVENTS '
            "WHERE text LIKE 'step:%' ORDER BY start"
        ).fetchall()
        edit(con, rank, ranges)
        con.commit()
        con.close()
    return folder


def _tables(built: dict) -> dict:
    """Every table's rows, but the data-quality section (it says what was repaired)."""
    return {
        (s["id"], t["id"]): t["rows"]
        for s in built["sections"]
        if s["id"] != "data_quality"
        for t in s["tables"]
    }


def _notes(built: dict) -> list[str]:
    (dq,) = [s for s in built["sections"] if s["id"] == "data_quality"]
    return dq["notes"]


def _renumber(epochs: int, ranks: tuple[int, ...] = (0, 1)):
    """Each of `ranks` numbers its steps in `epochs` epochs, each from step:0."""

    def edit(con, rank, ranges):
        if rank not in ranks:
            return
        size = -(-len(ranges) // epochs)
        for i, (rowid, _, _, _) in enumerate(ranges):
            con.execute(
                "UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", (f"step:{i % size}", rowid)
            )

    return edit


@pytest.mark.parametrize(
    "epochs, ranks",
    [(2, (0, 1)), (4, (0, 1)), (2, (1,)), (8, (0,))],
    ids=["two-epochs", "four-epochs", "one-rank", "every-step-0"],
)
def test_a_step_number_used_again_is_numbered_on(clean, clean_report, tmp_path, epochs, ranks):
    run = _edited(clean, tmp_path / "run", _renumber(epochs, ranks))
    built = json.loads(json.dumps(report([run])))
    assert _tables(built) == _tables(clean_report)
    assert built["diagnosis"]["headline"] == clean_report["diagnosis"]["headline"]
    repairs = nsyswrap.query("steps.repairs", [run])
    size = -(-8 // epochs)
    assert repairs.set_index("rank")["renumbered"].to_dict() == {
        r: (8 - size if r in ranks else 0) for r in (0, 1)
    }
    (note,) = [n for n in _notes(built) if "use a step number again" in n]
    assert f"{8 - size} of 8 step ranges" in note


@pytest.mark.parametrize("into", [0.01, 0.5, 0.99], ids=["1%", "half", "99%"])
def test_a_step_range_reaching_into_the_next_is_cut_where_it_begins(
    clean, clean_report, tmp_path, into
):
    """Each step range (but the last) reaches `into` the next step's length past its
    start: cut, every table is the clean run's, and a rank's steps add up to no more than
    their span. (A range reaching past the next step's end holds it: nesting, not cut.)"""

    def edit(con, rank, ranges):
        for (rowid, _, _, _), (_, start, end, _) in zip(ranges, ranges[1:]):
            reach = start + int((end - start) * into)
            con.execute('UPDATE NVTX_EVENTS SET "end" = ? WHERE rowid = ?', (reach, rowid))

    run = _edited(clean, tmp_path / "run", edit)
    built = json.loads(json.dumps(report([run])))
    assert _tables(built) == _tables(clean_report)
    spans = nsyswrap.query("steps.spans", [run])
    for _, steps in spans.groupby("rank"):
        assert steps.duration_ns.sum() <= steps.end_ns.max() - steps.start_ns.min()
    assert nsyswrap.query("steps.repairs", [run]).cut.tolist() == [7, 7]
    (note,) = [n for n in _notes(built) if "reach into the next step" in n]
    assert note.startswith("ranks 0 and 1: 7 of 8 step ranges each")


def test_a_restart_and_overlaps_together(clean, tmp_path):
    """Two epochs whose ranges also overlap: every step its own, none longer than the
    clean one, both repairs said."""
    renumber = _renumber(2)

    def edit(con, rank, ranges):
        renumber(con, rank, ranges)
        for (rowid, _, _, _), (_, _, end, _) in zip(ranges, ranges[1:]):
            con.execute('UPDATE NVTX_EVENTS SET "end" = ? WHERE rowid = ?', (end - 1, rowid))

    run = _edited(clean, tmp_path / "run", edit)
    steps = nsyswrap.query("steps.spans", [run])
    clean_steps = nsyswrap.query("steps.spans", [clean])
    assert steps.step.tolist() == clean_steps.step.tolist()
    assert steps.duration_ns.tolist() == clean_steps.duration_ns.tolist()
    notes = _notes(json.loads(json.dumps(report([run]))))
    assert any("use a step number again" in n for n in notes)
    assert any("reach into the next step" in n for n in notes)


def test_a_clean_run_has_nothing_to_repair(clean, clean_report):
    repairs = nsyswrap.query("steps.repairs", [clean])
    assert repairs.renumbered.sum() == 0 and repairs.cut.sum() == 0
    assert _notes(clean_report) == []
