"""GPUs counted by device identity (#38 item 3) on every real capture: each rank's device
is the physical GPU its report's TARGET_INFO_GPU names (read here with sqlite3), ranks
sharing one GPU count it once, and the first line says so ("2 ranks on 1 GPU")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from helpers.real_captures import CAPTURES

from nsyswrap.report import report
from nsyswrap.report.render import first_screen

SHARING = [n for n in CAPTURES if n.startswith("real/h") and n != "real/h100_cuda_graphs"]


def _gpus(rep: dict) -> list[dict]:
    trace = next(s for s in rep["sections"] if s["id"] == "trace")
    return next(t["rows"] for t in trace["tables"] if t["id"] == "gpus")


def _listed_uuid(path: Path, device: int) -> str | None:
    """The UUID TARGET_INFO_GPU lists for `device` (None: no such table, row or UUID)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        try:
            row = con.execute("SELECT uuid FROM TARGET_INFO_GPU WHERE id = ?", (device,)).fetchone()
        except sqlite3.OperationalError:  # an export without the table
            return None
    return row[0] if row and row[0] else None


@pytest.mark.parametrize("name", sorted(CAPTURES))
def test_each_gpu_is_the_one_its_report_lists(name):
    rep = report(CAPTURES[name])
    paths = {r["rank"]: Path(r["path"]) for r in rep["reports"]}
    report_of = {r["rank"]: r["report_rank"] for r in rep["ranks"]}
    rows = _gpus(rep)
    uuids = {}
    for row in rows:
        uuid = _listed_uuid(paths[report_of[row["rank"]]], row["device"])
        if uuid is not None:
            assert (row["identified_by"], row["key"]) == ("uuid", f"uuid {uuid}")
            uuids[(row["rank"], row["device"])] = uuid
        else:
            assert row["identified_by"] != "uuid"
    numbered = {(r["rank"], r["device"]): r["gpu"] for r in rows}
    if len(uuids) == len(rows):  # every GPU by its UUID: one number per UUID
        assert len(set(numbered.values())) == len(set(uuids.values()))
        for key, uuid in uuids.items():
            same = {k for k, u in uuids.items() if u == uuid}
            assert {numbered[k] for k in same} == {numbered[key]}
    for row in rows:
        sharing = {r["rank"] for r in rows if r["gpu"] == row["gpu"]}
        assert row["ranks_on_gpu"]["value"] == len(sharing)


@pytest.mark.parametrize("name", SHARING)
def test_two_ranks_on_one_gpu_are_said(name):
    """Every two-rank capture of fixtures/real ran both ranks on one GPU (the same UUID in
    both files): its first line says so."""
    rep = report(CAPTURES[name])
    assert {r["gpu"] for r in _gpus(rep)} == {0}
    assert first_screen(rep, 80)[0].startswith("nsyswrap report: 2 ranks on 1 GPU (")


def test_ranks_on_their_own_gpus_say_nothing_more():
    """The MPI run: 5 ranks, 5 UUIDs; the first line counts the ranks only."""
    if "mpi/all" not in CAPTURES:
        pytest.skip("shared/nsys-sqlite/real-mpi is not here")
    rep = report(CAPTURES["mpi/all"])
    assert len({r["gpu"] for r in _gpus(rep)}) == 5
    assert first_screen(rep, 80)[0].startswith("nsyswrap report: 5 ranks (")
