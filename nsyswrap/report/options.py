"""What part of a run the report analyses: the window and how steps are found."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from nsyswrap.errors import NsysWrapError

DEFAULT_STEP_PATTERN = "step:%"
_STEPS = re.compile(r"^\s*(-?\d+)?\s*:\s*(-?\d+)?\s*$")


@dataclass(frozen=True)
class ReportOptions:
    """window_nvtx: LIKE pattern of NVTX ranges bounding the window; step_pattern: LIKE
    pattern of step ranges; step_from/step_to: half-open range of step numbers;
    whole_capture: analyse each device's first to last GPU activity even when the capture
    has steps (the report's default window is its steps: nsyswrap.report.window)."""

    window_nvtx: str | None = None
    step_pattern: str = DEFAULT_STEP_PATTERN
    step_from: int | None = None
    step_to: int | None = None
    whole_capture: bool = False

    @classmethod
    def parse(cls, steps: str | None = None, window_nvtx: str | None = None,
              step_pattern: str = DEFAULT_STEP_PATTERN,
              whole_capture: bool = False) -> ReportOptions:
        """Options from command-line text; `steps` is "FROM:TO" (either side may be empty)."""
        step_from = step_to = None
        if steps is not None:
            m = _STEPS.match(steps)
            if not m or steps.strip() == ":":
                raise NsysWrapError(f"--steps {steps}", "is not FROM:TO",
                                    "write e.g. --steps 2:5 for steps 2, 3 and 4")
            step_from, step_to = (int(g) if g is not None else None for g in m.groups())
            if step_from is not None and step_to is not None and step_to <= step_from:
                raise NsysWrapError(f"--steps {steps}", "selects no step (TO must exceed FROM)",
                                    "write e.g. --steps 2:5 for steps 2, 3 and 4")
        if not step_pattern:
            raise NsysWrapError("--step-pattern", "is empty",
                                "pass e.g. 'step:%' or 'ProfilerStep#%'")
        if whole_capture and (steps is not None or window_nvtx):
            raise NsysWrapError("--whole-capture", "asks for the whole capture, --steps and "
                                "--window-nvtx for a part of it", "pass one of them")
        return cls(window_nvtx or None, step_pattern, step_from, step_to, whole_capture)

    @classmethod
    def from_params(cls, params: dict) -> ReportOptions:
        """The options of a report's `options` key (window_params)."""
        return cls(**{k: params.get(k) for k in ("window_nvtx", "step_from", "step_to")},
                   step_pattern=params.get("step_pattern") or DEFAULT_STEP_PATTERN)

    def selects(self, step: int) -> bool:
        """Whether step number `step` is in [step_from, step_to)."""
        return ((self.step_from is None or step >= self.step_from)
                and (self.step_to is None or step < self.step_to))

    @property
    def limits_window(self) -> bool:
        """True when the window is narrower than each device's GPU activity."""
        return bool(self.window_nvtx) or self.step_from is not None or self.step_to is not None

    def window_params(self) -> dict:
        """The window parameters every metric module takes."""
        params = asdict(self)
        del params["whole_capture"]
        return params

    def describe(self) -> str:
        """The window in words, for titles and reasons."""
        parts = []
        if self.window_nvtx:
            parts.append(f"NVTX ranges like {self.window_nvtx!r}")
        if self.step_from is not None or self.step_to is not None:
            lo = "" if self.step_from is None else self.step_from
            hi = "" if self.step_to is None else self.step_to
            parts.append(f"steps {lo}:{hi} (ranges like {self.step_pattern!r})")
        return " and ".join(parts) or "first to last GPU activity of each device"
