"""Matching by NCCL's own NVTX payloads (nsyswrap.crossrank.nccl_payload): the hybrid8 run
without any `coll:` range, its NCCL ranges carrying payloads (binaryData) and
ncclCommInitRank ranges; decoding by the exported schemas; ranks from NCCL; the fallback
where exports have no blobs; `nsyswrap export` asking for blobs."""

from __future__ import annotations

import os
import shutil
import sqlite3
import struct
import sys
from pathlib import Path

import pandas as pd
import pytest

# The planted-truth checks of the hybrid run, collected here again with this module's
# `hybrid` fixture (the payload variants): every offset and drift, every matched
# collective's skew and wait, the timeline, the straggler rank, phase and steps, groups
# never merged.
from helpers.hybrid_checks import (  # noqa: F401
    test_every_matched_collective_skew_and_wait_exact,
    test_every_offset_and_drift_exact,
    test_groups_are_found_and_never_merged,
    test_straggler_rank_phase_and_steps,
    test_timeline_places_every_rank_by_its_drifting_clock,
)

from nsyswrap import open_run
from nsyswrap.crossrank import clock_offsets
from nsyswrap.crossrank.nccl_payload import (
    BY_LAYOUT,
    NO_BLOBS,
    PayloadError,
    decode,
    payload_keys,
    split,
)
from nsyswrap.crossrank.ranks import member_ranks
from nsyswrap.engine import planner
from nsyswrap.launch.export import export_run, include_blobs
from nsyswrap.storage.reports import Report
from nsyswrap.synth import nccl_nvtx, preset

PAYLOADS = {"coll_ranges": False, "nccl_payloads": True}
VARIANTS = {
    "payloads": PAYLOADS,
    "payloads_one_capture_per_node": {**PAYLOADS, "ranks_per_report": 4},
}
MFU = (
    Path(__file__).resolve().parents[2]
    / ".."
    / "shared"
    / "nsys-sqlite"
    / "public"
    / "nsysai__mfu_2gpu_before.sqlite"
)


@pytest.fixture(scope="module")
def payload_run(generated_run):
    return generated_run(preset("hybrid8").replace(**PAYLOADS))


@pytest.fixture(scope="module", params=list(VARIANTS))
def hybrid(request, payload_run, generated_run):
    if request.param == "payloads":
        truth, out = payload_run
    else:
        truth, out = generated_run(preset("hybrid8").replace(**VARIANTS[request.param]))
    with open_run([out]) as run:
        yield truth, run


def _groups(run) -> pd.DataFrame:
    planner.bind(run, "xr_groups", {})
    return run.df("SELECT * FROM xr_groups ORDER BY members")


def test_groups_come_from_payloads_with_their_size(hybrid):
    truth, run = hybrid
    groups = _groups(run)
    assert (groups["found_by"].str.startswith("nccl payload")).all() and (
        groups["status"] == "matched"
    ).all()
    # the two TP groups run the same op with the same sizes: only the comm hash parts them
    tp = groups[groups["members"].isin(["0,1,2,3", "4,5,6,7"])]
    assert tp["pg"].nunique() == 2 and (tp["group_size"] == 4).all() and (tp["captured"] == 4).all()
    sc = preset("hybrid8")
    assert set(groups["pg"]) == {
        f"nccl:{nccl_nvtx.comm_hash(sc.seed, pg):016x}" for pg in (1, 2, 100, 101, 102, 103)
    }


def test_ranks_of_a_capture_per_node_come_from_ncclcomminitrank(hybrid):
    truth, run = hybrid
    offsets = clock_offsets(run)
    if run.reports[0].path.name.startswith("rank"):
        assert (offsets["rank_source"] == "file name").all()  # more trusted than NCCL's word
    else:
        assert offsets["rank"].tolist() == list(range(8))
        assert (
            offsets["rank_source"]
            == "NCCL ncclCommInitRank (rank in the world communicator of 8 ranks)"
        ).all()


def test_a_partial_capture_says_how_many_members_each_group_had(payload_run):
    _, out = payload_run
    with open_run([out / f"rank{r}.sqlite" for r in range(6)]) as run:
        groups = _groups(run).set_index("members")
    assert groups.loc["4,5", ["captured", "group_size", "status"]].tolist() == [2, 4, "matched"]
    assert groups.loc["2", ["captured", "group_size", "status"]].tolist() == [1, 2, "one rank only"]


