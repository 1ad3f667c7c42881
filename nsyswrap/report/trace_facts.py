"""The trace section of `nsyswrap report`: what the capture shows about the program, so
that advice fits it: the frameworks seen (PyTorch, NCCL, DDP, FSDP), the kinds of host
memory copies use (pageable or pinned), pinned-memory allocation calls, CUDA graph
launches, how much GPU activity each device has and which physical GPU it is, per rank (a
report holding several ranks has rows for each), and what each report's capture traced.
Layout: see nsyswrap.report."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nsyswrap.report.captured import TRACED_MODULES, traced
from nsyswrap.report.figures import BYTES, COUNT, NS, figure
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    import pandas as pd

    from nsyswrap.report.flow import Inputs

TABLES = ("frameworks", "copies", "host_alloc", "graphs", "activity")
"""The section's tables, each the rows of module `trace.<table>` (sql/trace/)."""


def trace_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The section's modules, `key: (module, params)`: the whole capture's."""
    return {
        **{table: (f"trace.{table}", {}) for table in (*TABLES, "gpus")},
        **TRACED_MODULES,
    }


def trace_section(inputs: Inputs) -> dict:
    """Build the section dict: tables frameworks, copies, host_alloc, activity (each
    report's rows computed alone and cached by the planner; rows of a process carry its
    rank: a rank's processes are summed), gpus (over the run) and capture (per report:
    nsyswrap.report.captured)."""
    frames = inputs.frames
    seen = frames["frameworks"].groupby(["framework", "seen_in"], sort=False)["matches"].sum()
    alloc = frames["host_alloc"].groupby(["rank", "api"], as_index=False)["calls"].sum()
    graphs = (
        frames["graphs"].groupby("rank", as_index=False)[["graph_launches", "activities"]].sum()
    )
    tables = [
        {
            "id": "frameworks",
            "title": "Frameworks seen in the trace (advice names only these)",
            "rows": [
                {"framework": fw, "seen_in": where, "rows": figure(n, COUNT)}
                for (fw, where), n in seen.items()
                if n > 0
            ],
        },
        _copies_table(frames["copies"]),
        {
            "id": "host_alloc",
            "title": "Pinned host memory allocation calls",
            "rows": [
                {"rank": int(r.rank), "api": r.api, "calls": figure(r.calls, COUNT)}
                for r in alloc.itertuples(index=False)
            ],
        },
        {
            "id": "graphs",
            "title": "CUDA graph launches and the GPU activities they ran",
            "rows": [
                {
                    "rank": int(r.rank),
                    "graph_launches": figure(r.graph_launches, COUNT),
                    "activities": figure(r.activities, COUNT),
                }
                for r in graphs.itertuples(index=False)
            ],
        },
        _activity_table(frames["activity"]),
        _gpus_table(frames["gpus"]),
        {
            "id": "capture",
            "title": "What each report's capture traced (nsys's own record, else the "
            "launch manifest's --trace): hints to capture something name only what it lacks",
            "rows": traced(inputs),
        },
    ]
    return {
        "id": "trace",
        "title": "What the trace shows: frameworks, copies, activity, GPUs, what was traced",
        "verdict": None,
        "recommendations": [],
        "tables": tables,
        "cannot_answer": [],
    }


def _copies_table(copies: pd.DataFrame) -> dict:
    """trace.copies per rank, kind and memory kinds, most copies first."""
    copies = copies.groupby(
        ["rank", "copy_kind", "src_kind", "dst_kind"], sort=False, as_index=False
    )[["copies", "bytes", "dur_ns"]].sum()
    copies = copies.sort_values(
        ["rank", "copies", "copy_kind", "src_kind", "dst_kind"],
        ascending=[True, False, True, True, True],
        kind="stable",
    )
    return {
        "id": "copies",
        "title": "Memory copies by direction and memory kind (pageable host "
        "memory is slow and cannot overlap)",
        "rows": [
            {
                "rank": int(r.rank),
                "kind": r.copy_kind,
                "src": r.src_kind,
                "dst": r.dst_kind,
                "copies": figure(r.copies, COUNT),
                "bytes": figure(r.bytes, BYTES),
                "time": figure(r.dur_ns, NS),
            }
            for r in copies.itertuples(index=False)
        ],
        "droppable": ["time"],
    }


def _activity_table(activity: pd.DataFrame) -> dict:
    return {
        "id": "activity",
        "title": "GPU activities (kernels, copies, sets) per device",
        "rows": [
            {
                "rank": int(r.rank),
                "device": int(r.device),
                "activities": figure(r.activities, COUNT),
                "compute": figure(r.compute, COUNT),
                "nccl": figure(r.nccl, COUNT),
                "copies": figure(r.copies, COUNT),
            }
            for r in activity.itertuples(index=False)
        ],
    }


def _gpus_table(gpus) -> dict:
    """Per (rank, device): the physical GPU it is (trace.gpus)."""
    return {
        "id": "gpus",
        "title": "The physical GPU of each rank's device (ranks sharing one GPU count it once)",
        "rows": [
            {
                "rank": int(r.rank),
                "device": int(r.device),
                "gpu": int(r.gpu),
                "name": r.gpu_name if isinstance(r.gpu_name, str) else None,
                "identified_by": r.identified_by,
                "key": r.gpu_key,
                "ranks_on_gpu": figure(r.ranks_on_gpu, COUNT),
            }
            for r in gpus.itertuples(index=False)
        ],
        "droppable": ["key", "identified_by", "name"],
    }
