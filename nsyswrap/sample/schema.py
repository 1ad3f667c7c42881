"""The sample file: `samples.rank<R>.jsonl`, one JSON object per line, schema version 1.

Every record has `v` (the schema version) and `kind`. Times (`*_ns`) are integer ns on the
rank's clock: ns since the `run` record's `utc_epoch_ns` (wall-clock UTC, ns since the Unix
epoch), as an nsys export's session clock. A file holds one or more segments, each opened
by a `run` record (a restarted job appends a new one); its other records follow it.
Integers are checked against their range (`RANGES`; else 64 bits): a time or duration
within 2^53 ns (104 days) either way, a UTC time up to 2^62 (the year 2116), a host's
monotonic clock up to 2^60; a value beyond is one line naming the file and line.

* `run`: `rank`, `host`, `pid`, `utc_epoch_ns`, `monotonic_ns` (the host's monotonic
  clock at the same instant: the ranks of one host share that clock, so their times
  compare exactly), `every`, `start`, `end` (null: no end), `ranks` (null: every rank),
  `flush_every`, `nsyswrap` (its version).
* `step`: one sampled step: `step`, `timer` (`cuda`: the times of the step, its phases
  and its collectives come from CUDA events on the GPU, placed on the rank's clock at the
  host time the step's first event was recorded; `host`: host timers), `utc_ns` (wall
  clock at the step's start: the anchor of a `cuda` step), `start_ns`, `end_ns`,
  `phases` (list of {`name`, `start_ns`, `end_ns`, `host_ns`: the phase's host time,
  less its calls into collectives}), `collectives` (list of {`op`, `pg`, `size`,
  `bytes`, `seq`: as the `coll:` ranges of annotate_collectives, `start_ns` (arrival),
  `end_ns` (completion: an async call's work done), `async`}), `dropped` (collectives
  left out past the per-step limit). A time the sampler could not resolve is null.
* `capture`: a capture window the rule of `launch --capture-when` opened: `n`, `start`,
  `stop` (steps start..stop-1), `fired_by` (rank), `at_step`, `step_ns`, `median_ns`.
* `end`: the sampler stopped: `sampled`, `skipped` (sampled steps left out: no free CUDA
  event), `unresolved` (steps written before every time was known).
"""

from __future__ import annotations

import re

VERSION = 1
FILE_PATTERN = "samples.rank*.jsonl"
FILE_RANK = re.compile(r"^samples\.rank(\d+)\.jsonl$")

INT, STR, BOOL, LIST = (int,), (str,), (bool,), (list,)
NULL_INT = (int, type(None))
# kind -> {field: accepted types}; every field is required.
FIELDS = {
    "run": {
        "rank": INT,
        "host": STR,
        "pid": INT,
        "utc_epoch_ns": INT,
        "monotonic_ns": INT,
        "every": INT,
        "start": INT,
        "end": NULL_INT,
        "ranks": (list, type(None)),
        "flush_every": INT,
        "nsyswrap": STR,
    },
    "step": {
        "step": INT,
        "timer": STR,
        "utc_ns": INT,
        "start_ns": NULL_INT,
        "end_ns": NULL_INT,
        "phases": LIST,
        "collectives": LIST,
        "dropped": INT,
    },
    "capture": {
        "n": INT,
        "start": INT,
        "stop": INT,
        "fired_by": INT,
        "at_step": INT,
        "step_ns": INT,
        "median_ns": INT,
    },
    "end": {"sampled": INT, "skipped": INT, "unresolved": INT},
}
PHASE = {"name": STR, "start_ns": NULL_INT, "end_ns": NULL_INT, "host_ns": NULL_INT}
COLLECTIVE = {
    "op": STR,
    "pg": STR,
    "size": INT,
    "bytes": INT,
    "seq": INT,
    "start_ns": NULL_INT,
    "end_ns": NULL_INT,
    "async": BOOL,
}
TIMERS = ("cuda", "host")
INT64 = (-(2**63), 2**63 - 1, "")  # every other integer field (sizes, counts, numbers)
# The time fields' ranges: any sum or difference the analysis makes of them fits in 64 bits
# (a UTC zero + a host's clock shift + a time), and a time is exact as a float64.
RANGES = {
    "rank": (0, 2**31 - 1, ""),  # 32-bit, as the views' rank
    "utc_epoch_ns": (0, 2**62, " (ns of UTC since 1970: up to the year 2116)"),
    "utc_ns": (0, 2**62, " (ns of UTC since 1970: up to the year 2116)"),
    "monotonic_ns": (0, 2**60, " (ns of the host's monotonic clock: up to 36 years)"),
    **dict.fromkeys(
        ("start_ns", "end_ns", "host_ns", "step_ns", "median_ns"),
        (-(2**53), 2**53, " (ns: 104 days either way)"),
    ),
}


def problem(record) -> str | None:
    """What is wrong with one decoded record, or None when it follows the schema."""
    if not isinstance(record, dict):
        return "is not a JSON object"
    if record.get("v") != VERSION:
        return f"has schema version {record.get('v')!r}, this nsyswrap reads version {VERSION}"
    fields = FIELDS.get(record.get("kind"))
    if fields is None:
        return f"has unknown kind {record.get('kind')!r}"
    said = _fields(record, fields, record["kind"])
    if said or record["kind"] != "step":
        return said
    if record["timer"] not in TIMERS:
        return f"has timer {record['timer']!r}, not one of {', '.join(TIMERS)}"
    for items, spec, what in (
        (record["phases"], PHASE, "phase"),
        (record["collectives"], COLLECTIVE, "collective"),
    ):
        for item in items:
            said = (
                _fields(item, spec, what)
                if isinstance(item, dict)
                else f"a {what} is not an object"
            )
            if said:
                return said
    return None


def _fields(record: dict, fields: dict, what: str) -> str | None:
    for name, types in fields.items():
        if name not in record:
            return f"{what} has no field {name!r}"
        value = record[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{what} field {name!r} is {type(value).__name__}, expected " + " or ".join(
                "null" if t is type(None) else t.__name__ for t in types
            )
        low, high, meaning = RANGES.get(name, INT64)
        if isinstance(value, int) and not isinstance(value, bool) and not low <= value <= high:
            shown = str(value) if len(str(value)) <= 24 else f"{str(value)[:20]}..."
            return f"{what} field {name!r} is {shown}, not an integer from {low} to {high}{meaning}"
    return None
