"""The memory section of `nsyswrap report`: copy bandwidth per direction and memory kind
against the link's expected order of magnitude (pageable host copies flagged), and the GPU
memory the processes allocated when the capture recorded it (nsys
--cuda-memory-usage=true): the peak per rank, its spread across ranks, the churn per step.
Layout: see nsyswrap.report."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.report.figures import BYTES, COUNT, FRACTION, NS, figure, table
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

GB_PER_S = "GB/s"
NO_MEMORY = (
    "the capture has no GPU memory events: capture with nsys profile "
    "--cuda-memory-usage=true (nsyswrap launch --memory)"
)


def memory_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The section's modules, `key: (module, params)`."""
    window = options.window_params()
    return {"copies": ("copies.bandwidth", window), "memory": ("memory.usage", window)}


def memory_section(inputs: Inputs) -> dict:
    """Build the section dict: tables copy_bandwidth and gpu_memory."""
    frames = inputs.frames
    tables, cannot = [], []
    if frames["copies"].empty:
        cannot.append({"what": "copy bandwidth", "reason": "no memory copy in the window"})
    else:
        tables.append(_bandwidth_table(frames["copies"]))
    if frames["memory"].empty:
        cannot.append(
            {"what": "GPU memory (peak allocated per rank, churn per step)", "reason": NO_MEMORY}
        )
    else:
        tables.append(_memory_table(frames["memory"]))
        seen = set(frames["memory"]["rank"])
        without = [r for r in inputs.reports if not seen & set(inputs.held[r.rank])]
        if without:
            cannot.append(
                {
                    "what": "GPU memory of "
                    + ", ".join(f"rank {r.rank} ({r.path.name})" for r in without),
                    "reason": NO_MEMORY,
                }
            )
    return {
        "id": "memory",
        "title": "Copies and GPU memory",
        "verdict": None,
        "recommendations": [],
        "tables": tables,
        "cannot_answer": cannot,
    }


def _bandwidth_table(copies: pd.DataFrame) -> dict:
    no_large = "no copy of at least 1 MiB (small copies measure their fixed cost, not the link)"
    rows = [
        {
            "rank": int(r.rank),
            "device": int(r.device),
            "kind": r.copy_kind,
            "src": r.src_kind,
            "dst": r.dst_kind,
            "large_bandwidth": figure(r.large_gb_per_s, GB_PER_S, no_large),
            "expected": (
                f"{r.expected_low_gb_per_s:g}-{r.expected_high_gb_per_s:g}"
                if pd.notna(r.expected_low_gb_per_s)
                else None
            ),
            "vs_expected": r.vs_expected if isinstance(r.vs_expected, str) else None,
            "pageable": bool(r.pageable),
            "bandwidth": figure(r.gb_per_s, GB_PER_S, "no copy time"),
            "copies": figure(r.copies, COUNT),
            "bytes": figure(r.bytes, BYTES),
            "time": figure(r.dur_ns, NS),
            "large": figure(r.large_copies, COUNT),
            "link": r.link,
        }
        for r in copies.itertuples(index=False)
    ]
    return table(
        "copy_bandwidth",
        "Copy bandwidth per direction and memory kind: large = copies "
        "of at least 1 MiB, their GB/s of copy time held against the link's expected "
        "GB/s; pageable host memory is staged by the driver and cannot overlap",
        rows,
        # pageable goes before bandwidth: src and dst say Pageable already, and at 80
        # columns the GB/s of every copy (the title's answer, beside the large ones') stays
        ("link", "large", "time", "bytes", "copies", "pageable", "bandwidth"),
    )


def _memory_table(memory: pd.DataFrame) -> dict:
    no_steps = "no step in the window"
    peaks = memory.peak_bytes
    rows = []
    for i, r in enumerate(memory.itertuples(index=False)):
        others = peaks.drop(memory.index[i]).median() if len(memory) > 1 else None
        rows.append(
            {
                "rank": int(r.rank),
                "device": int(r.device),
                "peak": figure(r.peak_bytes, BYTES),
                "of_device": figure(
                    r.peak_share, FRACTION, "the report records no device memory size"
                ),
                "vs_others": figure(
                    r.peak_bytes / others - 1 if others else None,
                    FRACTION,
                    "one GPU only" if others is None else "the others allocate nothing",
                ),
                "allocations": figure(r.allocations, COUNT),
                "frees": figure(r.frees, COUNT),
                "allocs_per_step": figure(r.allocations_per_step, COUNT, no_steps),
                "bytes_per_step": figure(
                    None
                    if pd.isna(r.allocated_bytes_per_step)
                    else round(r.allocated_bytes_per_step),
                    BYTES,
                    no_steps,
                ),
                "frees_per_step": figure(r.frees_per_step, COUNT, no_steps),
                "device_memory": figure(r.total_memory_bytes, BYTES, "not recorded"),
                "unseen_freed": figure(r.freed_unseen_bytes, BYTES),
            }
        )
    return table(
        "gpu_memory",
        "GPU memory allocated from CUDA (device memory; with PyTorch: "
        "the caching allocator's reserved segments): peak in the window, against the "
        "device and the other ranks (vs others = peak / their median peak - 1), "
        "allocations per step",
        rows,
        ("unseen_freed", "device_memory", "frees", "allocations", "frees_per_step"),
    )
