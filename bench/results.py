"""Results: the machine, the tables, the targets with how far off they are and why, RESULTS.md."""

from __future__ import annotations

import os
import platform
import sqlite3
import subprocess
from importlib.metadata import version
from pathlib import Path

from bench.stages import LOG_STAGES
from bench.targets import s, stages_section, targets_section, timing, x

HERE = Path(__file__).resolve().parent
RESULTS_MD = HERE / "RESULTS.md"
RATIOS = {"report_cold", "trio_cold"}  # beside the baseline


def machine() -> dict:
    """Cores, RAM, CPU model, versions and the commit measured."""
    cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")),
        "?",
    )
    meminfo = (
        Path("/proc/meminfo").read_text() if Path("/proc/meminfo").exists() else "MemTotal: 0 kB"
    )
    ram_kb = int(next(ln.split()[1] for ln in meminfo.splitlines() if ln.startswith("MemTotal")))
    commit = subprocess.run(
        ["git", "describe", "--always", "--dirty"], cwd=HERE, capture_output=True, text=True
    )
    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "ram_gb": round(ram_kb / 2**20, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "duckdb": version("duckdb"),
        "pyarrow": version("pyarrow"),
        "pandas": version("pandas"),
        "adbc_driver_sqlite": version("adbc-driver-sqlite"),
        "sqlite (stdlib)": sqlite3.sqlite_version,
        "nsyswrap commit": commit.stdout.strip() or "?",
    }


def _notes(row: dict) -> str:
    if "skipped" in row:
        return f"skipped: {row['skipped']}"
    if row.get("error"):
        return f"**no result: {row['error']}**"
    d = row["detail"]
    parts = [
        f"open {d['open_s']:.2f} s + queries {d['query_s']:.2f} s" if "open_s" in d else "",
        f"{d['rows']:,} rows" if "rows" in d else "",
        f"{row['processes']} processes, at most {row['rss_together_mb']:.0f} MB resident "
        "together in a sample"
        if row.get("processes", 1) > 1
        else "",
    ]
    if row["runs"] > 1:
        parts.append("median of " + ", ".join(f"{w:.2f}" for w in row["wall_s_runs"]) + " s")
    return "; ".join(p for p in parts if p)


def main_table(rows: list[dict]) -> str:
    """The rows of one shape (or of part modules), with their ratios to its floor and its
    baseline."""
    floor, _ = timing(next((r for r in rows if r["key"] == "floor"), None))
    baseline, _ = timing(next((r for r in rows if r["key"] == "baseline"), None))
    lines = [
        "| measured | wall s | in-process s | CPU s | peak RSS MB | task process MB | ÷ floor | "
        "baseline ÷ this | notes |",
        "|---|--:|--:|--:|--:|--:|--:|--:|---|",
    ]
    for r in rows:
        wall, more = timing(r)
        vs_baseline = r["key"] in RATIOS and wall and baseline and not more
        lines.append(
            "| {} | {}{} | {} | {} | {} | {} | {}{} | {} | {} |".format(
                r["label"],
                more,
                s(wall),
                s(r.get("work_s")) if wall and not more else "—",
                s(r.get("cpu_s")),
                f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "—",
                f"{r['peak_rss_main_mb']:.0f}" if "peak_rss_main_mb" in r else "—",
                more if wall and floor and r["key"] != "floor" else "",
                x(wall / floor) if wall and floor and r["key"] != "floor" else "",
                x(baseline / wall) if vs_baseline else "",
                _notes(r),
            )
        )
    return "\n".join(lines)


def main_section(main: dict) -> str:
    """Per shape: what it is, its run, its rows."""
    from bench.dataset import SHAPES

    out = [_context(main), ""]
    for shape in dict.fromkeys(r["shape"] for r in main["rows"] if r.get("shape")):
        size = (main.get("dataset") or {}).get(shape)
        out += [f"### {shape}", "", f"{SHAPES[shape][0][0].upper()}{SHAPES[shape][0][1:]}."]
        if size:
            out[-1] += (
                f" Run: {size['reports']} reports, {size['bytes'] / 1e9:.2f} GB, "
                f"{size['kernels']:,} kernels, {size['launch_calls']:,} CUDA API calls, "
                f"{size['nvtx']:,} NVTX events."
            )
        out += ["", main_table([r for r in main["rows"] if r.get("shape") == shape]), ""]
    return "\n".join(out)


