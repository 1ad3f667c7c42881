"""Showing a report: text for people, JSON for machines.

The terminal view starts with the diagnosis (nsyswrap.report.diagnosis) and the key
figures per rank, which fit one screen at 80 columns; then each section's tables, fitted
to the width (nsyswrap.text_table: columns are dropped, never wrapped). Tables longer than
MAX_ROWS become statistics (per rank: mean, p50, p90, max and the worst rows); their rows
are a flag away: `--detail` (every table in full) or `--section NAME`.
"""

from __future__ import annotations

import json
import shlex
import statistics
from pathlib import Path

from nsyswrap.errors import NsysWrapError, printable
from nsyswrap.output import ReportFormat
from nsyswrap.report.diagnosis.rules.step_figures import quantile
from nsyswrap.report.diagnosis.words import ms
from nsyswrap.report.figures import (
    BYTES,
    COUNT,
    FRACTION,
    NS,
    cell_text,
    is_figure,
    part,
    physical_gpus,
    table_ids,
    time_unit,
)
from nsyswrap.storage.safe_output import check_writable, save
from nsyswrap.text_table import fit, shorten_column, wrap

MAX_ROWS = 12
KEY_ROWS = 8  # devices on the first screen
FILE_WIDTH = 100  # width of the text written to --output
SECONDARY = (
    "naive_overlap_ratio",
    "compute_stream",
    "compute_busy",
    "comm_busy",
    "copy_busy",
    "max_residual",
    "kernel_p50",
    "latency_max",
    "step_p50",
)  # dropped first when too wide
__all__ = [
    "ReportFormat",
    "check_section",
    "first_screen",
    "render_text",
    "to_json",
    "write_report",
]
SECTIONS = (
    "single_rank",
    "compute",
    "crossrank",
    "memory",
    "host",
    "trace",
    "data_quality",
    "samples",
    "diagnosis",
)
TABLES = (  # every table id a report may have (tests/report check each report's against it)
    "activity alpha_beta assumed_waits bandwidth capture captures clock_offsets clock_uncertainty "
    "collectives comm_split copies copy_bandwidth critical_path cuda_api data_quality "
    "exchange_bytes "
    "frameworks gap_histogram gpu_memory gpus graphs groups host_alloc host_phases host_steps "
    "host_work idle_gaps launches ledger links mfu mfu_steps mismatches nvtx_gpu_time osrt "
    "periodic_steps "
    "rank_waits replay_residual shares slow_kernels slow_windows step_times steps "
    "stragglers tensor_cores top_exposed top_kernels whatif window"
).split()
KEYS = ("step", "rank", "device", "op", "pg", "seq", "cause", "length", "framework", "kind")
SHORT = {
    "device": "dev",
    "compute_only": "comp only",
    "comm_only": "comm only",
    "copy_only": "copy only",
    "compute_busy": "comp busy",
    "comm_busy": "comm busy",
    "copy_busy": "copy busy",
    "exposed_comm": "exp comm",
    "overlap_ratio": "overlap",
    "naive_overlap_ratio": "naive overlap",
    "collectives": "colls",
    "partly_hidden": "partly hidden",
    "nccl_time": "nccl time",
    "exposed_time": "exp time",
    "compute_stream": "comp stream",
    "share_of_idle": "of idle",
    "latency_p50": "lat p50",
    "latency_p90": "lat p90",
    "latency_max": "lat max",
    "kernel_p50": "kernel p50",
    "tiny_kernels": "tiny",
    "tiny_share": "tiny",
    "imposed_wait": "imposed wait",
    "share_of_wait": "of wait",
    "phase_excess": "phase excess",
    "max_residual": "max resid",
    "uncertainty": "uncert",
    "present_ranks": "present",
    "missing_ranks": "missing",
    "mean_lag": "mean lag",
    "host_bound": "host",
    "seen_in": "seen in",
    "activities": "activ",
    "gpu_time": "gpu time",
    "step_mean": "mean",
    "step_p50": "p50",
    "step_p90": "p90",
    "step_max": "max",
    "compute": "comp",
    "label": "verdict",
    "gain_ns_per_step": "gain/step",
    "gain_pct": "gain",
    "affected_steps": "affected",
    "steps_in_window": "of steps",
    "gain_ns_per_affected_step": "gain/affected step",
    "residual_ns": "residual",
    "noise_ns": "noise",
    "large_bandwidth": "large",
    "vs_expected": "vs exp",
    "of_compute": "of comp",
    "allocs_per_step": "allocs /step",
    "bytes_per_step": "bytes /step",
    "frees_per_step": "frees /step",
    "cuda_threads": "cuda thr",
}


