"""What part of a run the report analyses: the window and how steps are found."""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass

from nsyswrap.errors import NsysWrapError

DEFAULT_STEP_PATTERN = "step:%"
DTYPES = ("bf16", "fp16", "fp8", "tf32", "fp32")
"""Data types the peak table (compute.peaks) has a figure for, the default first."""
_STEPS = re.compile(r"^\s*(-?\d+)?\s*:\s*(-?\d+)?\s*$")


@dataclass(frozen=True)
class ReportOptions:
    """window_nvtx: LIKE pattern of NVTX ranges bounding the window; step_pattern: LIKE
    pattern of step ranges; step_from/step_to: half-open range of step numbers;
    whole_capture: analyse each device's first to last GPU activity even when the capture
    has steps (the report's default window is its steps: nsyswrap.report.window). The MFU
    inputs (compute.mfu): flops_per_step, or model_params and tokens_per_step (6 x P x T),
    per GPU; peak_tflops overrides the peak table; dtype picks its column. outliers_after:
    the steps after the window that it set apart as outliers (nsyswrap.report.window); the
    replay still covers them, so stall findings count them."""

    window_nvtx: str | None = None
    step_pattern: str = DEFAULT_STEP_PATTERN
    step_from: int | None = None
    step_to: int | None = None
    whole_capture: bool = False
    flops_per_step: float | None = None
    model_params: float | None = None
    tokens_per_step: float | None = None
    peak_tflops: float | None = None
    dtype: str = DTYPES[0]
    outliers_after: tuple[int, ...] = ()

    def __post_init__(self):
        _check_mfu_inputs(self)

    @classmethod
    def parse(
        cls,
        steps: str | None = None,
        window_nvtx: str | None = None,
        step_pattern: str = DEFAULT_STEP_PATTERN,
        whole_capture: bool = False,
        **mfu,
    ) -> ReportOptions:
        """Options from command-line text; `steps` is "FROM:TO" (either side may be empty);
        `mfu`: flops_per_step, model_params, tokens_per_step, peak_tflops, dtype."""
        step_from = step_to = None
        if steps is not None:
            m = _STEPS.match(steps)
            if not m or steps.strip() == ":":
                raise NsysWrapError(
                    f"--steps {steps}",
                    "is not FROM:TO",
                    "write e.g. --steps 2:5 for steps 2, 3 and 4",
                )
            step_from, step_to = (int(g) if g is not None else None for g in m.groups())
            if step_from is not None and step_to is not None and step_to <= step_from:
                raise NsysWrapError(
                    f"--steps {steps}",
                    "selects no step (TO must exceed FROM)",
                    "write e.g. --steps 2:5 for steps 2, 3 and 4",
                )
        if not step_pattern:
            raise NsysWrapError(
                "--step-pattern", "is empty", "pass e.g. 'step:%' or 'ProfilerStep#%'"
            )
        if whole_capture and (steps is not None or window_nvtx):
            raise NsysWrapError(
                "--whole-capture",
                "asks for the whole capture, --steps and --window-nvtx for a part of it",
                "pass one of them",
            )
        if isinstance(mfu.get("dtype"), str):
            mfu["dtype"] = mfu["dtype"].lower()
        return cls(window_nvtx or None, step_pattern, step_from, step_to, whole_capture, **mfu)

    @classmethod
    def from_params(cls, params: dict) -> ReportOptions:
        """The window of a report's `options` key (window_params)."""
        return cls(
            **{k: params.get(k) for k in ("window_nvtx", "step_from", "step_to")},
            step_pattern=params.get("step_pattern") or DEFAULT_STEP_PATTERN,
        )

    def selects(self, step: int) -> bool:
        """Whether step number `step` is in [step_from, step_to)."""
        return (self.step_from is None or step >= self.step_from) and (
            self.step_to is None or step < self.step_to
        )

    @property
    def limits_window(self) -> bool:
        """True when the window is narrower than each device's GPU activity."""
        return bool(self.window_nvtx) or self.step_from is not None or self.step_to is not None

    def window_params(self) -> dict:
        """The window parameters every metric module takes."""
        return {
            "window_nvtx": self.window_nvtx,
            "step_pattern": self.step_pattern,
            "step_from": self.step_from,
            "step_to": self.step_to,
        }

    def mfu_params(self) -> dict:
        """The parameters of compute.mfu besides the window."""
        return {
            "flops_per_step": self.flops_per_step,
            "model_params": self.model_params,
            "tokens_per_step": self.tokens_per_step,
            "peak_tflops": self.peak_tflops,
            "dtype": self.dtype,
        }

    def all_params(self) -> dict:
        """Every option (the key of the report's stored answer)."""
        return asdict(self)

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


def _check_mfu_inputs(o: ReportOptions) -> None:
    """The FLOPs come one way (a figure, or parameters and tokens together), every figure
    is positive, and the peak table has the data type."""
    flags = {
        "flops_per_step": "--flops-per-step",
        "model_params": "--model-params",
        "tokens_per_step": "--tokens-per-step",
        "peak_tflops": "--peak-tflops",
    }
    for name, flag in flags.items():
        value = getattr(o, name)
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise NsysWrapError(
                f"{flag} {value}",
                "is not a positive number",
                f"give {flag} as a number above 0, e.g. 1.5e15",
            )
    if o.flops_per_step is not None and (o.model_params, o.tokens_per_step) != (None, None):
        raise NsysWrapError(
            "--flops-per-step with --model-params/--tokens-per-step",
            "gives the FLOPs per step twice",
            "give --flops-per-step N, or --model-params P --tokens-per-step T "
            "(FLOPs = 6 x P x T), not both",
        )
    if (o.model_params is None) != (o.tokens_per_step is None):
        given, other = (
            ("--model-params", "--tokens-per-step")
            if o.model_params is not None
            else ("--tokens-per-step", "--model-params")
        )
        raise NsysWrapError(
            given,
            f"needs {other} (FLOPs per step = 6 x params x tokens)",
            f"add {other}, or give --flops-per-step N instead",
        )
    if o.dtype not in DTYPES:
        raise NsysWrapError(
            f"--dtype {o.dtype}",
            "is not a data type of the peak table",
            f"choose one of {', '.join(DTYPES)}",
        )
