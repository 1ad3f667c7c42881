"""`nsyswrap report` over sample files: the nsys path's cross-rank answer, from samples.

The sampled collectives become the six cross-rank run objects the nsys path computes
(nsyswrap.sample.objects), the same `sql/crossrank` modules (stragglers, waits, comm split,
bandwidth) run over them and the same section and diagnosis code words the answer: its
figures are the nsys path's figures over the sampled steps. What samples cannot say
(kernels, idle-gap causes) is said as such.

On top: step times per rank over the sampled steps, whether the straggler's slowness is
persistent or intermittent (nsyswrap.report.diagnosis.persistence) and in which window of steps,
and the `nsyswrap launch` command that captures it with nsys.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import replace
from pathlib import Path

import pandas as pd

from nsyswrap.errors import note
from nsyswrap.report.cross_rank import crossrank_answer
from nsyswrap.report.cross_rank import crossrank_modules as report_crossrank_modules
from nsyswrap.report.diagnosis import Finding, decide
from nsyswrap.report.diagnosis.persistence import describe
from nsyswrap.report.diagnosis.rules import straggler
from nsyswrap.report.diagnosis.words import ranks as rank_list
from nsyswrap.report.document import placed
from nsyswrap.report.figures import NS, figure, rows
from nsyswrap.report.options import ReportOptions
from nsyswrap.report.window import Window, window_of_steps
from nsyswrap.sample.objects import SOURCE, crossrank_modules
from nsyswrap.sample.read import Samples, read_samples
from nsyswrap.storage.cache_keys import nsyswrap_version

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
    samples = read_samples(paths)
    for said in samples.notes:
        note(said)
    window = _steps_window(samples, options or ReportOptions())
    options = window.options
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
        "window": window.as_json(),
        "sections": [answer["section"], crossrank],
    }
    d = decide(report)
    findings = [_with_window(f, answer) for f in d.findings]
    said = (d.crossrank_label or crossrank.get("verdict") or {}).get("label")
    diagnosis = {
        **d.as_json(),
        "findings": [f.as_json() for f in findings],
        "worst_steps": answer["worst_steps"],
        "recommendations": [f.advice for f in findings if f.advice],
        "cannot_answer": CANNOT_ANSWER,
    }
    if not findings:
        diagnosis["headline"] = (said or "not enough data").upper()
    return {
        **report,
        "sections": placed(report["sections"], d),
        "diagnosis": diagnosis,
        "capture": _capture(answer, findings, paths),
    }


def add_samples(report: dict, paths: list[Path], options: ReportOptions) -> dict:
    """An nsys report with the samples of the same run beside it: their section (the
    samples' cross-rank tables included) and finding, and the capture command."""
    samples = read_samples(paths)
    for said in samples.notes:
        note(said)
    crossrank, answer = _answer(samples, options)
    d = decide({**report, "sections": [answer["section"], crossrank]})
    section = {
        **answer["section"],
        "verdict": d.crossrank_label or crossrank["verdict"],
        "tables": answer["section"]["tables"] + crossrank["tables"],
    }
    findings = [
        replace(f, scope="samples", text="Over the sampled steps: " + f.text)
        for f in (_with_window(f, answer) for f in d.findings)
    ]
    diagnosis = report["diagnosis"]
    return {
        **report,
        "sections": [*report["sections"], section],
        "diagnosis": {
            **diagnosis,
            "findings": diagnosis["findings"] + [f.as_json() for f in findings],
        },
        "capture": _capture(answer, findings, paths),
    }


def _answer(samples: Samples, options: ReportOptions) -> tuple[dict, dict]:
    """(the cross-rank section, what the samples say on their own)."""
    steps = _in_window(samples.steps, options).dropna(subset=["start_ns", "end_ns"])
    steps = steps.assign(duration=steps["end_ns"] - steps["start_ns"])
    wanted = report_crossrank_modules(options)
    with crossrank_modules(samples) as module:
        crossrank = crossrank_answer(
            lambda key: module(wanted[key][0], **wanted[key][1]),
            options,
            samples.runs["rank"].nunique(),
            lambda: int(steps.groupby("step")["duration"].median().sum()),
        )
    strag = rows({"sections": [crossrank]}, "crossrank", "stragglers")
    return crossrank, _own_answer(samples, steps, strag)


def _steps_window(samples: Samples, options: ReportOptions) -> Window:
    """The sampled steps' window: leading warm-up steps set apart as in an nsys report's
    (nsyswrap.report.window), by the sampled steps' durations; slow steps later on are what
    the samples are for, so none is set apart as an outlier."""
    steps = samples.steps.dropna(subset=["start_ns", "end_ns"])
    steps = steps.assign(duration_ns=steps["end_ns"] - steps["start_ns"])
    window = window_of_steps(steps, options, "samples")
    return replace(window, outliers=tuple(o for o in window.outliers if o["why"] == "warm-up"))


def _in_window(frame: pd.DataFrame, options: ReportOptions) -> pd.DataFrame:
    keep = pd.Series(True, index=frame.index)
    if options.step_from is not None:
        keep &= frame["step"] >= options.step_from
    if options.step_to is not None:
        keep &= frame["step"] < options.step_to
    return frame[keep]


def _own_answer(samples: Samples, steps: pd.DataFrame, strag: list[dict]) -> dict:
    """The samples section (step times per rank, windows, captures), the worst steps and
    the straggler's window."""
    times = [
        {"step": int(r.step), "rank": int(r.rank), "duration": figure(int(r.duration), NS)}
        for r in steps.sort_values(["step", "rank"]).itertuples()
    ]
    timers = " and ".join(
        f"{TIMERS[t]} on {rank_list(sorted(set(g['rank'])))}" for t, g in steps.groupby("timer")
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
    found = straggler.episodes_of(total, observed)
    return {"rank": total["rank"], "phase": total.get("phase"), **found} if found else None


def _with_window(finding: Finding, answer: dict) -> Finding:
    window = answer["window"]
    if finding.id not in straggler.IDS or window is None or window["rank"] != finding.ranks[0]:
        return finding
    return replace(
        finding,
        text=finding.text + f" Its slowness is {describe(window, 'sampled steps')}.",
        extra={"persistence": window["kind"], "windows": window["windows"]},
    )


def _capture(answer: dict, findings: list[Finding], paths: list[Path]) -> dict | None:
    """The command that captures the straggler's slow window with nsys, on it and on the
    rank that waits for it the longest; for an intermittent one also the command that
    catches it in the act (launch --capture-when)."""
    window = answer["window"]
    finding = next((f for f in findings if f.id in straggler.IDS), None)
    if window is None or finding is None or not window["windows"]:
        return None
    longest = max(window["windows"], key=lambda w: (w["steps"], -w["first"]))
    start = longest["first"]
    waits = finding.evidence["waiting_ranks"]
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
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        return None, None, []
    return command, str(folder), kinds
