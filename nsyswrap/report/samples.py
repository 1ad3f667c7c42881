"""`nsyswrap report` over sample files: the nsys path's cross-rank answer, from samples.

The sampled collectives become the six cross-rank run objects the nsys path computes
(nsyswrap.crossrank.solve: keys, groups, clocks, aligned collectives, steps, phases):
matched by (process group, sequence number) as the `coll:` ranges are, the clocks solved
by the same robust solve over the collectives' ends (nsyswrap.crossrank.alignment) and
every collective timed by the same code. Host-timed ranks of one host read its monotonic
clock (`monotonic_ns` of their `run` records puts them on one time line), so the solve is
over the hosts' clocks; a CUDA-timed step's times rest on its first event (the GPU may run
behind the host), so each such step is solved on its own. Then the same `sql/crossrank`
modules (stragglers, waits, comm split, bandwidth) run over those objects
(planner.result_over) and the same section and diagnosis code words the answer: its figures
are the nsys path's figures over the sampled steps. What samples cannot say (kernels,
idle-gap causes) is said as such.

On top: step times per rank over the sampled steps, whether the straggler's slowness is
persistent or intermittent (nsyswrap.report.persistence) and in which window of steps,
and the `nsyswrap launch` command that captures it with nsys.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import duckdb
import pandas as pd

from nsyswrap.crossrank.alignment import CLOCK_COLUMNS, solve_clocks
from nsyswrap.crossrank.matching import KEY_COLUMNS, match
from nsyswrap.crossrank.solve import (
    ALIGNED_COLUMNS,
    MEMBER_EXTRA,
    PHASE_COLUMNS,
    RUN_SCOPE_TABLES,
    time_collectives,
)
from nsyswrap.engine.builders import create_table
from nsyswrap.engine.planner import result_over
from nsyswrap.engine.queries import bind, get
from nsyswrap.errors import note
from nsyswrap.output import check_writable
from nsyswrap.report.cross_rank import crossrank_answer
from nsyswrap.report.diagnosis import _ranks, diagnose, rows
from nsyswrap.report.figures import NS, figure
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.persistence import describe, episodes
from nsyswrap.sample.read import Samples, read_samples
from nsyswrap.storage.cache_keys import nsyswrap_version

SOURCE = "sample file"
TIMERS = {"host": "host timers", "cuda": "CUDA events"}
CAPTURE_STEPS = 5  # steps the suggested capture window holds
MANIFEST = "manifest.json"
CANNOT_ANSWER = [
    {
        "what": "from samples",
        "reason": "where the GPU time goes (compute, exposed "
        "communication, copies, idle) and what idle gaps waited for: samples time "
        "steps, phases and collectives, not kernels; capture with nsys (the command "
        "at the end)",
    }
]


def sample_report(paths: list[Path], options: ReportOptions | None = None) -> dict:
    """The report dict of a run's sample files alone (layout: nsyswrap.report, plus
    `source` and `capture`)."""
    options = options or ReportOptions()
    samples = read_samples(paths)
    for said in samples.notes:
        note(said)
    crossrank, answer = _answer(samples, options)
    ranks = samples.runs.drop_duplicates("rank")
    report = {
        "tool": "nsyswrap",
        "version": nsyswrap_version(),
        "source": "samples",
        "reports": [
            {"rank": int(r.rank), "path": r.path, "rank_source": SOURCE} for r in ranks.itertuples()
        ],
        "ranks": [
            {
                "rank": int(r.rank),
                "report_rank": int(r.rank),
                "pid": int(r.pid),
                "rank_source": SOURCE,
            }
            for r in ranks.itertuples()
        ],
        "options": options.window_params(),
        "sections": [answer["section"], crossrank],
    }
    diagnosis = diagnose(report)
    findings = [_with_window(f, answer) for f in diagnosis["findings"]]
    said = (crossrank.get("verdict") or {}).get("label")
    diagnosis.update(
        findings=findings,
        headline=diagnosis["headline"] if findings else (said or "not enough data").upper(),
        worst_steps=answer["worst_steps"],
        recommendations=[f["recommendation"] for f in findings if f.get("recommendation")],
        cannot_answer=CANNOT_ANSWER,
    )
    return {**report, "diagnosis": diagnosis, "capture": _capture(answer, findings, paths)}


def report_with_samples(
    exports: list,
    samples: list[Path],
    options: ReportOptions,
    *,
    opener,
    html: Path | None = None,
    force: bool = False,
) -> dict:
    """`nsyswrap report` given sample files: their report alone, or beside the report of
    the exports given with them; `html`: also write the page (its step-time chart)."""
    from nsyswrap.html_report.samples import write_page

    if html is not None:
        check_writable(html, force)
    if not exports:
        result = sample_report(samples, options)
    else:
        from nsyswrap.report import report

        result = add_samples(report(exports, options, opener=opener), samples, options)
    if html is not None:
        write_page(result, html)
    return result


def add_samples(report: dict, paths: list[Path], options: ReportOptions) -> dict:
    """An nsys report with the samples of the same run beside it: their section (the
    samples' cross-rank tables included) and finding, and the capture command."""
    samples = read_samples(paths)
    for said in samples.notes:
        note(said)
    crossrank, answer = _answer(samples, options)
    section = answer["section"]
    section["verdict"] = crossrank["verdict"]
    section["tables"] += crossrank["tables"]
    alone = {**report, "sections": [answer["section"], crossrank]}
    findings = [_with_window(f, answer) for f in diagnose(alone)["findings"]]
    for f in findings:
        f["scope"] = "samples"
        f["text"] = "Over the sampled steps: " + f["text"]
    report["sections"].append(section)
    report["diagnosis"]["findings"] += findings
    return {**report, "capture": _capture(answer, findings, paths)}


def _answer(samples: Samples, options: ReportOptions) -> tuple[dict, dict]:
    """(the cross-rank section, what the samples say on their own)."""
    objects = run_objects(samples)
    con = duckdb.connect()
    for name, frame in objects.items():
        create_table(con, name, name, frame)

    def module(name: str, **params) -> pd.DataFrame:
        return result_over(con, name, bind(get(name), params), RUN_SCOPE_TABLES)

    steps = _in_window(samples.steps, options).dropna(subset=["start_ns", "end_ns"])
    steps = steps.assign(duration=steps["end_ns"] - steps["start_ns"])
    crossrank = crossrank_answer(
        module,
        options,
        samples.runs["rank"].nunique(),
        lambda: int(steps.groupby("step")["duration"].median().sum()),
    )
    strag = rows({"sections": [crossrank]}, "crossrank", "stragglers")
    con.close()
    return crossrank, _own_answer(samples, steps, strag)


def _in_window(frame: pd.DataFrame, options: ReportOptions) -> pd.DataFrame:
    keep = pd.Series(True, index=frame.index)
    if options.step_from is not None:
        keep &= frame["step"] >= options.step_from
    if options.step_to is not None:
        keep &= frame["step"] < options.step_to
    return frame[keep]


def run_objects(samples: Samples) -> dict[str, pd.DataFrame]:
    """The six cross-rank run objects (nsyswrap.crossrank.solve) from the samples."""
    runs = samples.runs
    first = runs.drop_duplicates("rank").set_index("rank")
    timers = samples.steps[["rank", "segment", "step", "timer"]]
    calls = samples.collectives.dropna(subset=["start_ns", "end_ns"]).merge(
        timers, on=["rank", "segment", "step"]
    )
    if runs.groupby("rank").size().max() > 1:  # each segment restarts every sequence number
        calls["pg"] = calls["segment"].astype(str) + "/" + calls["pg"]
    cuda = calls["timer"] == "cuda"
    keys = pd.DataFrame(
        {
            "rank": calls["rank"],
            "pg": calls["pg"],
            "seq": calls["seq"],
            "op": calls["op"],
            "bytes": calls["bytes"],
            "group_size": calls["group_size"],
            "cpu_start_ns": calls["start_ns"],
            "cpu_end_ns": calls["end_ns"],
            "kernel_start_ns": calls["start_ns"].where(cuda),
            "kernel_end_ns": calls["end_ns"].where(cuda),
            "keyed": "range",
            "pid": calls["rank"].map(first["pid"]),
        }
    )
    keyed, groups, _ = match(keys)  # keyed calls: no exchange stream is left to group
    hosts = first["host"].to_dict()
    groups["spans_hosts"] = [
        len({hosts.get(int(m)) for m in str(ms).split(",") if m}) > 1 for ms in groups["members"]
    ]
    matched = keyed[keyed["matches"].eq(True)].merge(
        calls[["rank", "pg", "seq", "segment", "step", "timer"]], on=["rank", "pg", "seq"]
    )
    aligned, clocks = _timed(matched, samples)
    members = first.reset_index()[["rank", "pid"]].assign(
        report_rank=first.index, rank_source=SOURCE
    )
    clock = _clock_table(clocks, runs).merge(members, on="rank")
    return {
        "xr_keys": keyed[KEY_COLUMNS],
        "xr_groups": groups,
        "xr_clock": clock[[*CLOCK_COLUMNS, *MEMBER_EXTRA]],
        "xr_aligned": aligned[ALIGNED_COLUMNS],
        "xr_member_steps": samples.steps[["rank", "step", "start_ns", "end_ns"]].dropna(),
        "xr_member_phases": _phases(samples)[PHASE_COLUMNS],
    }


def host_clocks(runs: pd.DataFrame) -> pd.DataFrame:
    """Per rank and segment: the rank whose clock stands for its host (`clock`: the lowest
    rank of the host, first segment), and `delta_ns`, what puts the segment's times on that
    clock: the ranks of one host read one monotonic clock."""
    first = runs.sort_values(["rank", "segment"]).drop_duplicates("host")
    rep = runs["host"].map(dict(zip(first["host"], first["rank"])))
    zero = runs["host"].map(dict(zip(first["host"], first["monotonic_ns"])))
    return runs.assign(clock=rep, delta_ns=runs["monotonic_ns"] - zero)[
        ["rank", "segment", "host", "clock", "delta_ns", "utc_epoch_ns"]
    ]


def _timed(matched: pd.DataFrame, samples: Samples) -> tuple[pd.DataFrame, list[pd.DataFrame]]:
    """Every matched collective in run time, and the clock tables (one row per rank, in
    the host clock's time): host-timed steps are one solve over the hosts' clocks, each
    CUDA-timed step a solve of its own over the ranks (each GPU's queue is its own)."""
    base = host_clocks(samples.runs)
    shift = base.set_index(["rank", "segment"])["delta_ns"]
    matched = matched.copy()
    at = pd.MultiIndex.from_frame(matched[["rank", "segment"]])
    delta = pd.Series(shift.reindex(at).to_numpy(), index=matched.index)
    for c in ("cpu_start_ns", "cpu_end_ns", "kernel_start_ns", "kernel_end_ns"):
        matched[c] = matched[c] + delta
    matched["on_gpu"] = (
        matched["kernel_end_ns"]
        .notna()
        .groupby([matched["pg"], matched["seq"]])
        .transform("all")
        .astype(bool)
    )
    gpu = matched["on_gpu"]
    matched["start_ns"] = matched["kernel_start_ns"].where(gpu, matched["cpu_start_ns"])
    matched["end_ns"] = matched["kernel_end_ns"].where(gpu, matched["cpu_end_ns"])
    steps = samples.steps.dropna(subset=["start_ns", "end_ns"]).merge(base, on=["rank", "segment"])
    steps = steps.assign(
        start_ns=steps["start_ns"] + steps["delta_ns"], end_ns=steps["end_ns"] + steps["delta_ns"]
    )
    owner = base.drop_duplicates("rank").set_index("rank")
    utc = owner["clock"].map(owner["utc_epoch_ns"])  # the host clock's UTC zero, per rank
    aligned, clocks = [pd.DataFrame(columns=ALIGNED_COLUMNS)], []
    cuda = matched["timer"] == "cuda"
    groups = [(matched[~cuda], steps)] if (~cuda).any() else []
    groups += [(part, steps[steps["step"] == step]) for step, part in matched[cuda].groupby("step")]
    for part, mine in groups:
        ranks = sorted(set(part["rank"]))
        if part["timer"].iloc[0] == "cuda":  # each GPU's queue a clock of its own
            sessions = pd.DataFrame(
                {
                    "rank": ranks,
                    "utc_epoch_ns": utc[ranks].to_numpy(),
                    "host": owner["host"][ranks].to_numpy(),
                }
            )
            clock = _solve(part, sessions, tie_hosts=False)
        else:  # one clock per host: its lowest rank's
            hosts = sorted(set(owner["clock"][ranks]))
            sessions = pd.DataFrame(
                {
                    "rank": hosts,
                    "utc_epoch_ns": owner["utc_epoch_ns"][hosts].to_numpy(),
                    "host": owner["host"][hosts].to_numpy(),
                }
            )
            per_host = _solve(part.assign(rank=part["rank"].map(owner["clock"])), sessions)
            clock = per_host.set_index("rank").loc[owner["clock"][ranks]].reset_index(drop=True)
            same = owner["clock"][ranks].to_numpy() != ranks
            clock["method"] = [
                f"same host clock as rank {c}" if s else m
                for c, s, m in zip(owner["clock"][ranks], same, clock["method"])
            ]
            clock["rank"] = ranks
        regions = mine[mine["rank"].isin(ranks)].rename(columns={"end_ns": "region_end_ns"})
        aligned.append(
            time_collectives(part, clock, regions[["rank", "step", "start_ns", "region_end_ns"]])
        )
        clocks.append(clock)
    return pd.concat([a for a in aligned if len(a)] or aligned[:1], ignore_index=True), clocks


def _solve(part: pd.DataFrame, sessions: pd.DataFrame, tie_hosts: bool = True) -> pd.DataFrame:
    """solve_clocks over the true barriers of the collectives `part` (an all_to_all's
    members end apart) of the clocks `sessions`; one clock (one host) is the reference by
    itself."""
    if len(sessions) > 1:
        return solve_clocks(part[part["barrier"].astype(bool)], sessions, tie_hosts)[0]
    r = sessions.iloc[0]
    gpu = bool(part["on_gpu"].all())
    return pd.DataFrame(
        [
            {
                "rank": r["rank"],
                "utc_epoch_ns": r["utc_epoch_ns"],
                "offset_ns": 0,
                "drift_ppb": 0.0,
                "shift_ns": 0,
                "uncertainty_ns": 0,
                "spread_ns": 0,
                "max_residual_ns": 0,
                "collectives": int((part["rank"] == r["rank"]).sum()),
                "source": "kernel" if gpu else "nvtx",
                "method": "reference",
                "aligned": True,
                "host": r["host"],
            }
        ],
        columns=CLOCK_COLUMNS,
    )


def _clock_table(clocks: list[pd.DataFrame], runs: pd.DataFrame) -> pd.DataFrame:
    """One clock row per rank, its shift taking the rank's own times to run time: the
    solve's row when there was one solve, else (one per CUDA-timed step) their median
    offset and shift and their largest uncertainty."""
    source = {"nvtx": "host timers", "kernel": "cuda events"}
    if len(clocks) == 1:
        out = clocks[0].copy()
    else:
        every = (
            pd.concat(clocks, ignore_index=True) if clocks else pd.DataFrame(columns=CLOCK_COLUMNS)
        )
        ok = every[every["aligned"].astype(bool)]
        out = ok.groupby("rank", as_index=False).agg(
            utc_epoch_ns=("utc_epoch_ns", "first"),
            offset_ns=("offset_ns", "median"),
            shift_ns=("shift_ns", "median"),
            uncertainty_ns=("uncertainty_ns", "max"),
            spread_ns=("spread_ns", "max"),
            max_residual_ns=("max_residual_ns", "max"),
            collectives=("collectives", "sum"),
            source=("source", "first"),
            host=("host", "first"),
            solves=("rank", "size"),
        )
        out = out.assign(
            drift_ppb=0.0,
            aligned=True,
            method=[
                f"one solve per sampled step ({n}): robust least squares over the step's "
                "collectives' ends"
                for n in out.pop("solves")
            ],
        )
        for c in ("offset_ns", "shift_ns"):
            out[c] = out[c].round().astype("int64")
    base = host_clocks(runs).drop_duplicates("rank").set_index("rank")
    out["shift_ns"] = out["shift_ns"] + out["rank"].map(base["delta_ns"])
    out["utc_epoch_ns"] = out["rank"].map(base["utc_epoch_ns"])
    first = runs.drop_duplicates("rank")
    missing = first[~first["rank"].isin(out["rank"])]
    unaligned = pd.DataFrame(
        {
            "rank": missing["rank"],
            "utc_epoch_ns": missing["utc_epoch_ns"],
            "offset_ns": 0,
            "drift_ppb": 0.0,
            "shift_ns": None,
            "uncertainty_ns": None,
            "spread_ns": None,
            "max_residual_ns": None,
            "collectives": 0,
            "source": "utc",
            "aligned": False,
            "method": "unaligned: no matched collective connects it to the reference rank",
            "host": missing["host"],
        }
    )
    out = pd.concat([out, unaligned] if len(unaligned) else [out], ignore_index=True)
    out["source"] = out["source"].replace(source)
    for column, default in (("clock", None), ("jump_at_ns", None), ("jump_ns", 0)):
        if column not in out:  # solved per step: no one clock, no jump
            out[column] = default
    return out.sort_values("rank").reset_index(drop=True)[CLOCK_COLUMNS]


def _phases(samples: Samples) -> pd.DataFrame:
    """Per rank, step and phase: host time (less calls into collectives) and, on CUDA
    steps, GPU time (the events' span less the collectives inside it)."""
    phases = samples.phases.dropna(subset=["start_ns", "end_ns"]).merge(
        samples.steps[["rank", "segment", "step", "timer"]], on=["rank", "segment", "step"]
    )
    phases = phases.reset_index(drop=True)
    calls = samples.collectives.dropna(subset=["start_ns", "end_ns"])
    inside = phases.reset_index().merge(calls, on=["rank", "segment", "step"], suffixes=("", "_c"))
    inside = inside[
        (inside["start_ns_c"] >= inside["start_ns"]) & (inside["end_ns_c"] <= inside["end_ns"])
    ]
    in_calls = (inside["end_ns_c"] - inside["start_ns_c"]).groupby(inside["index"]).sum()
    span = phases["end_ns"] - phases["start_ns"]
    gpu = (span - in_calls.reindex(phases.index, fill_value=0)).clip(lower=0)
    return phases.assign(
        pid=0,
        tid=0,
        gpu_ns=gpu.where(phases["timer"] == "cuda", 0),
        host_ns=phases["host_ns"].fillna(0).clip(lower=0),
    )


def _own_answer(samples: Samples, steps: pd.DataFrame, strag: list[dict]) -> dict:
    """The samples section (step times per rank, windows, captures), the worst steps and
    the straggler's window."""
    times = [
        {"step": int(r.step), "rank": int(r.rank), "duration": figure(int(r.duration), NS)}
        for r in steps.sort_values(["step", "rank"]).itertuples()
    ]
    timers = " and ".join(
        f"{TIMERS[t]} on {_ranks(sorted(set(g['rank'])))}" for t, g in steps.groupby("timer")
    )
    worst = steps.sort_values(["duration", "rank", "step"], ascending=[False, True, True]).head(3)
    total = next((r for r in strag if r["step"] == "all"), None)
    window = _window(total, strag, sorted(set(steps["step"]))) if total else None
    tables = [
        {
            "id": "step_times",
            "title": f"Step time per sampled step and rank ({timers})",
            "rows": times,
        }
    ]
    if window is not None:
        tables.append(
            {
                "id": "slow_windows",
                "title": "Where the straggler is slow: runs of "
                "sampled steps, with the sampled steps just before and after (not slow)",
                "rows": [
                    {"rank": window["rank"], "phase": window["phase"], "kind": window["kind"], **w}
                    for w in window["windows"]
                ],
            }
        )
    if len(samples.captures):
        taken = samples.captures.drop_duplicates("n").astype(object).to_dict("records")
        tables.append(
            {
                "id": "captures",
                "title": "Capture windows opened by launch --capture-when",
                "rows": taken,
            }
        )
    section = {
        "id": "samples",
        "title": "Sampled steps: step time per rank over the run",
        "verdict": None,
        "recommendations": [],
        "tables": tables,
        "cannot_answer": [],
        "notes": list(samples.notes),
    }
    return {
        "section": section,
        "window": window,
        "steps": steps,
        "worst_steps": [
            {
                "rank": int(r.rank),
                "device": None,
                "step": int(r.step),
                "duration": figure(int(r.duration), NS),
            }
            for r in worst.itertuples()
        ],
    }


def _window(total: dict, strag: list[dict], sampled: list[int]) -> dict | None:
    """Where the straggler is slow: its phase's slow steps (else the steps the others
    waited for it) over the sampled steps with matched collectives."""
    observed = sorted(r["step"] for r in strag if r["step"] != "all") or sampled
    said = total.get("slow_steps") or total.get("affected_steps")
    if not said:
        return None
    found = episodes([int(s) for s in said.split(",")], observed)
    return {"rank": total["rank"], "phase": total.get("phase"), **found}


def _with_window(finding: dict, answer: dict) -> dict:
    window = answer["window"]
    if finding["id"] != "straggler" or window is None or window["rank"] != finding["ranks"][0]:
        return finding
    finding = {**finding, "persistence": window["kind"], "windows": window["windows"]}
    finding["text"] += f" Its slowness is {describe(window, 'sampled steps')}."
    return finding


def _capture(answer: dict, findings: list[dict], paths: list[Path]) -> dict | None:
    """The command that captures the straggler's slow window with nsys, on it and on the
    rank that waits for it the longest; for an intermittent one also the command that
    catches it in the act (launch --capture-when)."""
    window = answer["window"]
    finding = next((f for f in findings if f["id"] == "straggler"), None)
    if window is None or finding is None or not window["windows"]:
        return None
    longest = max(window["windows"], key=lambda w: (w["steps"], -w["first"]))
    start = longest["first"]
    waits = finding["evidence"]["waiting_ranks"]
    partner = waits[0] if waits else None
    ranks = sorted({window["rank"], *([partner] if partner is not None else [])})
    command, out, kinds = _launched(paths)
    rest = ["--"] + (command or ["<your training command>"])
    steps = f"{start}:{start + CAPTURE_STEPS}"
    annotate = ["--annotate", ",".join(kinds)] if kinds else []
    head = ["nsyswrap", "launch", "--ranks", ",".join(map(str, ranks)), "--steps", steps, *annotate]
    capture = {
        "ranks": ranks,
        "steps": steps,
        "command": shlex.join(head + (["--out", f"{out}-capture"] if out else []))
        + " "
        + shlex.join(rest),
        "why": f"rank {window['rank']} is slow"
        + (f" in `{window['phase']}`" if window["phase"] else "")
        + f" from sampled step {start}"
        + (f"; rank {partner} waits for it the longest" if partner is not None else ""),
        "when": None,
    }
    if window["kind"] == "intermittent":
        rule = f"slower={_slower(answer, window):g},steps={CAPTURE_STEPS}"
        when = [
            "nsyswrap",
            "launch",
            "--ranks",
            ",".join(map(str, ranks)),
            "--capture-when",
            rule,
            *annotate,
        ]
        capture["when"] = (
            shlex.join(when + (["--out", f"{out}-when"] if out else [])) + " " + shlex.join(rest)
        )
    return capture


def _slower(answer: dict, window: dict) -> float:
    """K for --capture-when: halfway from the usual step time to that of the slow steps."""
    steps = answer["steps"]
    slow = {s for w in window["windows"] for s in steps["step"] if w["first"] <= s <= w["last"]}
    per_step = steps.groupby("step")["duration"].max()
    usual = per_step[~per_step.index.isin(slow)]
    if usual.empty or not slow:
        return 1.5
    ratio = per_step[per_step.index.isin(slow)].median() / usual.median()
    return max(1.1, round(1 + (ratio - 1) / 2, 1))


def _launched(paths: list[Path]) -> tuple[list[str] | None, str | None, list[str]]:
    """The training command, run directory and --annotate kinds of the `nsyswrap launch
    --sample` that wrote the sample files, from the manifest beside them (None, None, []
    without one): the capture keeps the same steps and phases (and samples too)."""
    folder = Path(paths[0]).parent
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
        command = [str(c) for c in manifest["command"]]
        kinds = [str(k) for k in manifest.get("options", {}).get("annotate") or []]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None, None, []
    return command, str(folder), kinds