def to_json(report: dict) -> str:
    return json.dumps(report, indent=1) + "\n"


def write_report(
    report: dict,
    fmt: ReportFormat,
    output: Path | None,
    force: bool,
    console,
    *,
    detail: bool = False,
    section: str | None = None,
) -> None:
    """Print the report or save it to `output` (refusing to overwrite unless forced)."""
    check_writable(output, force)
    if fmt is ReportFormat.json:
        text = to_json(report)
    else:
        width = console.width if output is None else FILE_WIDTH
        lines = render_text(report, width, detail=detail, section=section)
        text = "\n".join(map(printable, lines)) + "\n"  # (names may hold control characters)
    if output is None:
        console.file.write(text)
        console.file.flush()
    else:
        save(output, text)


def render_text(
    report: dict, width: int = 80, *, detail: bool = False, section: str | None = None
) -> list[str]:
    """The report as lines no wider than `width`."""
    if section is not None:
        return _only(report, section, width)
    lines = first_screen(report, width)
    for sec in report["sections"]:
        lines += [""] + _section(sec, width, detail)
    lines += [
        "",
        *wrap(
            "More: --detail shows every row; --section NAME one section or table "
            f"({', '.join(_names(report))}); --format json every figure; --html "
            "plots.",
            width,
        ),
    ]
    return lines + capture_lines(report, width)


def capture_lines(report: dict, width: int) -> list[str]:
    """The report's last lines when it suggests an nsys capture (the sampler's report):
    the commands, broken into shell lines that fit the width."""
    capture = report.get("capture")
    if "capture" not in report:
        return []
    if capture is None:
        return [
            "",
            *wrap(
                "Nothing to capture: no rank is significantly slower than the others in "
                "the sampled steps.",
                width,
            ),
        ]
    lines = [
        "",
        *wrap(f"Capture it with nsys ({capture['why']}):", width),
        *_shell(capture["command"], width),
    ]
    if capture.get("when"):
        lines += wrap(
            "It comes and goes: or catch it in the act, when a step is slower than usual:", width
        )
        lines += _shell(capture["when"], width)
    return lines


def _shell(command: str, width: int) -> list[str]:
    """A command as shell lines of at most `width` columns, joined by backslashes (a word
    longer than a line keeps its own line)."""
    lines, line = [], "  "
    for word in map(shlex.quote, shlex.split(command)):
        if len(line) + len(word) + 2 > width and line.strip():
            lines.append(line + " \\")
            line = "    "
        line += ("" if line.isspace() else " ") + word
    return lines + [line]


def heading(report: dict) -> str:
    """How many ranks, in how many reports and on how many physical GPUs when those
    differ: "8 ranks in 2 reports", "2 ranks on 1 GPU" (the trace section's gpus table)."""
    ranks, reports = len(report.get("ranks") or report["reports"]), len(report["reports"])
    said = f"{ranks} rank{'s' * (ranks != 1)}"
    if ranks != reports:
        said += f" in {reports} report{'s' * (reports != 1)}"
    gpus = physical_gpus(report)
    return said if gpus in (0, ranks) else f"{said} on {gpus} GPU{'s' * (gpus != 1)}"


