"""Issue 37's targets, judged per shape from one run's rows: each met, or missed by how much
and why (the CPU of a report by stage: `stages_section`)."""

from __future__ import annotations

from bench.measure import KILLED
from bench.stages import LOG_STAGES

COLD_VS_EXTRACT, LONGER_GOAL = 3.0, 1.5
BASELINE_RATIO, STEPS_VS_ASSEMBLED, WARM_S, RSS_MB, WHATIF_S = 5.0, 3.0, 0.5, 2048, 10.0
FLAT = 1.25
"""The sampled peak is flat with ranks when it grows at most this much from 8 to 64 ranks."""
NSYSWRAP_ROWS = ("report_cold", "report_warm", "report_assembled", "report_steps", "trio_cold")
ONE_PROCESS = (
    ("read_s", "read"),
    ("views_s", "views"),
    ("sort_sweep_s", "sort/sweep"),
    ("lookups_s", "look-ups"),
    ("replay_inputs_s", "replay inputs"),
    ("objects_s", "objects"),
    ("store_s", "store"),
)
"""The stages of bench.stages (one report's cold work in one process)."""


def row(rows: list[dict], key: str, shape: str | None = None) -> dict | None:
    """The row `key` (of `shape`), measured or not."""
    return next((r for r in rows if r["key"] == key and r.get("shape") == shape), None)


def timing(r: dict | None) -> tuple[float | None, str]:
    """(seconds, "" or ">"): a completed wall time, or the limit a killed process reached."""
    if r is None or "wall_s" not in r:
        return None, ""
    if not r.get("error"):
        return r["wall_s"], ""
    return (r["wall_s"], ">") if r["error"].startswith(KILLED) else (None, "")


