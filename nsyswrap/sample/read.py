"""Reading sample files (`samples.rank<R>.jsonl`, nsyswrap.sample.schema) into frames.

Every line is checked against the schema; a line that is not a record stops the read
with one line naming the file and line, except the file's last line when it is cut
(no newline at its end: a job killed while writing), which is left out with a note. A
restarted job appends a segment (a new `run` record); a step sampled in two segments is
taken from the later one, with a note.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from nsyswrap.errors import NsysWrapError
from nsyswrap.sample import schema

STEP_COLUMNS = ["rank", "segment", "step", "timer", "utc_ns", "start_ns", "end_ns"]
PHASE_COLUMNS = ["rank", "segment", "step", "phase", "start_ns", "end_ns", "host_ns"]
COLLECTIVE_COLUMNS = [
    "rank",
    "segment",
    "step",
    "pg",
    "seq",
    "op",
    "bytes",
    "group_size",
    "start_ns",
    "end_ns",
    "is_async",
]
RUN_COLUMNS = [
    "rank",
    "segment",
    "host",
    "pid",
    "utc_epoch_ns",
    "monotonic_ns",
    "every",
    "start",
    "end",
    "path",
]
CAPTURE_COLUMNS = ["rank", "n", "start", "stop", "fired_by", "at_step", "step_ns", "median_ns"]


@dataclass
class Samples:
    """The records of a run's sample files, one frame per kind; times in ns on each rank's
    clock (ns since its segment's `utc_epoch_ns`)."""

    files: list[Path]
    runs: pd.DataFrame
    steps: pd.DataFrame
    phases: pd.DataFrame
    collectives: pd.DataFrame
    captures: pd.DataFrame
    ends: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def read_samples(paths: list[Path]) -> Samples:
    """Every record of the sample files `paths`, checked, as frames."""
    rows: dict[str, list] = {"run": [], "step": [], "phase": [], "collective": [], "capture": []}
    ends, notes, seen = [], [], {}
    for path in paths:
        rank = _read_file(Path(path), rows, ends, notes)
        if rank in seen:
            raise NsysWrapError(
                path,
                f"holds the samples of rank {rank}, as {seen[rank]} does",
                "give the sample files of one run, one per rank",
            )
        seen[rank] = path
    steps = pd.DataFrame(rows["step"], columns=STEP_COLUMNS)
    keep = steps.drop_duplicates(["rank", "step"], keep="last")
    if len(keep) < len(steps):
        twice = steps[steps.duplicated(["rank", "step"], keep="last")]
        notes.append(
            f"{len(twice)} step(s) were sampled twice (a restarted job: rank "
            f"{int(twice['rank'].iloc[0])} step {int(twice['step'].iloc[0])} first); "
            "the later samples are kept"
        )
    keep = _forward(keep, "step", notes)
    kept = keep[["rank", "segment", "step"]]
    key = ["rank", "segment", "step"]
    phases = pd.DataFrame(rows["phase"], columns=PHASE_COLUMNS).merge(kept, on=key)
    collectives = pd.DataFrame(rows["collective"], columns=COLLECTIVE_COLUMNS).merge(kept, on=key)
    phases, collectives = (
        _forward(phases, "phase", notes),
        _forward(collectives, "collective", notes),
    )
    return Samples(
        [Path(p) for p in paths],
        pd.DataFrame(rows["run"], columns=RUN_COLUMNS),
        keep.reset_index(drop=True),
        phases,
        collectives,
        pd.DataFrame(rows["capture"], columns=CAPTURE_COLUMNS),
        ends,
        notes,
    )


def _forward(frame: pd.DataFrame, what: str, notes: list) -> pd.DataFrame:
    """`frame` without the rows that end before they start (left out of every figure,
    with a note counting them): a time the sampler cannot have measured."""
    backward = frame["end_ns"].notna() & frame["start_ns"].notna()
    backward &= frame["end_ns"] < frame["start_ns"]
    if backward.any():
        first = frame[backward].iloc[0]
        notes.append(
            f"{int(backward.sum())} sampled {what}(s) end before they start (rank "
            f"{int(first['rank'])} step {int(first['step'])} first): left out of every figure"
        )
    return frame[~backward].reset_index(drop=True)


def _read_file(path: Path, rows: dict, ends: list, notes: list) -> int:
    """Append the records of one file to `rows`; its rank."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise NsysWrapError(
            path, f"cannot be read ({exc.strerror})", "check the path and its permissions"
        ) from None
    lines = data.split(b"\n")
    cut = lines.pop() if lines else b""  # after the last newline: empty, or a line cut short
    if cut:
        notes.append(
            f"{path}: its last line is cut short (the job was killed while writing?); "
            f"read up to the last complete record, line {len(lines)}"
        )
    rank, segment = None, -1
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        record = _decode(path, number, line)
        kind = record["kind"]
        if kind == "run":
            if rank is not None and record["rank"] != rank:
                raise NsysWrapError(
                    f"{path}:{number}",
                    f"starts a segment of rank {record['rank']} in a file of rank {rank}",
                    "keep one file per rank",
                )
            rank, segment = record["rank"], segment + 1
            rows["run"].append([rank, segment, *(record[c] for c in RUN_COLUMNS[2:-1]), str(path)])
        elif rank is None:
            raise NsysWrapError(
                f"{path}:{number}",
                "comes before the file's first `run` record",
                "give the sample file as the sampler wrote it",
            )
        elif kind == "step":
            _step_rows(rows, rank, segment, record)
        elif kind == "capture":
            rows["capture"].append([rank, *(record[c] for c in CAPTURE_COLUMNS[1:])])
        else:
            ends.append(
                {"rank": rank, "segment": segment, **{k: record[k] for k in schema.FIELDS["end"]}}
            )
    if rank is None:
        raise NsysWrapError(
            path,
            "holds no `run` record",
            "give a sample file the sampler wrote (samples.rank<R>.jsonl)",
        )
    return rank


def _decode(path: Path, number: int, line: bytes) -> dict:
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise NsysWrapError(
            f"{path}:{number}",
            "is not a JSON record"
            + (" (nested too deep)" if isinstance(exc, RecursionError) else ""),
            "give the sample file as the sampler wrote it",
        ) from None
    problem = schema.problem(record)
    if problem is not None:
        raise NsysWrapError(
            f"{path}:{number}",
            f"the record {problem}",
            "give a sample file this nsyswrap's sampler wrote (schema version "
            f"{schema.VERSION}; docs/sampling.md)",
        )
    return record


def _step_rows(rows: dict, rank: int, segment: int, record: dict) -> None:
    step = record["step"]
    rows["step"].append([rank, segment, *(record[c] for c in STEP_COLUMNS[2:])])
    rows["phase"] += (
        [rank, segment, step, p["name"], p["start_ns"], p["end_ns"], p["host_ns"]]
        for p in record["phases"]
    )
    rows["collective"] += (
        [
            rank,
            segment,
            step,
            c["pg"],
            c["seq"],
            c["op"],
            c["bytes"],
            c["size"],
            c["start_ns"],
            c["end_ns"],
            c["async"],
        ]
        for c in record["collectives"]
    )
