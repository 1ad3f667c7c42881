"""The compute section of `nsyswrap report`: how well the GPU's compute runs. MFU and
achieved TFLOP/s per step and rank (from the FLOPs per step the user gives and the GPU's
peak), the tensor-core share (the share of compute kernel time in matrix multiplies and
attention), the kernels that matter per rank with their spread across ranks, and the
kernels one rank runs consistently slower than the others. Layout: see nsyswrap.report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from nsyswrap.report.diagnosis.rules import slow_kernel
from nsyswrap.report.figures import COUNT, FRACTION, NS, figure, table
from nsyswrap.report.options import ReportOptions

if TYPE_CHECKING:
    from nsyswrap.report.flow import Inputs

TFLOPS = "TFLOP/s"
TOP_KERNELS = 10  # kernels per (rank, device) in the top-kernels table
SLOW_MARGIN = slow_kernel.RULE.default("slower_share")  # the rule slow_kernels applies
MIN_RUNS = slow_kernel.RULE.default("min_runs")
NO_FLOPS = (
    "no FLOPs per step were given: give --flops-per-step N (the model FLOPs one GPU "
    "computes per step), or --model-params P --tokens-per-step T (FLOPs = 6 x P x T)"
)


def compute_modules(options: ReportOptions) -> dict[str, tuple[str, dict]]:
    """The section's modules, `key: (module, params)`."""
    window = options.window_params()
    return {
        "mfu": ("compute.mfu", {**window, **options.mfu_params()}),
        "tensor_cores": ("kernels.tensor_cores", window),
        "top": ("kernels.top", window),
        "shapes": ("compute.tensor_shapes", {}),
    }


def compute_section(inputs: Inputs) -> dict:
    """Build the section dict: tables mfu (when FLOPs were given), tensor_cores,
    top_kernels and slow_kernels (when a GPU is slower)."""
    frames, options = inputs.frames, inputs.options
    shapes = _shapes_note(frames["shapes"])
    tables, cannot = [], []
    if options.flops_per_step is None and options.model_params is None:
        cannot.append({"what": "MFU and achieved TFLOP/s", "reason": NO_FLOPS + shapes})
    elif frames["mfu"].empty:
        cannot.append(
            {
                "what": "MFU and achieved TFLOP/s",
                "reason": "MFU is per step and no step range like "
                f"{options.step_pattern!r} lies in the window; pass "
                "--step-pattern, e.g. 'ProfilerStep#%'",
            }
        )
    else:
        tables += [_mfu_table(frames["mfu"], options, shapes), _mfu_steps_table(frames["mfu"])]
    if frames["tensor_cores"].empty:
        cannot.append(
            {
                "what": "the tensor-core share and the top kernels",
                "reason": "no compute kernel runs in the window",
            }
        )
    else:
        tables.append(_tensor_core_table(frames["tensor_cores"]))
        top = kernel_spread(frames["top"])
        tables.append(_top_kernels_table(top))
        slow = slow_kernels(top)
        if slow:
            tables.append(
                table(
                    "slow_kernels",
                    "Kernels one rank runs consistently slower than "
                    f"the others (its 10th percentile, median and 90th percentile "
                    f"each at least {SLOW_MARGIN:.0%} above every other rank's); "
                    "extra = the time it costs against their median",
                    slow,
                    ("count", "others"),
                )
            )
    return {
        "id": "compute",
        "title": "How well the compute runs: MFU, tensor cores, the kernels that matter",
        "verdict": None,
        "recommendations": [],
        "tables": tables,
        "cannot_answer": cannot,
    }


def _shapes_note(shapes: pd.DataFrame) -> str:
    ranges, entries = int(shapes.ranges_with_shapes.sum()), int(shapes.shape_payload_entries.sum())
    if not ranges and not entries:
        return ""
    where = (
        f"{ranges:,} NVTX ranges list tensor sizes"
        if ranges
        else f"{entries:,} NVTX payload entries hold shapes"
    )
    return (
        f" (the trace records tensor shapes: {where}; nsyswrap does not count FLOPs from "
        "them, so the FLOPs per step you give remain the documented way)"
    )


def _mfu_table(mfu: pd.DataFrame, options: ReportOptions, shapes: str = "") -> dict:
    """One row per (rank, device): the GPU and the peak used, the steps, the achieved
    TFLOP/s and MFU of the median step, and the lowest and highest MFU of a step."""
    rows = []
    for (rank, device), steps in mfu.groupby(["rank", "device"], sort=True):
        first = steps.iloc[0]
        peak, median_ns = first["peak_tflops"], steps.duration_ns.median()
        achieved = first["flops"] / median_ns / 1e3 if median_ns else None
        no_peak = _why_no_peak(first, options.dtype)
        rows.append(
            {
                "rank": int(rank),
                "device": int(device),
                "gpu": next(
                    (g for g in (first["peak_gpu"], first["gpu_name"]) if isinstance(g, str)), None
                ),
                "dtype": first["dtype"],
                "peak": figure(peak, TFLOPS, no_peak),
                "steps": figure(len(steps), COUNT),
                "step_p50": figure(median_ns, NS),
                "achieved": figure(achieved, TFLOPS, "the median step lasts 0 ns"),
                "mfu": figure(
                    achieved / peak if achieved and pd.notna(peak) else None, FRACTION, no_peak
                ),
                "mfu_min": figure(steps.mfu.min(), FRACTION, no_peak),
                "mfu_max": figure(steps.mfu.max(), FRACTION, no_peak),
                "peak_source": first["peak_source"]
                if isinstance(first["peak_source"], str)
                else None,
            }
        )
    flops = mfu.flops.iloc[0]
    how = ("6 x params x tokens = " if options.flops_per_step is None else "") + f"{flops:.4g}"
    return table(
        "mfu",
        f"MFU = achieved / peak, at the median step; achieved = {how} model "
        f"FLOPs per step and GPU / step time; peak: dense {options.dtype} "
        "(compute.peaks, or --peak-tflops)" + shapes,
        rows,
        ("peak_source", "mfu_max", "mfu_min", "steps", "dtype", "step_p50"),
    )


