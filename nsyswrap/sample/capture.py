"""`nsyswrap launch --capture-when RULE`: a running sampler opens an nsys capture window
when one of its sampled steps is much slower than usual.

RULE is `slower=K[,steps=N][,after=M][,captures=C][,lead=L]` or a JSON file with those
keys. The rule fires on a rank when a sampled step takes more than K times the median of
that rank's last WINDOW sampled steps, once it has M (default 10) of them. The rank that
fires first writes `<out>/capture.<n>.json` (created exclusively: one writer wins); every
rank watches for it at each step start, and the ranks running under nsys (launched with
`--capture-range=nvtx`) capture steps start..start+N-1 where start is L (default 2) steps
after the step the firing rank had begun: the ranks are in step with each other through
their collectives, so they all begin the window at the same step. At most C (default 1)
windows are taken, one after the other.
"""

from __future__ import annotations

import json
import os
from collections import deque
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import median

from nsyswrap.errors import NsysWrapError

VARIABLE = "NSYSWRAP_CAPTURE_WHEN"
WINDOW = 50  # sampled steps in the running median
WHERE = "--capture-when"


@dataclass(frozen=True)
class CaptureRule:
    slower: float
    steps: int = 5
    after: int = 10
    captures: int = 1
    lead: int = 2

    def text(self) -> str:
        """The rule as `--capture-when` takes it inline."""
        return ",".join(
            f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in asdict(self).items()
        )


def parse_rule(text: str) -> CaptureRule:
    """From inline `slower=2,steps=5` or the path of a JSON file with those keys."""
    path = Path(text)
    if "=" not in text and path.is_file():
        try:
            given = json.loads(path.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            raise NsysWrapError(
                path, f"is not a JSON capture rule ({exc})", 'write e.g. {"slower": 2, "steps": 5}'
            ) from None
        if not isinstance(given, dict):
            raise NsysWrapError(
                path, "is not a JSON object", 'write e.g. {"slower": 2, "steps": 5}'
            )
    else:
        given = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            name, eq, value = part.partition("=")
            if not eq:
                raise NsysWrapError(
                    f"{WHERE} {text}",
                    f"{part!r} is not NAME=VALUE",
                    "write e.g. slower=2,steps=5 (or the path of a JSON file)",
                )
            given[name.strip()] = value.strip()
    return _rule(given, text)


def _rule(given: dict, text: str) -> CaptureRule:
    known = {"slower": float, "steps": int, "after": int, "captures": int, "lead": int}
    unknown = sorted(set(given) - set(known))
    if unknown or "slower" not in given:
        said = f"unknown key {unknown[0]!r}" if unknown else "has no slower=K"
        raise NsysWrapError(
            f"{WHERE} {text}",
            said,
            f"use the keys {', '.join(known)}; slower=K (K > 1) is required",
        )
    try:
        values = {k: known[k](v) for k, v in given.items()}
    except (TypeError, ValueError):
        raise NsysWrapError(
            f"{WHERE} {text}", "has a value that is not a number", "write e.g. slower=2,steps=5"
        ) from None
    rule = CaptureRule(**values)
    if not rule.slower > 1 or min(rule.steps, rule.captures, rule.lead) < 1 or rule.after < 1:
        raise NsysWrapError(
            f"{WHERE} {text}",
            "needs slower > 1 and steps, after, captures, lead >= 1",
            "write e.g. slower=2,steps=5",
        )
    return rule


class Watch:
    """One rank's side of the rule: `fired(step, ns)` after each sampled step of its own,
    `window(step)` at each step start (the window to open now, if a trigger appeared)."""

    def __init__(self, rule: CaptureRule, folder: Path, rank: int):
        self.rule, self.folder, self.rank = rule, Path(folder), rank
        self.recent: deque[int] = deque(maxlen=WINDOW)
        self.n = 1  # the trigger file watched for
        self.busy_until = -1  # no new trigger before this step (a window is open or announced)

    def trigger_path(self, n: int) -> Path:
        return self.folder / f"capture.{n}.json"

    def fired(self, current: int, step: int, ns: int) -> dict | None:
        """Record sampled step `step` (`ns` long); when the rule fires, write the trigger
        for steps current+lead ... and return it (None otherwise, or when another rank
        wrote it first)."""
        history = list(self.recent)
        self.recent.append(ns)
        if (
            self.n > self.rule.captures
            or current < self.busy_until
            or len(history) < self.rule.after
        ):
            return None
        usual = median(history)
        if ns <= self.rule.slower * usual:
            return None
        start = current + self.rule.lead
        trigger = {
            "n": self.n,
            "start": start,
            "stop": start + self.rule.steps,
            "fired_by": self.rank,
            "at_step": step,
            "step_ns": ns,
            "median_ns": round(usual),
        }
        try:
            with open(self.trigger_path(self.n), "x") as fh:
                json.dump(trigger, fh)
        except FileExistsError:
            return None
        except OSError:
            return None
        return trigger

    def window(self, step: int) -> dict | None:
        """The trigger to act on at the start of `step`: its window moved to start no
        earlier than the next step; None when there is none (or it is over already)."""
        if self.n > self.rule.captures:
            return None
        path = self.trigger_path(self.n)
        if not os.path.exists(path):
            return None
        try:
            trigger = json.loads(path.read_text())
            start, stop = int(trigger["start"]), int(trigger["stop"])
        except (OSError, ValueError, RecursionError, KeyError, TypeError):
            return None  # being written: read at the next step
        self.n += 1
        start = max(start, step + 1)
        self.busy_until = stop
        return {**trigger, "start": start, "stop": stop} if start < stop else None
