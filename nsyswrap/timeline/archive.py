"""One trace file per rank and a Perfetto manifest, in one TAR archive.

Each `rank<r>.json` holds that rank's events on its own report's session clock (the
fitted drift and clock jump taken out: run time less its shift, see
crossrank.clock_offsets), with its launch flows; the manifest (`perfetto_manifest.json`,
Perfetto's trace manifest format, version 1) pins every file to the file of the rank with
the smallest shift by the difference of their shifts (`offset_ns`, never negative, so no
event falls before the merged timeline), and names the machine (host) of each rank.
Flows between ranks (a collective's last arrival) need one file: they are left out here.
"""

from __future__ import annotations

import io
import json
import tarfile

import pandas as pd

from nsyswrap.timeline.chrome import trace_events

MANIFEST = "perfetto_manifest.json"


def _file(rank: int) -> str:
    return f"rank{rank}.json"


def manifest(clocks: pd.DataFrame) -> dict:
    """The Perfetto manifest of the ranks of `clocks` (rank, shift_ns, host)."""
    clocks = clocks.sort_values(["shift_ns", "rank"])
    reference = clocks.iloc[0]
    files = []
    for c in clocks.sort_values("rank").itertuples(index=False):
        entry: dict = {"path": _file(int(c.rank))}
        if isinstance(c.host, str) and c.host:
            entry["machine"] = {"name": c.host}
        if c.rank != reference["rank"]:
            entry["clocks"] = {
                "sync_to": {"file": _file(int(reference["rank"]))},
                "offset_ns": int(c.shift_ns) - int(reference["shift_ns"]),
            }
        files.append(entry)
    return {
        "perfetto_manifest": {
            "version": 1,
            "files": files,
            "attributes": {"nsyswrap.ranks": len(files), "nsyswrap.time": "session ns"},
        }
    }


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tar.addfile(info, io.BytesIO(data))


def per_rank_archive(events: pd.DataFrame, clocks: pd.DataFrame) -> bytes:
    """The TAR archive of the rows of crossrank.trace_events: a trace per rank on its own
    clock (`clocks`: crossrank.clock_offsets) and the manifest that lines them up."""
    clocks = clocks[clocks["rank"].isin(events["rank"].unique())]
    shift = dict(zip(clocks["rank"], clocks["shift_ns"]))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        _add(tar, MANIFEST, json.dumps(manifest(clocks), indent=1).encode())
        for rank, group in events.groupby("rank", sort=True):
            own = group.assign(start_ns=group["start_ns"] - int(shift[rank]))
            slices, _ = trace_events(own)  # one rank's rows: no flow between ranks
            trace = {"traceEvents": slices, "displayTimeUnit": "ns"}
            _add(tar, _file(int(rank)), json.dumps(trace, separators=(",", ":")).encode())
    return out.getvalue()
