"""One run's figures for `nsyswrap diff`: per-step samples of every compared figure, plus
what the comparability check looks at.

A sample is one figure in one step: `samples` has one row per (figure id, step) with the
figure's description (section, metric, rank, device, item, unit, which direction is
better). The steps are those of `steps.ledger` in the window (`--steps`, `--window-nvtx`,
`--step-pattern`); work is put in the step whose range started last before it began.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from nsyswrap import metrics
from nsyswrap.crossrank import metrics as crossrank
from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run
from nsyswrap.errors import NsysWrapError
from nsyswrap.report.options import ReportOptions
from nsyswrap.storage.reports import MANIFEST_NAME

LAUNCH_OPTIONS = {"trace": "--trace", "nsys_args": "--nsys-arg", "annotate": "--annotate"}
"""manifest.json option -> nsyswrap launch's option: the capture options compared."""
LEDGER_PARTS = ("compute_only", "both", "exposed_comm", "copy_only", "idle")
HIGHER_IS_BETTER = {"compute_only", "both", "busbw"}
META = ["id", "section", "metric", "rank", "device", "item", "unit", "better"]
TRACED = ("gpu_activity", "cuda_api", "nvtx", "collective_ranges")
"""What the capture recorded (trace.capture's counts): the trace options, as the reports
show them."""


@dataclass
class RunSamples:
    """The figures of one run (BASE or NEW): what identifies it (`identify`), then its
    per-step samples and straggler (`add_samples`)."""

    label: str
    ranks: list[int]
    devices: list[tuple[int, int]]
    groups: list[tuple[str, int]]
    kernel_ns: dict[str, int]
    range_texts: set[str]
    traced: dict[str, bool]
    nsys_versions: list[str]
    launch_options: dict | None
    step_ledger: pd.DataFrame
    samples: pd.DataFrame = field(default_factory=pd.DataFrame)
    stragglers: pd.DataFrame = field(default_factory=pd.DataFrame)

    @property
    def steps(self) -> list[int]:
        return sorted(self.step_ledger["step"].unique().tolist())

    @property
    def meta(self) -> pd.DataFrame:
        return self.samples[META].drop_duplicates("id").set_index("id")

    def matrix(self) -> pd.DataFrame:
        """Steps x figure ids."""
        return self.samples.pivot(index="step", columns="id", values="value")


def run_inputs(run: str | Path | list) -> list[str | Path]:
    """A run as `open_run` takes it: a manifest.json stands for its directory."""
    items = run if isinstance(run, list) else [run]
    return [Path(i).parent if Path(i).name == MANIFEST_NAME else i for i in items]


def identify(run: Run, label: str, options: ReportOptions) -> RunSamples:
    """What the comparability check looks at: ranks, devices, groups, kernels, ranges,
    capture, and the steps in the window (none: an error naming the run)."""
    steps = metrics.step_ledger(run, **options.window_params())
    if steps.empty:
        raise NsysWrapError(
            label,
            f"has no steps in the window (no NVTX range like "
            f"{options.step_pattern!r} in {options.describe()})",
            "pass --step-pattern, e.g. 'ProfilerStep#%', or annotate steps",
        )
    whole = run_module(run, "kernels.summary")
    capture = run_module(run, "trace.capture")
    groups = run_module(run, "collectives.groups")
    return RunSamples(
        label=label,
        ranks=[r.rank for r in run.reports],
        devices=sorted({(int(r), int(d)) for r, d in zip(steps["rank"], steps["device"])}),
        groups=sorted({(str(g), int(n)) for g, n in zip(groups["pg"], groups["group_size"])}),
        kernel_ns=whole.groupby("name")["total_ns"].sum().astype(int).to_dict(),
        range_texts=_range_texts(run),
        traced={k: bool(capture[k].sum()) for k in TRACED},
        nsys_versions=sorted(set(capture["nsys_version"].dropna().astype(str))),
        launch_options=_launch_options(run),
        step_ledger=steps,
    )


