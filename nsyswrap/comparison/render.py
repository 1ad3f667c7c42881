"""A diff for people (terminal tables, an HTML page) and machines (json, csv, parquet).

Tables: the headline first, then the comparability check (in full only when something
differs), then per section the overall figure and the largest significant changes.
csv and parquet hold every figure (`DiffResult.figures`); json holds everything; the
HTML page (nsyswrap.comparison.page) the tables of the terminal and a step time chart.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from nsyswrap.comparison import DiffResult
from nsyswrap.output import Format, to_json_records, write
from nsyswrap.storage.safe_output import check_writable, save
from nsyswrap.text_table import wrap

TOP = 12
TITLES = {
    "step_time": "Step time, ms (overall: slowest rank per step; per rank: its step range)",
    "share": "Ledger shares of the step per rank and device, %",
    "exposed_comm": "Exposed communication per step, ms (waited / transfer: in collectives "
    "before / after the last rank arrived; beyond_wait: exposed less waited)",
    "idle": "Idle time per step by cause, ms",
    "phase": "Phases per step, ms: host time without waits, GPU time of their kernels",
    "own_work": "Own work per step, ms: each rank's time in a phase between its events, "
    "as the replay holds it (its waits for the others left out)",
    "kernel": "GPU time per step by kernel name, all ranks, ms (top movers)",
    "range": "GPU time per step launched inside NVTX ranges, all ranks, ms (top movers)",
    "collective": "Collectives per op and size, ms: duration, transfer, skew, wait (summed "
    "over ranks); busbw in GB/s",
}


def write_diff(
    result: DiffResult,
    fmt: Format,
    output: Path | None,
    force: bool,
    console,
    html_path: Path | None = None,
) -> None:
    """Show or save the diff; `html_path`: also a self-contained page."""
    check_outputs(output, html_path, force)
    if fmt in (Format.csv, Format.parquet):
        write(result.figures, fmt, output, force, console)
    elif fmt is Format.table:
        text = as_text(result, console.width if output is None else 100)
        if output is None:
            console.file.write(text)
        else:
            save(output, text)
    else:
        text = json.dumps(as_json(result), indent=1) + "\n"
        if output is None:
            console.file.write(text)
        else:
            save(output, text)
    if html_path is not None:
        from nsyswrap.comparison.page import as_html

        save(html_path, as_html(result, section_tables(result)))


def check_outputs(
    output: Path | None, html_path: Path | None, force: bool, inputs: tuple = ()
) -> None:
    """Refuse, before any work, output files that exist (unless `force`) or are inputs."""
    for path, option in ((output, "--output"), (html_path, "--html")):
        check_writable(path, force, inputs, option=option)


def as_json(result: DiffResult) -> dict:
    """Everything: headline, warnings, method, notes, checks, figures, stragglers and the
    replay's check against the fix."""
    return {
        "base": result.base,
        "new": result.new,
        "headline": result.headline,
        "warnings": result.warnings,
        "method": result.method,
        "notes": result.notes,
        "checks": to_json_records(result.checks),
        "figures": to_json_records(result.figures),
        "stragglers": to_json_records(result.stragglers),
        "fix_check": _fix_check_json(result.fix_check),
    }


def _fix_check_json(c) -> dict | None:
    """The replay of BASE against NEW (nsyswrap.comparison.fix_check), or null."""
    if c is None:
        return None
    return {
        "steps": c.steps,
        "base_step_ns": c.base_ns,
        "new_step_ns": c.new_ns,
        "measured_ns": c.measured_ns,
        "noise_ns": c.noise_ns,
        "named": None
        if c.named is None
        else {
            "ranks": c.named["ranks"],
            "phase": c.named["phase"] or None,
            "steps": {str(r): st for r, st in c.named["steps"].items()},
            "stage": c.named["stage"],
        },
        "link": c.link,
        "predicted_ns": c.predicted_ns,
        "predicted_low_ns": c.predicted_low_ns,
        "predicted_low_reason": c.low_reason,
        "own_work": to_json_records(c.own_work.assign(phase=c.own_work["phase"].replace("", None))),
    }