def s(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def x(v: float | None) -> str:
    return "—" if v is None else f"{v:.1f}×"


def _verdict(met: bool, factor: float, more: str = "") -> str:
    return "met" if met else f"**missed by {more}{factor:.1f}×**"


def _why(rows: list[dict], key: str, shape: str) -> str:
    """Why a missed target is missed: the cold report's CPU by stage (from its stage log)."""
    log = (row(rows, key, shape) or {}).get("stage_log")
    if not log:
        return "Its CPU by stage was not measured in this run."
    per = log["per_report_s"]
    top = ", ".join(f"{n} {c:.2f}" for n, c in log["costliest_objects"][:4])
    return (
        f"CPU per report {sum(per.values()):.2f} s ("
        + ", ".join(f"{label} {per[k]:.2f}" for k, label in LOG_STAGES)
        + f"; costliest {top}), on the run {log['run_s']:.2f} s"
        + (
            f" ({log['costliest_run_objects'][0][0]} {log['costliest_run_objects'][0][1]:.2f})"
            if log["costliest_run_objects"]
            else ""
        )
        + f", the rest of the tree {log['rest_s']:.2f} s"
    )


def cold_vs_extract(rows: list[dict], shape: str) -> str:
    (cold, more), (extract, _) = (
        timing(row(rows, "report_cold", shape)),
        timing(row(rows, "extract", shape)),
    )
    if not (cold and extract):
        return "no result"
    ratio = cold / extract
    by_cpu = _by_cpu(rows, shape, ("report_cold", "extract"), COLD_VS_EXTRACT, ratio=True)
    text = f"{more}{s(cold)} s ÷ {s(extract)} s = {more}{x(ratio)}{by_cpu}: " + _verdict(
        not more and ratio <= COLD_VS_EXTRACT, ratio / COLD_VS_EXTRACT, more
    )
    if not more and ratio <= COLD_VS_EXTRACT:
        text += f" (the longer goal {LONGER_GOAL}×: {x(ratio / LONGER_GOAL)} off)"
    return (
        text
        if not more and ratio <= COLD_VS_EXTRACT
        else f"{text}. {_why(rows, 'report_cold', shape)}"
    )


def baseline(rows: list[dict], shape: str) -> str:
    """The pandas baseline beside nsyswrap's same three answers, both cold from SQLite."""
    (base, _), (trio, more) = (
        timing(row(rows, "baseline", shape)),
        timing(row(rows, "trio_cold", shape)),
    )
    cold, _ = timing(row(rows, "report_cold", shape))
    if not (base and trio):
        return "no result"
    ratio = base / trio
    by_cpu = _by_cpu(
        rows, shape, ("baseline", "trio_cold"), BASELINE_RATIO, ratio=True, at_least=True
    )
    text = (
        f"{s(base)} s ÷ {more}{s(trio)} s = {'<' if more else ''}{x(ratio)}{by_cpu} (the whole "
        f"report cold: {x(base / cold) if cold else '—'}): "
        + _verdict(not more and ratio >= BASELINE_RATIO, BASELINE_RATIO / ratio, more)
    )
    return (
        text
        if not more and ratio >= BASELINE_RATIO
        else f"{text}. {_why(rows, 'trio_cold', shape)}"
    )


def _by_cpu(
    rows: list[dict],
    shape: str,
    keys: tuple[str, ...],
    limit: float,
    ratio: bool,
    at_least: bool = False,
) -> str:
    """The same target judged on CPU time (the steadier figure on a loaded machine): the
    first row's CPU, or its ratio to the second's, at most (`at_least`: at least) `limit`."""
    cpu = [(row(rows, k, shape) or {}).get("cpu_s") for k in keys]
    if not all(cpu):
        return ""
    value = cpu[0] / cpu[1] if ratio else cpu[0]
    shown = f"{s(cpu[0])} s ÷ {s(cpu[1])} s = {x(value)}" if ratio else f"{s(value)} s"
    met = value >= limit if at_least else value <= limit
    return f" (CPU {shown}: {'met' if met else 'missed'})"


def warm(rows: list[dict], shape: str) -> str:
    w, more = timing(row(rows, "report_warm", shape))
    if w is None:
        return "no result"
    return (
        f"{more}{s(w)} s"
        + _by_cpu(rows, shape, ("report_warm",), WARM_S, ratio=False)
        + ": "
        + _verdict(not more and w <= WARM_S, w / WARM_S, more)
    )


def new_window(rows: list[dict], shape: str) -> str:
    (steps, more), (assembled, _) = (
        timing(row(rows, "report_steps", shape)),
        timing(row(rows, "report_assembled", shape)),
    )
    if not (steps and assembled):
        return "no result"
    ratio = steps / assembled
    met = not more and ratio <= STEPS_VS_ASSEMBLED
    by_cpu = _by_cpu(
        rows, shape, ("report_steps", "report_assembled"), STEPS_VS_ASSEMBLED, ratio=True
    )
    text = f"{more}{s(steps)} s ÷ {s(assembled)} s = {more}{x(ratio)}{by_cpu}: " + _verdict(
        met, ratio / STEPS_VS_ASSEMBLED, more
    )
    return text if met else f"{text}. {_why(rows, 'report_steps', shape)}"


def peak(rows: list[dict], shape: str) -> str:
    """The largest sampled peak of the whole tree over the shape's nsyswrap rows."""
    measured = [
        r
        for r in rows
        if r.get("shape") == shape and r["key"] in NSYSWRAP_ROWS and r.get("rss_together_mb")
    ]
    if not measured:
        return "no result"
    top = max(measured, key=lambda r: r["rss_together_mb"])
    text = (
        f"{top['rss_together_mb']:,.0f} MB ({top['key']}, {top['processes']} processes): "
        + _verdict(top["rss_together_mb"] <= RSS_MB, top["rss_together_mb"] / RSS_MB)
    )
    log = top.get("stage_log") or {}
    where = [
        f"{who} peak {p[0]:,} MB in {p[1]}"
        for who, p in (
            ("a worker's", log.get("worker_peak")),
            ("the main process's", log.get("main_peak")),
        )
        if p
    ]
    return f"{text}" + (f"; {', '.join(where)}" if where else "")


def flat(ranks: dict | None, shape: str) -> str:
    """The cold report's sampled peak from 8 to 64 ranks (part ranks)."""
    if not ranks:
        return "part ranks not measured"
    by_ranks = {
        r["ranks"]: r["rss_together_mb"]
        for r in ranks["rows"]
        if r["key"] == "local_cold"
        and r.get("shape") == shape
        and r.get("rss_together_mb")
        and not r.get("error")
    }
    if len(by_ranks) < 2:
        return "no result"
    low, high = by_ranks[min(by_ranks)], by_ranks[max(by_ranks)]
    growth = high / low
    return (
        " → ".join(f"{by_ranks[n]:,.0f}" for n in sorted(by_ranks))
        + f" MB at {'/'.join(map(str, sorted(by_ranks)))} ranks ({growth:.2f}×): "
        + _verdict(growth <= FLAT, growth / FLAT)
    )


def whatif_line(whatif: dict | None) -> str:
    if not whatif:
        return "part whatif not measured"
    big = [r for r in whatif["rows"] if r.get("ranks") == 64 and "whatif_s" in r.get("detail", {})]
    if not big:
        return "no result"
    stage = big[0]["detail"]["whatif_s"]
    return f"{stage:.2f} s ({whatif['started']}): " + _verdict(stage <= WHATIF_S, stage / WHATIF_S)


TARGETS = (
    (
        f"cold report ≤ {COLD_VS_EXTRACT:.0f}× the ADBC extraction (longer goal {LONGER_GOAL}×)",
        cold_vs_extract,
    ),
    (
        f"cold ledger + idle gaps + skew ≥ {BASELINE_RATIO:.0f}× faster than the pandas baseline",
        baseline,
    ),
    (f"warm report (its stored answer) ≤ {WARM_S} s", warm),
    (f"new `--steps` window ≤ {STEPS_VS_ASSEMBLED:.0f}× the warm report assembled", new_window),
    (f"sampled peak of the process tree ≤ {RSS_MB / 1024:.0f} GiB at `-j 2`", peak),
)


def targets_section(main: dict | None, ranks: dict | None, whatif: dict | None) -> str:
    """One line per target and shape, then those measured once (flatness, the what-if)."""
    rows = main["rows"] if main else []
    shapes = list(dict.fromkeys(r["shape"] for r in rows if r.get("shape")))
    lines = ["| target | " + " | ".join(shapes) + " |", "|---|" + "---|" * len(shapes)]
    for label, judge in TARGETS:
        lines.append(f"| {label} | " + " | ".join(judge(rows, sh) for sh in shapes) + " |")
    rank_shapes = sorted({r["shape"] for r in ranks["rows"] if r.get("shape")}) if ranks else []
    lines += [
        "",
        "| target | measured |",
        "|---|---|",
        *(
            f"| that peak flat from 8 to 64 ranks (at most {FLAT}×), {sh} | {flat(ranks, sh)} |"
            for sh in rank_shapes
        ),
        f"| the what-if stage, 64 ranks × 1,000 collectives × 100 steps ≤ {WHATIF_S:.0f} s | "
        f"{whatif_line(whatif)} |",
    ]
    return "\n".join(lines)


def stages_section(main: dict | None) -> str:
    """Per shape: the cold report's CPU by stage from its stage log (per report, in the
    workers; the run objects; the rest), and one report's cold work in one process."""
    rows = main["rows"] if main else []
    shapes = list(dict.fromkeys(r["shape"] for r in rows if r.get("shape")))
    logs = {sh: (row(rows, "report_cold", sh) or {}).get("stage_log") for sh in shapes}
    head = "| stage | " + " | ".join(shapes) + " |"
    lines = [
        "`nsyswrap report RUN -j 2` cold with `$NSYSWRAP_STAGE_LOG` set (the rows above; "
        "nsyswrap/engine/stage_log.py): CPU s of the workers per report, by stage, and of the "
        "whole run once (the cross-rank stage's run objects, then the rest of the process "
        "tree: interpreter starts, imports, the report's sections and its answer).",
        "",
        head,
        "|---|" + "--:|" * len(shapes),
    ]
    for key, label in LOG_STAGES:
        lines.append(
            f"| {label}, per report | "
            + " | ".join(s(log["per_report_s"][key]) if log else "—" for log in logs.values())
            + " |"
        )
    for key, label in (
        ("run_s", "cross-rank run objects, per run"),
        ("rest_s", "the rest, per run"),
    ):
        lines.append(
            f"| {label} | "
            + " | ".join(s(log[key]) if log else "—" for log in logs.values())
            + " |"
        )
    lines += ["", *(_costliest(sh, log) for sh, log in logs.items() if log), ""]
    lines += _one_process(rows, shapes)
    return "\n".join(lines)


def _costliest(shape: str, log: dict) -> str:
    objects = ", ".join(f"{n} {c:.2f}" for n, c in log["costliest_objects"])
    run = ", ".join(f"{n} {c:.2f}" for n, c in log["costliest_run_objects"])
    peaks = "; ".join(
        f"{who} peak {p[0]:,} MB, reached in {p[1]}"
        for who, p in (("A worker's", log["worker_peak"]), ("the main process's", log["main_peak"]))
        if p
    )
    return f"- {shape}: costliest per report (CPU s): {objects}; on the run: {run}. {peaks}."


def _one_process(rows: list[dict], shapes: list[str]) -> list[str]:
    """bench.stages: one report's cold work in one process (DuckDB on one thread), with
    the reads and the Parquet writes measured apart, and its peak by stage."""
    found = {sh: (row(rows, "stages", sh) or {}).get("detail") for sh in shapes}
    found = {sh: d for sh, d in found.items() if d and "read_s" in d}
    if not found:
        return ["One report's cold work in one process was not measured in this run."]
    lines = [
        "One report's cold work in one process (`python -m bench.tasks stages RUN`: the first "
        "report, DuckDB on one thread as a worker of `-j 2`; bench/stages.py says how each "
        "stage is timed), CPU s:",
        "",
        "| stage | " + " | ".join(found) + " |",
        "|---|" + "--:|" * len(found),
    ]
    for key, label in (*ONE_PROCESS, ("total_s", "total")):
        lines.append(f"| {label} | " + " | ".join(s(d.get(key)) for d in found.values()) + " |")
    for key, label in (("views_mb", "peak MB, read + views"), ("objects_mb", "peak MB, objects")):
        lines.append(
            f"| {label} | "
            + " | ".join(
                f"{d['memory'][key]:,.0f}" if d.get("memory") else "—" for d in found.values()
            )
            + " |"
        )
    return lines