def add_samples(run: Run, found: RunSamples, options: ReportOptions) -> None:
    """Fill `found.samples` and `found.stragglers`."""
    params = options.window_params()
    steps, step_set = found.step_ledger, found.steps
    kernels = run_module(run, "kernels.by_step", step_pattern=options.step_pattern)
    kernels = kernels[kernels["step"].isin(step_set)]
    span = {"step_from": options.step_from, "step_to": options.step_to}
    many = len(run.reports) > 1
    coll = crossrank.matched_collectives(run, **span) if many else pd.DataFrame()
    split = crossrank.comm_split(run, **span) if many else pd.DataFrame()
    parts = [
        _step_time(steps),
        _ledger(steps),
        _exposed(steps, split),
        _idle(metrics.idle_gaps(run, **params), steps),
        _phases(crossrank.phase_lag(run, **span), step_set),
        _own_work(run_module(run, "crossrank.own_work", **span), step_set) if many else None,
        _per_item(kernels, "kernel", "name", step_set),
        _per_item(_ranges(run, options), "range", "text", step_set),
        _collectives(coll, run) if not coll.empty else None,
    ]
    samples = pd.concat([p for p in parts if p is not None and not p.empty], ignore_index=True)
    found.samples = samples[samples["step"].isin(step_set)].reset_index(drop=True)
    found.stragglers = _stragglers(run, span) if many else pd.DataFrame()


def _rows(
    df: pd.DataFrame,
    *,
    section: str,
    metric: str,
    unit: str,
    value: str,
    item=None,
    rank=None,
    device=None,
    better: str | None = None,
) -> pd.DataFrame:
    """Sample rows from a frame with a `step` column; rank/device/item name columns or None."""
    out = pd.DataFrame(
        {
            "section": section,
            "metric": metric,
            "rank": df[rank] if rank else pd.NA,
            "device": df[device] if device else pd.NA,
            "item": df[item].astype(str) if item else "",
            "unit": unit,
            "better": better or ("higher" if metric in HIGHER_IS_BETTER else "lower"),
            "step": df["step"].astype(int),
            "value": df[value].astype(float),
        }
    )
    out["rank"], out["device"] = out["rank"].astype("Int64"), out["device"].astype("Int64")
    out.insert(
        0,
        "id",
        [
            _figure_id(*k)
            for k in zip(out.section, out.metric, out["rank"], out.device, out["item"])
        ],
    )
    return out


def _figure_id(section, metric, rank, device, item) -> str:
    """The name `--metric` takes, e.g. step_time, step_time:rank=2, kernel:<name>."""
    head = section if metric in (section, "gpu_time") else f"{section}.{metric}"
    where = [f"rank={rank}"] if not pd.isna(rank) else []
    where += [f"device={device}"] if not pd.isna(device) else []
    where += [str(item)] if item else []
    return head + (":" + ",".join(where) if where else "")


def _complete(df: pd.DataFrame, keys: list[str], steps: list[int], value: str) -> pd.DataFrame:
    """Every (keys, step) present, 0 where the item did not occur in a step."""
    if df.empty:
        return df
    items = df[keys].drop_duplicates().sort_values(keys)
    full = items.merge(pd.DataFrame({"step": steps}), how="cross")
    sums = df.groupby([*keys, "step"], as_index=False)[value].sum()
    return full.merge(sums, on=[*keys, "step"], how="left").fillna({value: 0})


def _step_time(steps: pd.DataFrame) -> pd.DataFrame:
    """Per rank: the step range's duration; overall: the slowest rank's, per step."""
    per_rank = steps.groupby(["rank", "step"], as_index=False)["duration_ns"].max()
    overall = per_rank.groupby("step", as_index=False)["duration_ns"].max()
    return pd.concat(
        [
            _rows(overall, section="step_time", metric="step_time", unit="ns", value="duration_ns"),
            _rows(
                per_rank,
                section="step_time",
                metric="step_time",
                unit="ns",
                value="duration_ns",
                rank="rank",
            ),
        ]
    )


