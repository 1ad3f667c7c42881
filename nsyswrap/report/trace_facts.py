"""The trace section of `nsyswrap report`: what the capture shows about the program, so
that advice fits it: the frameworks seen (PyTorch, NCCL, DDP, FSDP), the kinds of host
memory copies use (pageable or pinned), pinned-memory allocation calls and how much GPU
activity each device has. Layout: see nsyswrap.report."""
from __future__ import annotations

import pandas as pd

from nsyswrap.report.figures import BYTES, COUNT, NS, figure
from nsyswrap.report.options import ReportOptions
from nsyswrap.run import Run

# (framework, where, SQL condition): the framework is seen when a row matches.
SIGNS = [
    ("pytorch", "kernel names", "kernels", "name LIKE '%at::native%' OR demangled LIKE '%at::native%' "
     "OR name LIKE '%at_cuda_detail%' OR demangled LIKE '%c10::%'"),
    ("pytorch", "NVTX ranges", "nvtx", "regexp_matches(text, '^(fwd|bwd|coll):|^ProfilerStep#|"
     "^aten::|^autograd::')"),
    ("pytorch", "names of processes with GPU work", "processes",
     "regexp_matches(name, '^(python[0-9.]*|torchrun|pt_main_thread)$') "
     "AND pid IN (SELECT pid FROM kernels)"),
    ("nccl", "kernel names", "kernels", "name LIKE 'nccl%'"),
    ("nccl", "NVTX ranges", "nvtx", "text LIKE 'nccl%'"),
    ("ddp", "NVTX ranges", "nvtx", "text LIKE '%DistributedDataParallel%'"),
    ("fsdp", "NVTX ranges", "nvtx", "text LIKE '%FullyShardedDataParallel%' OR text LIKE '%FSDP%'"),
]
HOST_ALLOC = "regexp_matches(api, '^(cudaHostAlloc|cudaMallocHost|cudaHostRegister|cuMemHostAlloc|cuMemAllocHost|cuMemHostRegister)')"


def trace_section(run: Run, options: ReportOptions) -> dict:
    """Build the section dict: tables frameworks, copies, host_alloc and activity (each
    report's rows computed alone and cached, see Run.per_report)."""
    frames = run.per_report(trace_frames, {})
    seen = frames["frameworks"].groupby(["framework", "seen_in"], sort=False)["n"].sum()
    tables = [
        {"id": "frameworks", "title": "Frameworks seen in the trace (advice names only these)",
         "rows": [{"framework": fw, "seen_in": where, "rows": figure(n, COUNT)}
                  for (fw, where), n in seen.items() if n > 0]},
        {"id": "copies", "title": "Memory copies by direction and memory kind (pageable host "
         "memory is slow and cannot overlap)",
         "rows": [{"rank": int(r.rank), "kind": r.copy_kind, "src": r.src_kind,
                   "dst": r.dst_kind, "copies": figure(r.copies, COUNT),
                   "bytes": figure(r.bytes, BYTES), "time": figure(r.dur_ns, NS)}
                  for r in frames["copies"].itertuples(index=False)]},
        {"id": "host_alloc", "title": "Pinned host memory allocation calls",
         "rows": [{"rank": int(r.rank), "api": r.api, "calls": figure(r.calls, COUNT)}
                  for r in frames["host_alloc"].itertuples(index=False)]},
        {"id": "activity", "title": "GPU activities (kernels, copies, sets) per device",
         "rows": [{"rank": int(r.rank), "device": int(r.device),
                   "activities": figure(r.activities, COUNT), "compute": figure(r.compute, COUNT),
                   "nccl": figure(r.nccl, COUNT), "copies": figure(r.copies, COUNT)}
                  for r in frames["activity"].itertuples(index=False)]},
    ]
    return {"id": "trace", "title": "What the trace shows: frameworks, copies, activity",
            "verdict": None, "recommendations": [], "tables": tables, "cannot_answer": []}


def trace_frames(run: Run, params: dict) -> dict[str, pd.DataFrame]:
    """The section's rows of one report: frameworks (framework, seen_in, n), copies,
    host_alloc and activity."""
    signs = " UNION ALL ".join(
        f"SELECT '{fw}' AS framework, '{where}' AS seen_in, count(*) AS n FROM {view} "
        f"WHERE {cond}" for fw, where, view, cond in SIGNS)
    return {
        "frameworks": run.df(signs),
        "copies": run.df("""
            SELECT rank, copy_kind, src_kind, dst_kind, count(*) AS copies,
                sum(bytes)::BIGINT AS bytes, sum(dur_ns)::BIGINT AS dur_ns
            FROM memcpy GROUP BY ALL
            ORDER BY rank, copies DESC, copy_kind, src_kind, dst_kind"""),
        "host_alloc": run.df(f"""
            SELECT rank, regexp_replace(api, '_v[0-9]+$', '') AS api, count(*) AS calls
            FROM api_calls WHERE {HOST_ALLOC} GROUP BY ALL ORDER BY rank, api"""),
        "activity": run.df("""
            SELECT rank, device, count(*) AS activities,
                count(*) FILTER (kind = 'compute') AS compute,
                count(*) FILTER (kind = 'nccl') AS nccl,
                count(*) FILTER (kind = 'memcpy') AS copies
            FROM kernels GROUP BY ALL ORDER BY rank, device"""),
    }