def _mfu_steps_table(mfu: pd.DataFrame) -> dict:
    rows = [
        {
            "rank": int(r.rank),
            "device": int(r.device),
            "step": int(r.step),
            "duration": figure(r.duration_ns, NS),
            "achieved": figure(r.achieved_tflops, TFLOPS, "the step lasts 0 ns"),
            "mfu": figure(r.mfu, FRACTION, "no peak (see the mfu table)"),
        }
        for r in mfu.itertuples(index=False)
    ]
    return table("mfu_steps", "MFU and achieved TFLOP/s per step", rows)


def _why_no_peak(row, dtype: str) -> str:
    if isinstance(row.peak_gpu, str):
        return (
            f"the peak table has no {dtype} figure for {row.peak_gpu}; choose another "
            "--dtype or give --peak-tflops"
        )
    if isinstance(row.gpu_name, str):
        return (
            f"{row.gpu_name!r} is not in the peak table (nsyswrap query compute.peaks); give "
            "--peak-tflops"
        )
    return "the report records no GPU name (no TARGET_INFO_GPU table); give --peak-tflops"


def _tensor_core_table(tc: pd.DataFrame) -> dict:
    rows = [
        {
            "rank": int(r.rank),
            "device": int(r.device),
            "kernels": figure(r.kernels, COUNT),
            "compute": figure(r.compute_ns, NS),
            "matmul": figure(r.matmul_ns, NS),
            "attention": figure(r.attention_ns, NS),
            "other": figure(r.other_ns, NS),
            "tensor_core": figure(r.tensor_core_share, FRACTION, "no compute kernel time"),
        }
        for r in tc.itertuples(index=False)
    ]
    return table(
        "tensor_cores",
        "Tensor-core share: matrix-multiply and attention kernels' "
        "share of summed compute kernel time (classes by kernel name, not a "
        "hardware counter: docs/compute.md)",
        rows,
        ("kernels", "other", "attention", "matmul"),
    )


def kernel_spread(top: pd.DataFrame) -> pd.DataFrame:
    """kernels.top with, per kernel (name and class), the spread of its median across the
    GPUs that run it: slowest / fastest - 1 (NaN on one GPU)."""
    if top.empty:
        return top.assign(spread=pd.Series(dtype=float))
    medians = top.groupby(["name", "class"]).median_ns
    spread = (medians.transform("max") / medians.transform("min") - 1).where(
        medians.transform("size") > 1
    )
    return top.assign(spread=spread)


def _top_kernels_table(top: pd.DataFrame) -> dict:
    one = "one GPU runs this kernel"
    rows = [
        {
            "rank": int(r.rank),
            "device": int(r.device),
            "kernel": r.name if isinstance(r.name, str) else None,  # (no name string)
            "class": r.kind,
            "count": figure(r.kernels, COUNT),
            "total": figure(r.total_ns, NS),
            "of_compute": figure(r.share_of_compute, FRACTION),
            "median": figure(r.median_ns, NS),
            "p90": figure(r.p90_ns, NS),
            "spread": figure(r.spread, FRACTION, one),
        }
        for r in top[top.position <= TOP_KERNELS]
        .rename(columns={"class": "kind"})
        .itertuples(index=False)
    ]
    return table(
        "top_kernels",
        f"The kernels that matter: top {TOP_KERNELS} compute kernels "
        "per rank by total time; spread = slowest / fastest rank's median - 1",
        rows,
        ("p90", "count", "class", "median"),
    )


def slow_kernels(top: pd.DataFrame) -> list[dict]:
    """Rows naming each GPU whose copy of a kernel that matters (in some GPU's top
    TOP_KERNELS) is consistently slower than the other GPUs' copies: its 10th percentile,
    median and 90th percentile each at least SLOW_MARGIN above those of every other GPU
    (the whole distribution shifted, not a few slow runs; a kernel name that covers
    several shapes keeps their mix), with MIN_RUNS runs each. others = the other GPUs'
    median median; extra = (its median - others) x its runs. Longest extra first."""
    wanted = top[top.position <= TOP_KERNELS][["name", "class"]].drop_duplicates()
    kernels = top.merge(wanted, on=["name", "class"])
    kernels = kernels[kernels.kernels >= MIN_RUNS]
    rows = []
    for (name, _), runs in kernels.groupby(["name", "class"], sort=False):
        if len(runs) < 2:
            continue
        for r in runs.itertuples(index=False):
            others = runs[(runs["rank"] != r.rank) | (runs.device != r.device)]
            typical = others.median_ns.median()
            if typical > 0 and all(  # (kernels of 0 ns are no slower anywhere)
                getattr(r, q) >= (1 + SLOW_MARGIN) * others[q].max()
                for q in ("p10_ns", "median_ns", "p90_ns")
            ):
                rows.append(
                    {
                        "rank": int(r.rank),
                        "device": int(r.device),
                        "kernel": name,
                        "median": figure(r.median_ns, NS),
                        "others": figure(typical, NS),
                        "slower": figure(r.median_ns / typical - 1, FRACTION),
                        "count": figure(r.kernels, COUNT),
                        "extra": figure(round((r.median_ns - typical) * r.kernels), NS),
                    }
                )
    return sorted(rows, key=lambda x: (-x["extra"]["value"], x["rank"], x["device"], x["kernel"]))