def _ledger(steps: pd.DataFrame) -> pd.DataFrame:
    """Shares of each step's duration per (rank, device)."""
    out = []
    for part in LEDGER_PARTS:
        df = steps.assign(
            share=steps[f"{part}_ns"] / steps["duration_ns"].where(steps["duration_ns"] > 0)
        )
        out.append(
            _rows(
                df,
                section="share",
                metric=part,
                unit="fraction",
                value="share",
                rank="rank",
                device="device",
            )
        )
    return pd.concat(out)


def _exposed(steps: pd.DataFrame, split: pd.DataFrame) -> pd.DataFrame:
    """Exposed communication per (rank, device) and step and, with matched collectives,
    the rank's time in them split into waiting for peers and transfer (crossrank.comm_split),
    and the exposed time beyond the waits: max(0, exposed - waited)."""
    out = [
        _rows(
            steps,
            section="exposed_comm",
            metric="exposed_comm",
            unit="ns",
            value="exposed_comm_ns",
            rank="rank",
            device="device",
        )
    ]
    split = split.dropna(subset=["step"]) if len(split) else split
    if not split.empty:
        df = steps.merge(
            split[["rank", "step", "wait_ns", "transfer_ns"]], on=["rank", "step"], how="left"
        ).fillna({"wait_ns": 0, "transfer_ns": 0})
        df["beyond"] = (df["exposed_comm_ns"] - df["wait_ns"]).clip(lower=0)
        out += [
            _rows(
                df,
                section="exposed_comm",
                metric=metric,
                unit="ns",
                value=value,
                rank="rank",
                device="device",
            )
            for metric, value in (
                ("waited", "wait_ns"),
                ("transfer", "transfer_ns"),
                ("beyond_wait", "beyond"),
            )
        ]
    return pd.concat(out)


def _idle(gaps: pd.DataFrame, steps: pd.DataFrame) -> pd.DataFrame | None:
    """Idle time per (rank, device, cause) and step (gaps.idle, by the step of its start)."""
    gaps = gaps.dropna(subset=["step"])
    if gaps.empty:
        return None
    df = _complete(gaps, ["rank", "device", "cause"], sorted(steps["step"].unique()), "dur_ns")
    return _rows(
        df,
        section="idle",
        metric="idle",
        unit="ns",
        value="dur_ns",
        rank="rank",
        device="device",
        item="cause",
    )


def _phases(lag: pd.DataFrame, steps: list[int]) -> pd.DataFrame | None:
    """Per (rank, phase) and step: host time without waits and GPU time of its kernels."""
    if lag.empty:
        return None
    out = []
    for metric, col in (("host", "host_ns"), ("gpu", "gpu_ns")):
        df = _complete(lag, ["rank", "phase"], steps, col)
        out.append(
            _rows(
                df, section="phase", metric=metric, unit="ns", value=col, rank="rank", item="phase"
            )
        )
    return pd.concat(out)


def _own_work(work: pd.DataFrame, steps: list[int]) -> pd.DataFrame | None:
    """Per (rank, phase) and step: the rank's own work as the replay holds it, waits left
    out (crossrank.own_work; phase "" outside every phase range)."""
    work = work.dropna(subset=["step"])
    if work.empty:
        return None
    df = _complete(work.fillna({"phase": ""}), ["rank", "phase"], steps, "work_ns")
    return _rows(
        df,
        section="own_work",
        metric="own_work",
        unit="ns",
        value="work_ns",
        rank="rank",
        item="phase",
    )