def section_tables(result: DiffResult) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows for people or None) per section: the overall step time first, then
    the significant changes, largest first, at most TOP rows; None: none significant."""
    out = []
    for name, title in TITLES.items():
        figs = result.section(name)
        if figs.empty:
            continue
        overall = figs[figs["rank"].isna() & (name == "step_time")]
        rest = figs.drop(overall.index)
        rest = rest.assign(size=rest["delta"].abs())
        rest = rest[rest["significant"]].sort_values("size", ascending=False, kind="stable")
        shown = pd.concat([overall, rest]).head(TOP)
        if shown.empty:
            out.append((f"{title}: no significant change in {len(figs)} figures", None))
            continue
        more = len(figs) - len(shown)
        note = f" ({more} more figures: --format csv)" if more else ""
        out.append((title + note, _for_people(shown)))
    return out


def _for_people(figs: pd.DataFrame) -> pd.DataFrame:
    """Bare numbers (the unit is in the table title): ms, %, GB/s."""

    def col(name: str, sign: bool = False) -> list[str]:
        return [_value(v, u, sign) for v, u in zip(figs[name], figs["unit"])]

    return pd.DataFrame(
        {
            "figure": [_what(r) for r in figs.itertuples(index=False)],
            "base": col("base"),
            "new": col("new"),
            "delta": col("delta", True),
            "rel": [_pct(x) for x in figs["rel_delta"]],
            "95 % CI": [f"{a}..{b}" for a, b in zip(col("ci_low", True), col("ci_high", True))],
            "sig": ["yes" if s else "no" for s in figs["significant"]],
        }
    )


def _what(r) -> str:
    parts = [] if r.metric in (r.section, "gpu_time") else [r.metric]
    if not pd.isna(r.rank):
        parts.append(f"rank {r.rank}")
    if not pd.isna(r.device):
        parts.append(f"dev {r.device}")
    if r.item:
        parts.append(r.item)
    return " ".join(parts) or "all ranks"


def _value(v: float, unit: str, sign: bool = False) -> str:
    """ns as ms, fractions as %, others as they are (no unit)."""
    if pd.isna(v):
        return "n/a"
    digits, scale = {"ns": (3, 1e-6), "fraction": (1, 100)}.get(unit, (2, 1))
    return format(v * scale, f"{'+' if sign else ''},.{digits}f").replace("-", "\u2212")


def _pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{x * 100:+.1f}%".replace("-", "\u2212")


def as_text(result: DiffResult, width: int) -> str:
    """The diff for a terminal `width` columns wide."""
    out = [*wrap(result.headline[0], width)]
    for line in result.headline[1:]:
        out += wrap(line, width, indent="    ", first="  ")
    for line in result.warnings:
        out += wrap(f"Warning: {line}", width)
    out += wrap(f"BASE {result.base} vs NEW {result.new}", width)
    differs = result.checks[~result.checks["ok"]]
    if differs.empty:
        out += wrap(
            "Comparable: "
            + "; ".join(
                f"{r.check} {r.base}"
                for r in result.checks.itertuples(index=False)
                if r.check in ("ranks", "devices", "process groups")
            ),
            width,
        )
    else:
        out += _table(
            differs[["check", "base", "new", "blocking"]].astype(str),
            "Comparability: what differs (blocking = refused without --force)",
            width,
        )
    out += wrap(f"Significance: {result.method}.", width)
    for title, rows in section_tables(result):
        out += [""] + (wrap(title, width) if rows is None else _table(rows, title, width))
    if not result.stragglers.empty:
        s = result.stragglers
        rows = pd.DataFrame(
            {
                "run": ["BASE" if r == result.base else "NEW" for r in s["run"]],
                "rank": s["rank"].astype(str),
                "last": [f"{a}/{b}" for a, b in zip(s["last"], s["collectives"])],
                "lag": [_value(v, "ns") for v in s["lag_ns"]],
                "imposed wait": [_value(v, "ns") for v in s["imposed_wait_ns"]],
                "phase": s["phase"].fillna("").astype(str),
                "excess/step": [_value(v, "ns") for v in s["phase_excess_per_step_ns"]],
            }
        )
        out += [""] + _table(
            rows,
            "The straggler of each run, ms: last at how many "
            "collectives, its lag summed, the wait it imposed, the phase "
            "behind it and its excess per step",
            width,
        )
    out.append("")
    for note in result.notes:
        out += wrap(f"Note: {note}.", width)
    return "\n".join(out) + "\n"


def _table(df: pd.DataFrame, title: str, width: int) -> list[str]:
    """A titled text table no wider than `width` (nsyswrap.text_table), the first column
    kept and left-aligned."""
    from nsyswrap.text_table import fit

    right = [i > 0 for i in range(len(df.columns))]
    cells = [[str(v) for v in row] for row in df.itertuples(index=False)]
    lines, dropped = fit([str(c) for c in df.columns], cells, right, width)
    if dropped:
        lines += wrap(f"not shown at this width: {', '.join(dropped)}", width)
    return wrap(title, width) + lines