def _scale_value(rows: list[dict], key: str, ranks: int, kernels: float, field: str = "wall_s"):
    return next(
        (
            r[field]
            for r in rows
            if r["key"] == key
            and r["ranks"] == ranks
            and r["kernels_per_rank_m"] == kernels
            and field in r
            and not r.get("error")
        ),
        None,
    )


def _full(rows: list[dict]) -> float:
    return max(r["kernels_per_rank_m"] for r in rows)


def scale_table(result: dict) -> str:
    rows = result["rows"]
    points = sorted(
        {(r["ranks"], r["kernels_per_rank_m"]) for r in rows}, key=lambda p: (p[1], p[0])
    )
    lines = [
        "| ranks | kernels per rank | floor s | cold open_run s (CPU s) | ÷ floor | cold RSS MB | "
        "ledger+gaps+skew, results computed s (CPU s) | its RSS MB |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for ranks, kernels in points:

        def get(key, field="wall_s", *, ranks=ranks, kernels=kernels):
            return _scale_value(rows, key, ranks, kernels, field)

        floor, cold = get("floor"), get("cold_open")
        lines.append(
            f"| {ranks} | {kernels:g} M | {s(floor)} | {s(cold)} "
            f"({s(get('cold_open', 'cpu_s'))}) | "
            f"{x(cold / floor) if cold and floor else '—'} | "
            f"{s(get('cold_open', 'peak_rss_mb'))} | "
            f"{s(get('trio_computed'))} ({s(get('trio_computed', 'cpu_s'))}) | "
            f"{s(get('trio_computed', 'peak_rss_mb'))} |"
        )
    return "\n".join(lines)


def scale_notes(rows: list[dict]) -> str:
    """How wall time and memory grow with ranks and with kernels per rank."""
    full, notes = _full(rows), []
    kernel_steps = sorted({r["kernels_per_rank_m"] for r in rows if r["ranks"] == 1})
    for key, what in (
        ("floor", "floor"),
        ("cold_open", "cold open_run"),
        ("trio_computed", "ledger+gaps+skew, results computed"),
    ):
        by_ranks = [(r, _scale_value(rows, key, r, full)) for r in (1, 2, 4, 8)]
        by_kernels = [(k, _scale_value(rows, key, 1, k)) for k in kernel_steps]
        notes.append(
            f"- {what}: "
            + " → ".join(f"{s(v)} s" for _, v in by_ranks)
            + " at 1/2/4/8 ranks; "
            + " → ".join(f"{s(v)} s" for _, v in by_kernels)
            + " at "
            + "/".join(f"{k:g}" for k in kernel_steps)
            + " M kernels on 1 rank."
        )
    return "\n".join(notes)


def _context(result: dict) -> str:
    size = result.get("dataset")
    text = (
        f"Measured {result['started']} in {result['duration_s']:.0f} s; load average before "
        f"{result['load_before']}, after {result['load_after']}; `-j {result['jobs']}`."
    )
    if size and "reports" in size:
        text += (
            f" Run: {size['reports']} reports, {size['bytes'] / 1e9:.2f} GB, "
            f"{size['kernels']:,} kernels, {size['launch_calls']:,} CUDA API calls, "
            f"{size['nvtx']:,} NVTX events."
        )
    return text


MAIN_H, TARGETS_H, SCALE_H = (
    "## nsyswrap beside the SQLite floor and the pandas baseline",
    "## Targets",
    "## Scale",
)
RANKS_H = "## Scale to 64 ranks: the local and the Dask engine"
WHATIF_H = "## The what-if stage"
STAGES_H = "## CPU per report, by stage"
MODULES_H = "## Each module alone"
GENERATED = (MAIN_H, TARGETS_H, STAGES_H, RANKS_H, WHATIF_H, SCALE_H, MODULES_H)
MODULES_ABOUT = (
    "`python -m bench --part modules`: every module of `nsyswrap list` alone on the cached "
    "views of the `bench` preset's run (queued), its results deleted first (the first call "
    "of that module; scope report: computed per report in the pool), its rows streamed to "
    "Parquet as `nsyswrap query NAME RUN -o F -f parquet` writes them."
)
WHATIF_ABOUT = (
    "`python -m bench --part whatif`: nsyswrap.crossrank.whatif's model and analysis (every "
    "candidate fix replayed, the critical path, the replay check) on the frames of a synthetic "
    "data-parallel run (bench/whatif.py: RANKS ranks, COLLECTIVES all-reduces in all over STEPS "
    "steps, the run objects it reads made in memory, no SQLite). *stage* is the stage alone, "
    "wall and CPU, in the task process; *whole* adds interpreter start, imports and making the "
    "frames. Target: the stage at 64 ranks x 1,000 collectives x 100 steps <= 10 s."
)
RANKS_ABOUT = (
    "`python -m bench --part ranks [--rank-steps N]`: `nsyswrap report RUN -j 2 --format json` on "
    "the first 8/32/64 reports of a 64-rank run of each paced shape with N steps per rank "
    "(~1000 kernels per step). Local: cold (empty cache; *per report* and *run*: its CPU by "
    "stage from `$NSYSWRAP_STAGE_LOG`, the workers' per report and the cross-rank run "
    "objects'), then warm (median of 3). Dask: cold, on a `LocalCluster` of 2 "
    "worker processes (1 thread each) that the task starts, found by its scheduler file "
    "(`--scheduler-file`), so its processes are measured with it; *whole* includes the cluster's "
    "start and stop, *report* is the report alone; *Dask JSON = local*: its output is byte for "
    "byte the local engine's cold output. RSS *together* is the largest sum of the resident sets "
    "of the live processes in one 10 ms sample (the real peak, seen from below); the sum of each "
    "process's own peak is an upper bound."
)


def whatif_table(result: dict) -> str:
    lines = [
        "| ranks | collectives | steps | events | levels | candidates | stage s (CPU s) | "
        "whole s | peak RSS MB | replay residual ns |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in result["rows"]:
        d = r.get("detail", {})
        if r.get("error") or r.get("skipped") or "whatif_s" not in d:
            lines.append(
                f"| {r['ranks']} | {r['collectives']:,} | {r['steps']} | no result: "
                f"{r.get('error') or r.get('skipped')} ||||||"
            )
            continue
        lines.append(
            f"| {r['ranks']} | {r['collectives']:,} | {r['steps']} | {d['events']:,} | "
            f"{d['levels']:,} | {d['candidates']} | {d['whatif_s']:.2f} "
            f"({d['whatif_cpu_s']:.2f}) | {r['wall_s']:.2f} | "
            f"{r['peak_rss_main_mb']:.0f} | {d['residual_max_ns']} |"
        )
    return "\n".join(lines)


def render(parts: dict[str, dict | None], previous: str = "") -> str:
    """RESULTS.md from the latest results of each part (`main`, `ranks`, `whatif`, `scale`,
    `modules`); a part with no results here (not measured on this machine yet) keeps its
    sections of `previous`, the RESULTS.md before."""
    m, kept = machine(), _sections(previous)
    out = [
        "# Benchmark results",
        "",
        "Generated by `python -m bench` (see bench/README.md for what each row measures). Every "
        "row is one task process and its descendants (the forkserver and the worker processes of "
        "nsyswrap's `-j` pool): wall time includes interpreter start and imports, CPU is user + "
        "system time of all their threads, peak RSS is the sum of each process's own peak (VmHWM; "
        "not simultaneous, shared pages counted in each: an upper bound), beside the task "
        "process's own. The machine is shared: when a `-j 2` row's wall time is close to its CPU "
        "time, it got one core, and its CPU time is the steadier figure. A section measured by an "
        "earlier run keeps that run's date and machine line.",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in m.items()) + ".",
        "",
    ]
    earlier = next((ln for ln in previous.splitlines() if ln.startswith("Machine: ")), None)
    if earlier and not all(parts.values()) and earlier != out[-2]:
        out += [
            "Sections not measured in this run were measured on: " + earlier[len("Machine: ") :],
            "",
        ]
    main, ranks, whatif = parts.get("main"), parts.get("ranks"), parts.get("whatif")
    made = {
        MAIN_H: main and main_section(main),
        TARGETS_H: (main or ranks or whatif) and targets_section(main, ranks, whatif),
        STAGES_H: main and stages_section(main),
        RANKS_H: ranks
        and "\n\n".join(
            [RANKS_ABOUT, _context(ranks), ranks_table(ranks), ranks_notes(ranks["rows"])]
        ),
        WHATIF_H: whatif and "\n\n".join([WHATIF_ABOUT, _context(whatif), whatif_table(whatif)]),
        SCALE_H: parts.get("scale")
        and "\n\n".join(
            [
                _context(parts["scale"]),
                scale_table(parts["scale"]),
                scale_notes(parts["scale"]["rows"]),
            ]
        ),
        MODULES_H: parts.get("modules")
        and "\n\n".join(
            [MODULES_ABOUT, _context(parts["modules"]), main_table(parts["modules"]["rows"])]
        ),
    }
    for heading in GENERATED:
        if made[heading]:
            out += [heading, "", made[heading], ""]
        elif heading in kept:
            out += [kept[heading]]
    out += [text for heading, text in kept.items() if heading not in GENERATED]  # written by hand
    return "\n".join(out)


def _sections(text: str) -> dict[str, str]:
    """The `## ` sections of a RESULTS.md by heading, each with its heading and text."""
    parts = ("\n" + text).split("\n## ")[1:]
    return {f"## {p.splitlines()[0]}": f"## {p.rstrip()}\n" for p in parts}


def _point(rows: list[dict], key: str, shape: str, ranks: int, field: str = "wall_s"):
    """`field` of the row `key` of `shape` at `ranks` (None: not measured or failed)."""
    r = next(
        (r for r in rows if r["key"] == key and r.get("shape") == shape and r["ranks"] == ranks),
        None,
    )
    if r is None or r.get("error") or (field not in r and field not in r.get("detail", {})):
        return None
    return r[field] if field in r else r["detail"][field]


def _mb(v: float | None) -> str:
    return "—" if v is None else f"{v:,.0f}"


def _shapes(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r.get("shape") for r in rows))