def first_screen(report: dict, width: int) -> list[str]:
    """Diagnosis, key figures per rank and the worst steps, then what to do."""
    d = report.get("diagnosis") or {}
    names = [Path(r["path"]).name for r in report["reports"]]
    files = names[0] if len(names) == 1 else f"{names[0]} … {names[-1]}"
    lines = [_clip(f"nsyswrap report: {heading(report)} ({files})", width)]
    headline = wrap(f"DIAGNOSIS: {d.get('headline', 'none')}", width, indent="   ")
    lines += [headline[0].lstrip(), *headline[1:]]
    for i, f in enumerate(d.get("findings", []), 1):
        lines += wrap(f["text"], width, indent="   ", first=f"{i:>2} ")
    for c in d.get("cannot_answer", []):
        lines += wrap(
            f"Cannot answer {c['what']}: {c['reason']}.", width, indent="   ", first=" - "
        )
    if d.get("window"):
        lines += [""] + wrap(d["window"], width)
    devices = d.get("devices", [])
    if devices:
        lines.append("")
        lines += _key_figures(devices, d.get("findings", []), width)
    if d.get("host_steps"):
        lines.append("")
        lines += _host_figures(d["host_steps"], width)
    worst = d.get("worst_steps", [])
    if worst:
        items = ", ".join(
            f"rank {w['rank']} step {w['step']} {ms(w['duration']['value'])}" for w in worst
        )
        lines += wrap(f"Longest steps: {items}.", width)
    recs = d.get("recommendations", [])
    if recs:
        lines += ["", "What to do"]
        for i, rec in enumerate(recs, 1):
            lines += wrap(rec, width, indent="   ", first=f"{i:>2} ")
    return lines


def _key_figures(devices: list[dict], findings: list[dict], width: int) -> list[str]:
    multi = len(devices) > len({d["rank"] for d in devices})
    counts = {d["steps"]["value"] for d in devices}
    has_steps = any(counts)
    step_column = has_steps and len(counts) > 1
    has_wait = any(d["waited"]["value"] is not None for d in devices)
    headers = ["rank"] + (["gpu"] if multi else []) + ["verdict"]
    if has_steps:
        headers += ["steps"] * step_column + ["mean ms", "p90 ms", "max ms"]
    headers += ["comp %", "exp comm %", "copy %", "idle %"]
    if has_wait:
        headers += ["waited ms" + ("/step" if has_steps else "")]
    if len(devices) > KEY_ROWS:  # the devices the findings name first, then by rank
        named = {r for f in findings for r in f.get("ranks", [])} | {
            r for f in findings for r, _ in f.get("devices", [])
        }
        shown = sorted(devices, key=lambda d: (d["rank"] not in named, d["rank"]))[:KEY_ROWS]
        devices_shown = sorted(shown, key=lambda d: (d["rank"], d["device"]))
    else:
        devices_shown = devices
    rows = []
    for d in devices_shown:
        row = [str(d["rank"])] + ([str(d["device"])] if multi else []) + [d["label"] or "n/a"]
        if has_steps:
            row += [f"{d['steps']['value']:,}"] * step_column + [
                _num(d[k], 1e6, 2) for k in ("step_mean", "step_p90", "step_max")
            ]
        row += [_num(d[k], 0.01, 0) for k in ("compute", "exposed_comm", "copy_only", "idle")]
        if has_wait:
            row.append(_num(d["waited"], 1e6, 2))
        rows.append(row)
    lines, dropped = fit(
        headers,
        rows,
        [h != "verdict" for h in headers],
        width,
        keep=2 + multi,
        whole=frozenset({headers.index("verdict")}),
    )
    title = (
        "Per rank: "
        + (
            f"{counts.pop():,} steps, step times, "
            if has_steps and not step_column
            else "step times, "
            if has_steps
            else ""
        )
        + "shares of the GPU time"
        + (", wait in collectives" if has_wait else "")
    )
    notes = []
    if len(devices) > KEY_ROWS:
        notes.append(f"{len(devices) - KEY_ROWS} more devices: --section diagnosis")
    if dropped:
        notes.append(f"not shown at this width: {', '.join(dropped)}")
    return wrap(title, width) + lines + (wrap("; ".join(notes) + ".", width) if notes else [])


