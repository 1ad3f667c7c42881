"""The trace section of `nsyswrap report`: what the capture shows about the program, so
that advice fits it: the frameworks seen (PyTorch, NCCL, DDP, FSDP), the kinds of host
memory copies use (pageable or pinned), pinned-memory allocation calls and how much GPU
activity each device has. Layout: see nsyswrap.report."""
from __future__ import annotations

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
    """Build the section dict: tables frameworks, copies, host_alloc and activity."""
    tables = [
        {"id": "frameworks", "title": "Frameworks seen in the trace (advice names only these)",
         "rows": _frameworks(run)},
        {"id": "copies", "title": "Memory copies by direction and memory kind (pageable host "
         "memory is slow and cannot overlap)", "rows": _copies(run)},
        {"id": "host_alloc", "title": "Pinned host memory allocation calls",
         "rows": _host_alloc(run)},
        {"id": "activity", "title": "GPU activities (kernels, copies, sets) per device",
         "rows": _activity(run)},
    ]
    return {"id": "trace", "title": "What the trace shows: frameworks, copies, activity",
            "verdict": None, "recommendations": [], "tables": tables, "cannot_answer": []}


def _frameworks(run: Run) -> list[dict]:
    parts = [f"SELECT '{fw}' AS framework, '{where}' AS seen_in, count(*) AS n "
             f"FROM {view} WHERE {cond}" for fw, where, view, cond in SIGNS]
    df = run.df(" UNION ALL ".join(parts))
    df = df[df["n"] > 0]
    return [{"framework": r.framework, "seen_in": r.seen_in, "rows": figure(r.n, COUNT)}
            for r in df.itertuples(index=False)]


def _copies(run: Run) -> list[dict]:
    df = run.df("""
        SELECT rank, copy_kind, src_kind, dst_kind, count(*) AS copies,
            sum(bytes)::BIGINT AS bytes, sum(dur_ns)::BIGINT AS dur_ns
        FROM memcpy GROUP BY ALL ORDER BY rank, copies DESC, copy_kind, src_kind, dst_kind""")
    return [{"rank": int(r.rank), "kind": r.copy_kind, "src": r.src_kind, "dst": r.dst_kind,
             "copies": figure(r.copies, COUNT), "bytes": figure(r.bytes, BYTES),
             "time": figure(r.dur_ns, NS)} for r in df.itertuples(index=False)]


def _host_alloc(run: Run) -> list[dict]:
    df = run.df(f"""
        SELECT rank, regexp_replace(api, '_v[0-9]+$', '') AS api, count(*) AS calls
        FROM api_calls WHERE {HOST_ALLOC} GROUP BY ALL ORDER BY rank, api""")
    return [{"rank": int(r.rank), "api": r.api, "calls": figure(r.calls, COUNT)}
            for r in df.itertuples(index=False)]


def _activity(run: Run) -> list[dict]:
    df = run.df("""
        SELECT rank, device, count(*) AS activities, count(*) FILTER (kind = 'compute') AS compute,
            count(*) FILTER (kind = 'nccl') AS nccl, count(*) FILTER (kind = 'memcpy') AS copies
        FROM kernels GROUP BY ALL ORDER BY rank, device""")
    return [{"rank": int(r.rank), "device": int(r.device),
             "activities": figure(r.activities, COUNT), "compute": figure(r.compute, COUNT),
             "nccl": figure(r.nccl, COUNT), "copies": figure(r.copies, COUNT)}
            for r in df.itertuples(index=False)]