def _per_item(df: pd.DataFrame, section: str, name: str, steps: list[int]) -> pd.DataFrame | None:
    """GPU time per step of each kernel name / range text, summed over ranks."""
    if df.empty:
        return None
    df = _complete(df, [name], steps, "gpu_ns")
    return _rows(df, section=section, metric="gpu_time", unit="ns", value="gpu_ns", item=name)


def _ranges(run: Run, options: ReportOptions) -> pd.DataFrame:
    """GPU time launched inside each NVTX range text (counters cut), by the step its range
    started in (nvtx.gpu_time_by_step: step ranges themselves left out), over the ranks."""
    ranges = run_module(run, "nvtx.gpu_time_by_step", step_pattern=options.step_pattern)
    ranges = ranges[ranges["gpu_ns"] > 0]
    return ranges.groupby(["text", "step"], as_index=False)["gpu_ns"].sum()


def _collectives(coll: pd.DataFrame, run: Run) -> pd.DataFrame:
    """Per (op, bytes) and step: mean duration and skew, summed wait over ranks, median
    transfer and the bus bandwidth it gives (NCCL's bus factor from crossrank.bandwidth)."""
    coll = coll.dropna(subset=["step"]).assign(bytes=coll["bytes"].fillna(-1))
    keys = ["op", "bytes", "step"]
    per_coll = coll.groupby(["op", "bytes", "step", "pg", "seq"], as_index=False).agg(
        skew_ns=("skew_ns", "first"), transfer_ns=("transfer_ns", "first")
    )
    df = coll.groupby(keys, as_index=False).agg(
        dur_ns=("dur_ns", "mean"), wait_ns=("wait_ns", "sum")
    )
    df = df.merge(
        per_coll.groupby(keys, as_index=False).agg(
            skew_ns=("skew_ns", "mean"), transfer_ns=("transfer_ns", "median")
        ),
        on=keys,
    )
    bw = crossrank.bandwidth(run)
    factor = {(r.op, r.bytes): r.bus_factor for r in bw.itertuples(index=False)}
    df["busbw"] = [
        b * factor[(o, b)] / t if (o, b) in factor and t > 0 else float("nan")
        for o, b, t in zip(df["op"], df["bytes"], df["transfer_ns"])
    ]
    df["item"] = [f"{o} {_size(b)}" for o, b in zip(df["op"], df["bytes"])]
    out = [
        _rows(df, section="collective", metric=m, unit=u, value=c, item="item")
        for m, u, c in (
            ("duration", "ns", "dur_ns"),
            ("transfer", "ns", "transfer_ns"),
            ("skew", "ns", "skew_ns"),
            ("wait", "ns", "wait_ns"),
            ("busbw", "GB/s", "busbw"),
        )
    ]
    return pd.concat(out).dropna(subset=["value"])


def _size(nbytes: float) -> str:
    if nbytes < 0:
        return "(size unknown)"
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= size:
            return f"{nbytes / size:g} {unit}"
    return f"{int(nbytes)} B"


def _stragglers(run: Run, span: dict) -> pd.DataFrame:
    """The run's straggler (crossrank.stragglers' whole-run row), or no row."""
    strag = crossrank.stragglers(run, **span)
    return strag[strag["step"].isna()].drop(columns="step").reset_index(drop=True)


def _range_texts(run: Run) -> set[str]:
    """NVTX range texts with numbers generalized (step:3 and step:4 are one text)."""
    texts = run_module(run, "nvtx.gpu_time_by_text")["text"].dropna()
    return set(texts.str.replace(r"\d+", "#", regex=True))


def _launch_options(run: Run) -> dict | None:
    """The capture options `nsyswrap launch` recorded in the run's manifest.json (trace,
    extra nsys arguments, annotation), or None without a manifest."""
    manifest = run.reports[0].path.parent / MANIFEST_NAME
    try:
        options = json.loads(manifest.read_text()).get("options", {})
    except (OSError, ValueError, RecursionError, AttributeError):
        return None
    return {k: options.get(k) for k in LAUNCH_OPTIONS}
