"""The timeline's ideal track: per rank, the window's steps as the replay times them with
that rank idealised (crossrank.ideal_steps), as rows of crossrank.trace_events (category
`ideal`, track IDEAL_TRACK), so they are laid out, shifted and written as the recorded
events are."""

from __future__ import annotations

import pandas as pd

from nsyswrap.engine.queries import run_module
from nsyswrap.engine.run import Run
from nsyswrap.report.options import ReportOptions

IDEAL_TRACK = "ideal (replay)"
ARGS = ("ideal_ns", "recorded_ns", "replayed_ns", "saved_ns", "all_ideal_ns")
"""What an ideal slice's args hold (crossrank.ideal_steps' columns)."""


def ideal_events(run: Run, options: ReportOptions, events: pd.DataFrame) -> pd.DataFrame:
    """The ideal steps of the ranks of `events` that overlap their span, as trace event
    rows (empty where the replay did not run: no step ranges or no matched collective)."""
    ideal = run_module(
        run,
        "crossrank.ideal_steps",
        step_pattern=options.step_pattern,
        step_from=options.step_from,
        step_to=options.step_to,
    )
    end = ideal["start_ns"] + ideal["ideal_ns"]
    ideal = ideal[
        ideal["rank"].isin(events["rank"].unique())
        & (end > events["start_ns"].min())
        & (ideal["start_ns"] < (events["start_ns"] + events["dur_ns"]).max())
    ]
    return pd.DataFrame(
        {
            "rank": ideal["rank"],
            "track": IDEAL_TRACK,
            "name": "step " + ideal["step"].astype(str),
            "category": "ideal",
            "start_ns": ideal["start_ns"],
            "dur_ns": ideal["ideal_ns"],
            **{k: ideal[k] for k in ARGS},
        }
    ).reindex(columns=[*events.columns, *ARGS])