def test_without_blobs_matching_falls_back_to_kernels_and_says_why(payload_run, tmp_path):
    _, out = payload_run
    for rank in range(8):
        copy = tmp_path / f"rank{rank}.sqlite"
        shutil.copy(out / f"rank{rank}.sqlite", copy)
        with sqlite3.connect(copy) as con:
            con.execute("UPDATE NVTX_EVENTS SET binaryData = NULL")
    with open_run([tmp_path]) as run:
        groups = _groups(run)
    assert sorted(groups["members"]) == ["0,1,2,3", "0,4", "1,5", "2,6", "3,7", "4,5,6,7"]
    assert groups["found_by"].str.startswith("NCCL kernels per stream").all()
    assert groups["found_by"].str.endswith(NO_BLOBS).all()


def test_without_schema_tables_nccls_layout_decodes_and_groups_say_so(payload_run, tmp_path):
    _, out = payload_run
    for rank in range(8):
        copy = tmp_path / f"rank{rank}.sqlite"
        shutil.copy(out / f"rank{rank}.sqlite", copy)
        with sqlite3.connect(
            copy
        ) as con:  # as an export before nsys 2026.2 (binaryData, no schemas)
            con.execute("DROP TABLE NVTX_PAYLOAD_SCHEMAS")
            con.execute("DROP TABLE NVTX_PAYLOAD_SCHEMA_ENTRIES")
    with open_run([tmp_path]) as run:
        groups = _groups(run)
    assert sorted(groups["members"]) == ["0,1,2,3", "0,4", "1,5", "2,6", "3,7", "4,5,6,7"]
    assert (
        groups["found_by"].str.startswith("nccl payload").all()
        and groups["found_by"].str.endswith(BY_LAYOUT).all()
    )
    assert (groups["group_size"] == groups["captured"]).all()


# --- decoding -------------------------------------------------------------------------------------


def test_a_blob_decodes_by_the_schema_entries_of_a_real_2026_2_export():
    if not MFU.is_file():
        pytest.skip("needs ../shared/nsys-sqlite/public")
    with sqlite3.connect(f"file:{MFU}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT DISTINCT name, type, coalesce(offset, 0) FROM NVTX_PAYLOAD_SCHEMA_ENTRIES "
            "WHERE schemaId = 16777223 ORDER BY idx"
        ).fetchall()
    assert [r[0] for r in rows] == [
        "NCCL communicator ID",
        "Message size [bytes]",
        "Reduction operation",
    ]
    payload = struct.pack("<QQi4x", 0xFEDCBA9876543210, 25 * 2**20, 2)  # ncclMax: a registered enum
    blob = struct.pack("<QQQQ", 1, 16777223, len(payload), 32) + payload
    domain, schema, body = split(blob)
    assert (domain, schema) == (1, 16777223)
    assert decode(body, rows) == {
        "NCCL communicator ID": 0xFEDCBA9876543210,
        "Message size [bytes]": 25 * 2**20,
        "Reduction operation": 2,
    }


def test_offsets_come_from_the_schema_not_from_nccls_layout():
    entries = [("Rank", 5, 0), ("No. of ranks", 5, 4), ("NCCL communicator ID", 18, 8)]
    payload = struct.pack("<iiQ", 3, 16, 77)
    assert decode(payload, entries) == {"Rank": 3, "No. of ranks": 16, "NCCL communicator ID": 77}
    assert decode(payload[:12], entries) == {
        "Rank": 3,
        "No. of ranks": 16,
    }  # truncated entry left out


def test_a_blob_shorter_than_it_says_is_refused():
    with pytest.raises(PayloadError, match="shorter than the 32-byte header"):
        split(b"\x00" * 16)
    with pytest.raises(PayloadError, match="says 24 payload bytes but holds 8"):
        split(struct.pack("<QQQQ", 1, 2, 24, 32) + b"\x00" * 8)


