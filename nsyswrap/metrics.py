"""Single-rank metrics, one function each: a thin call of its `sql/` module on an open run.

Most take the window parameters `window_nvtx`, `step_pattern`, `step_from`, `step_to`
(see `sql/ledger/devices.sql`); every parameter has a default.
"""

from __future__ import annotations

import pandas as pd

from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run


def time_ledger(run: Run, **params) -> pd.DataFrame:
    """Per (rank, device): span split into compute only, comm only, both, copy only, idle."""
    return run_module(run, "ledger.devices", **params)


def collective_exposure(run: Run, **params) -> pd.DataFrame:
    """Per NCCL kernel: time overlapped by compute, exposed time, step and NVTX context."""
    return run_module(run, "collectives.exposure", **params)


def exposure_summary(run: Run, **params) -> pd.DataFrame:
    """Per (rank, device): hidden / partly hidden / exposed collective counts and times."""
    return run_module(run, "collectives.exposure_summary", **params)


def idle_gaps(run: Run, **params) -> pd.DataFrame:
    """Per idle gap of a device: length, host sync time inside and cause."""
    return run_module(run, "gaps.idle", **params)


def gaps_by_cause(run: Run, **params) -> pd.DataFrame:
    """Idle gaps per (rank, device, cause): how many, summed and longest duration."""
    return run_module(run, "gaps.by_cause", **params)


def gap_histogram(run: Run, **params) -> pd.DataFrame:
    """Idle gaps per (rank, device, cause) in decade length buckets."""
    return run_module(run, "gaps.histogram", **params)


def launch_latency(run: Run, **params) -> pd.DataFrame:
    """Per kernel: launch call start and latency to the kernel start."""
    return run_module(run, "gaps.launch_latency", **params)


def launch_summary(run: Run, **params) -> pd.DataFrame:
    """Per (rank, device): launch latency percentiles and tiny-kernel count."""
    return run_module(run, "gaps.launch_summary", **params)


def step_ledger(run: Run, **params) -> pd.DataFrame:
    """Per (rank, device, step): duration, compute, comm, exposed comm and idle time."""
    return run_module(run, "steps.ledger", **params)


def range_gpu_time(run: Run, **params) -> pd.DataFrame:
    """Per NVTX range: GPU time of the work launched inside it."""
    return run_module(run, "nvtx.range_gpu_time", **params)


def gpu_time_by_text(run: Run, **params) -> pd.DataFrame:
    """Per (rank, NVTX text): ranges and GPU time of the work launched inside them."""
    return run_module(run, "nvtx.gpu_time_by_text", **params)