def ranks_table(result: dict) -> str:
    rows, lines = result["rows"], []
    for shape in _shapes(rows):
        lines += [
            f"{shape}:",
            "",
            "| ranks | kernels per rank | SQLite MB | floor s | local cold s (CPU s) "
            "| per report, run CPU s | its RSS together MB (sum of peaks) | local warm s "
            "| Dask cold s: whole, report (CPU s) | its RSS together MB | Dask JSON = local |",
            "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|:-:|",
        ]
        for ranks in sorted({r["ranks"] for r in rows if r.get("shape") == shape}):
            lines.append(_rank_line(rows, shape, ranks))
        lines.append("")
    failed = [r for r in rows if r.get("error") or r.get("skipped")]
    lines += [
        f"- {r['label']} ({r.get('shape')}) at {r['ranks']} ranks: no result, "
        f"{r.get('error') or r.get('skipped')}"
        for r in failed
    ]
    return "\n".join(lines).rstrip()


def _rank_line(rows: list[dict], shape: str, ranks: int) -> str:
    def get(key, field="wall_s"):
        return _point(rows, key, shape, ranks, field)

    first = next(r for r in rows if r.get("shape") == shape and r["ranks"] == ranks)
    log = get("local_cold", "stage_log")
    stages = f"{sum(log['per_report_s'].values()):.2f}, {log['run_s']:.2f}" if log else "—"
    same = get("dask_cold", "same_json_as_local")
    return (
        f"| {ranks} | {first['kernels_per_rank']:,} | {first['bytes'] / 1e6:.0f} | "
        f"{s(get('floor'))} | {s(get('local_cold'))} ({s(get('local_cold', 'cpu_s'))}) | "
        f"{stages} | {_mb(get('local_cold', 'rss_together_mb'))} "
        f"({_mb(get('local_cold', 'peak_rss_mb'))}) | {s(get('local_warm'))} | "
        f"{s(get('dask_cold'))}, {s(get('dask_cold', 'report_s'))} "
        f"({s(get('dask_cold', 'cpu_s'))}) | {_mb(get('dask_cold', 'rss_together_mb'))} | "
        f"{'—' if same is None else 'yes' if same else '**no**'} |"
    )


def ranks_notes(rows: list[dict]) -> str:
    """Per shape, how time, memory and each stage grow with ranks."""
    notes = []
    for shape in _shapes(rows):
        by_ranks = sorted({r["ranks"] for r in rows if r.get("shape") == shape})
        cold = [_point(rows, "local_cold", shape, n) for n in by_ranks]
        memory = [_point(rows, "local_cold", shape, n, "rss_together_mb") for n in by_ranks]
        logs = [_point(rows, "local_cold", shape, n, "stage_log") for n in by_ranks]
        text = (
            f"- {shape}, local engine, cold: "
            + " → ".join(f"{s(v)} s" for v in cold)
            + f" at {'/'.join(map(str, by_ranks))} ranks; resident together "
            + " → ".join(f"{_mb(v)} MB" for v in memory)
        )
        if all(logs):
            text += (
                "; CPU per report by stage "
                + "; ".join(
                    f"{label} " + " → ".join(f"{log['per_report_s'][key]:.2f}" for log in logs)
                    for key, label in LOG_STAGES
                )
                + "; cross-rank run objects "
                + " → ".join(f"{log['run_s']:.2f}" for log in logs)
                + " s per run"
            )
        notes.append(text + ".")
    return "\n".join(notes)