def _host_figures(hosts: list[dict], width: int) -> list[str]:
    """Per rank: host step times and the longest phases (a capture without GPU work)."""
    headers = ["rank", "steps", "mean ms", "p90 ms", "max ms", "phases (share of the step)"]
    rows = []
    for h in hosts:
        shown = [p for p in h["phases"] if (p["share"]["value"] or 0) >= 0.01][:3]
        room = max((width - 38) // max(len(shown), 1) - 7, 8)  # each phase's name, shortened
        names = shorten_column([p["phase"] for p in shown], room)
        rows.append(
            [
                str(h["rank"]),
                f"{h['steps']['value']:,}",
                *(_num(h[k], 1e6, 2) for k in ("step_mean", "step_p90", "step_max")),
                ", ".join(f"{n} {_num(p['share'], 0.01, 0)}%" for p, n in zip(shown, names))
                or "none marked",
            ]
        )
    lines, dropped = fit(
        headers, rows, [False, True, True, True, True, False], width, keep=1, whole=frozenset({5})
    )
    notes = [f"not shown at this width: {', '.join(dropped)}."] if dropped else []
    return (
        wrap("Per rank: host step times (NVTX step ranges) and the longest phases", width)
        + lines
        + notes
    )


def _num(cell: dict, divisor: float, digits: int) -> str:
    if not is_figure(cell) or cell["value"] is None:
        return "n/a"
    return f"{cell['value'] / divisor:,.{digits}f}"


def _clip(text: str, width: int) -> str:
    text = printable(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _names(report: dict) -> list[str]:
    return [s["id"] for s in report["sections"]] + ["diagnosis"]


def check_section(name: str | None) -> None:
    """Refuse, before any work, a `--section` that is no section or table of any report
    (`NAME` or `SECTION/TABLE`, as `figures.part` finds them)."""
    if name is None:
        return
    section, slash, table = name.rpartition("/")
    known = (section in SECTIONS and table in TABLES) if slash else name in (*SECTIONS, *TABLES)
    if not known:
        raise NsysWrapError(
            f"--section {name}",
            "is no section or table of a report",
            f"choose one of {', '.join(SECTIONS)}, or a table: {', '.join(TABLES)}",
        )


def _only(report: dict, name: str, width: int) -> list[str]:
    """One section, one table (by id) or the diagnosis, every row."""
    if name == "diagnosis":
        return first_screen(report, width) + [""] + _table(_devices_table(report), width, True)
    found = part(report, name)
    if found is None:
        raise NsysWrapError(
            f"--section {name}",
            "is no section or table of this report",
            f"choose one of {', '.join(_names(report) + table_ids(report))}",
        )
    section, table = found
    return _section(section, width, True) if table is None else _table(table, width, True)


def _devices_table(report: dict) -> dict:
    rows = [
        {k: v for k, v in d.items() if k not in ("reason", "waited_basis")}
        for d in report.get("diagnosis", {}).get("devices", [])
    ]
    return {"id": "diagnosis", "title": "Every device: verdict and key figures", "rows": rows}


def _section(section: dict, width: int, detail: bool) -> list[str]:
    title = f"── {section['title']} "
    lines = [_clip(title + "─" * max(width - len(title), 0), width)]
    v = section.get("verdict")
    if v:
        lines += wrap(f"Verdict: {(v['label'] or 'no verdict').upper()} - {v['reason']}", width)
    for table in section.get("tables", []):
        lines += [""] + _table(table, width, detail)
    if detail:
        recs = section.get("recommendations") or []
        if recs:
            lines += ["", "Recommendations"]
            for i, rec in enumerate(recs, 1):
                lines += wrap(rec, width, indent="   ", first=f"{i:>2} ")
    for item in section.get("cannot_answer") or []:
        lines += wrap(f"Cannot answer {item['what']} because {item['reason']}.", width)
    return lines


def _table(spec: dict, width: int, detail: bool) -> list[str]:
    rows = spec["rows"]
    if not rows:
        return wrap(f"{spec['title']}: no rows", width)
    note = []
    if len(rows) > MAX_ROWS and not detail:
        rows, note = _summary(spec)
    columns = list(dict.fromkeys(k for row in rows for k in row))
    times = [
        c["value"]
        for row in rows
        for c in row.values()
        if is_figure(c) and c["unit"] == NS and c["value"] is not None
    ]
    unit_name, ns_per_unit = time_unit(max(map(abs, times), default=0))
    headers, right, cells = [], [], [[] for _ in rows]
    reasons: dict[str, None] = {}
    for c in columns:
        column = [row.get(c) for row in rows]
        unit = next((x["unit"] for x in column if is_figure(x)), None)
        suffix = {FRACTION: " %", BYTES: " B"}.get(
            unit, "" if unit in (None, COUNT, NS) else f" {unit}"
        )
        headers.append(SHORT.get(c, c.replace("_", " ")) + ("" if c == unit else suffix))
        right.append(unit is not None)
        for i, x in enumerate(column):
            if is_figure(x) and x["value"] is None:
                reasons[x["reason"]] = None
            cells[i].append(cell_text(x, ns_per_unit))
    keep = sum(1 for c in columns[:3] if c in KEYS) or 1
    whole = frozenset(i for i, c in enumerate(columns) if c in ("verdict", "label"))
    drop_first = tuple(i for i, c in enumerate(columns) if c in SECONDARY)
    declared = spec.get("droppable")
    droppable = (
        None if declared is None else tuple(columns.index(c) for c in declared if c in columns)
    )
    lines, dropped = fit(headers, cells, right, width, keep, whole, drop_first, droppable)
    title = spec["title"] + (f" (times in {unit_name})" if times else "")
    out = wrap(title, width)
    out += lines
    notes = note + (
        [f"not shown at this width: {', '.join(dropped)} (--format json, or a wider terminal)"]
        if dropped
        else []
    )
    notes += [f"n/a: {reason}" for reason in reasons]
    for n in notes:
        out += wrap(n, width)
    return out


def _summary(spec: dict) -> tuple[list[dict], list[str]]:
    """A long table as its rows over all steps (`all`) where it has them, else as
    statistics of its first time column per (rank, device); and its worst rows."""
    rows = spec["rows"]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    time_col = next(
        (c for c in columns if any(is_figure(r.get(c)) and r[c]["unit"] == NS for r in rows)), None
    )
    more = f"{len(rows)} rows: --section {spec['id']} or --detail shows them"
    if time_col is None or "step" not in columns:
        return rows[:MAX_ROWS], [f"first {MAX_ROWS} of {more}"]
    keys = [c for c in ("rank", "device") if c in columns]
    per_step = [r for r in rows if isinstance(r.get("step"), int)]
    other = [r for r in rows if not isinstance(r.get("step"), int)]
    worst = sorted(per_step, key=lambda r: -(r[time_col]["value"] or 0))[:3]
    worst_text = ", ".join(
        " ".join(f"{k} {r[k]}" for k in keys) + f" step {r['step']}: {ms(r[time_col]['value'])}"
        for r in worst
    )
    if other:  # the table's own rows over all steps (`all`) summarize it
        return other, [
            f"rows over all steps; the most {time_col.replace('_', ' ')} in one "
            f"step: {worst_text}; {more}"
        ]
    groups: dict[tuple, list[int]] = {}
    for r in per_step:
        if is_figure(r.get(time_col)) and r[time_col]["value"] is not None:
            groups.setdefault(tuple(r[k] for k in keys), []).append(r[time_col]["value"])
    stats = []
    for key, values in sorted(groups.items(), key=lambda kv: [(x is None, x or 0) for x in kv[0]]):
        values.sort()
        stats.append(
            {
                **dict(zip(keys, key)),
                "steps": {"value": len(values), "unit": COUNT},
                **{
                    f"{time_col} {name}": {"value": fn(values), "unit": NS}
                    for name, fn in (
                        ("mean", statistics.fmean),
                        ("p50", lambda v: quantile(v, 0.5)),
                        ("p90", lambda v: quantile(v, 0.9)),
                        ("max", max),
                    )
                },
            }
        )
    return stats, [f"statistics of {time_col} per step; longest: {worst_text}; {more}"]