def test_nccl_ranges_without_payloads_give_no_keys_and_say_why():
    keys = pd.DataFrame(
        {
            "keyed": ["nccl", "kernel"],
            "rank": [0, 0],
            "pid": [1, 1],
            "pg": ["nccl", "s"],
            "seq": [0, 0],
            "op": ["all_reduce", "all_reduce"],
            "cpu_start_ns": [5, 6],
            "payload": [None, None],
        }
    )
    schemas = pd.DataFrame(
        columns=["rank", "domain_id", "schema_id", "idx", "type", "name", "offset_bytes"]
    )
    rest, why = payload_keys(keys, schemas)
    assert rest["keyed"].tolist() == ["kernel"] and "payload" not in rest and why == NO_BLOBS


def test_nccl_world_rank_beats_device_order_and_the_environment_only():
    processes = pd.DataFrame({"rank": [0, 0, 1], "pid": [10, 11, 20], "device": [0, 1, 0]})
    callers = processes[["rank", "pid"]]
    reports = [
        Report(0, Path("capture0.sqlite"), "order"),
        Report(1, Path("capture1.sqlite"), "order"),
    ]
    nccl = pd.DataFrame(
        {"rank": [0, 0, 1], "pid": [10, 11, 20], "world_rank": [2, 0, 1], "nranks": [3, 3, 3]}
    )
    members = member_ranks(processes, callers, reports, nccl)
    assert members[["report_rank", "pid", "rank"]].values.tolist() == [
        [0, 11, 0],
        [1, 20, 1],
        [0, 10, 2],
    ]
    assert members["rank_source"].str.startswith("NCCL ncclCommInitRank").all()
    named = [
        Report(0, Path("rank0.sqlite"), "file name"),
        Report(1, Path("rank1.sqlite"), "file name"),
    ]
    one = pd.DataFrame({"rank": [0, 1], "pid": [10, 20], "device": [0, 0]})
    swapped = pd.DataFrame(
        {"rank": [0, 1], "pid": [10, 20], "world_rank": [1, 0], "nranks": [2, 2]}
    )
    assert (
        member_ranks(one, one[["rank", "pid"]], named, swapped)["rank_source"].tolist()
        == ["file name"] * 2
    )
    clash = nccl.assign(world_rank=[0, 0, 1])  # NCCL's ranks repeat: device order stays
    assert (
        not member_ranks(processes, callers, reports, clash)["rank_source"]
        .str.startswith("NCCL")
        .any()
    )


# --- export asks for blobs where nsys can ---------------------------------------------------------

STANDIN = """#!{python} -I
import json, os, sys
args = sys.argv[1:]
open(os.environ["NSYS_STANDIN_LOG"], "a").write(json.dumps(args) + "\\n")
if args == ["--version"]:
    print("NVIDIA Nsight Systems version 2026.2.1.210-standin")
    sys.exit(0)
if args == ["help", "export"]:
    print("usage: nsys export [<args>] [nsys-rep-file]\\n" + os.environ.get("NSYS_STANDIN_HELP", ""))
    sys.exit(0)
options = dict(a.partition("=")[::2] for a in args[1:] if a.startswith("--"))
open(options["--output"], "w").write("sqlite of " + args[-1])
"""  # noqa: E501  (the stand-in's program text kept as written)


@pytest.mark.parametrize(
    "helps", ["", "\t--include-blobs=\n\t   Possible values are 'true' or 'false'."]
)
def test_export_asks_for_blobs_only_where_nsys_has_them(helps, tmp_path, monkeypatch):
    nsys = tmp_path / "bin" / "nsys"
    nsys.parent.mkdir()
    nsys.write_text(STANDIN.format(python=sys.executable))
    nsys.chmod(0o755)
    log = tmp_path / "calls.jsonl"
    monkeypatch.setenv("NSYS_STANDIN_LOG", str(log))
    monkeypatch.setenv("NSYS_STANDIN_HELP", helps)
    monkeypatch.setenv("PATH", f"{nsys.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "h.rank0.nsys-rep").write_text("report")
    export_run(tmp_path)
    export = [line for line in log.read_text().splitlines() if line.startswith('["export"')]
    assert len(export) == 1 and ('"--include-blobs=true"' in export[0]) == bool(helps)


@pytest.mark.skipif(shutil.which("nsys") is None, reason="needs nsys")
def test_nsys_2022_4_has_no_include_blobs():
    version = os.popen("timeout 60 nsys --version").read()
    if "2022.4" not in version:
        pytest.skip(f"checks nsys 2022.4 ({version.strip()})")
    assert not include_blobs(shutil.which("nsys"))
