"""What `nsyswrap launch` was asked to do, and how the per-rank wrapper receives it."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, replace
from pathlib import Path

from nsyswrap.annotate.auto import parse_kinds
from nsyswrap.annotate.ranks import format_ranks, parse_ranks
from nsyswrap.annotate.steps import CaptureWindow, parse_window
from nsyswrap.errors import NsysWrapError
from nsyswrap.sample.capture import parse_rule

DEFAULT_TRACE = "cuda,nvtx,osrt"
MEMORY_ARG = "--cuda-memory-usage=true"  # nsys records every GPU memory allocation and free


@dataclass(frozen=True)
class LaunchConfig:
    """One launch: the training command and how its ranks are profiled."""

    command: tuple[str, ...]
    out: Path
    ranks: frozenset[int] | None = None  # None: every rank
    window: CaptureWindow | None = None  # None: the whole run
    trace: str = DEFAULT_TRACE
    nsys_args: tuple[str, ...] = ()
    annotate: tuple[str, ...] = ()
    force: bool = False
    export: bool = True
    jobs: int | None = None
    dry_run: bool = False
    nsys: str = "nsys"  # the nsys executable
    precompute: bool = (
        False  # each rank exports and precomputes its report (nsyswrap.launch.precompute)
    )
    sample_every: int = 10  # with "sample" in annotate: the sampler's every, start and end
    sample_start: int = 0
    sample_end: int | None = None
    capture_when: str | None = None  # the rule text (nsyswrap.sample.capture)

    @property
    def profiles(self) -> bool:
        """Whether any rank runs under nsys: not with --sample alone (no --ranks, --steps or
        --capture-when: sampling is all that was asked for)."""
        return (
            "sample" not in self.annotate
            or self.ranks is not None
            or self.window is not None
            or self.capture_when is not None
        )

    @classmethod
    def build(
        cls,
        command,
        *,
        out,
        ranks=None,
        steps=None,
        every=None,
        trace=DEFAULT_TRACE,
        nsys_args=(),
        annotate="",
        memory=False,
        sample=False,
        sample_every=None,
        sample_steps=None,
        capture_when=None,
        **rest,
    ) -> LaunchConfig:
        """From option text as a person types it (ranks '0,1', steps '100:110', annotate
        'modules,steps'); `memory` adds nsys's --cuda-memory-usage=true (GPU memory events)."""
        if not command:
            raise NsysWrapError(
                "nsyswrap launch",
                "no training command was given",
                "put it after --, e.g. nsyswrap launch -- torchrun --nproc-per-node 2 train.py",
            )
        if command[0].startswith("-"):
            raise NsysWrapError(
                command[0],
                "is not an option of nsyswrap launch",
                "see nsyswrap launch --help, and put the training command after --",
            )
        if rest.get("precompute") and rest.get("export") is False:
            raise NsysWrapError("--precompute", "needs the export", "leave out --no-export")
        if every is not None and steps is None:
            raise NsysWrapError("--every", "needs a step window", "add --steps START:STOP")
        for arg in nsys_args:
            if arg.startswith(("-o", "--output")) or not arg.startswith("--") or "=" not in arg:
                raise NsysWrapError(
                    f"--nsys-arg {arg}",
                    "is not an nsys option in --name=value form "
                    "(or it sets the report name, which nsyswrap chooses)",
                    "write e.g. --nsys-arg=--cuda-memory-usage=true; use --out DIR for the reports",
                )
        if memory and not any(a.startswith("--cuda-memory-usage=") for a in nsys_args):
            nsys_args = (*nsys_args, MEMORY_ARG)
        kinds = parse_kinds(annotate or "")
        window = parse_window(steps, every) if steps else None
        if window is not None and "steps" not in kinds:
            kinds = parse_kinds(",".join((*kinds, "steps")))  # the window follows step ranges
        if capture_when is not None:
            if window is not None:
                raise NsysWrapError(
                    "--capture-when", "and --steps both set the capture window", "use one of them"
                )
            parse_rule(capture_when)
        if sample or any(x is not None for x in (sample_every, sample_steps, capture_when)):
            kinds = parse_kinds(",".join((*kinds, "sample")))
        sampling = _sampling(sample_every, sample_steps)
        return cls(
            command=tuple(command),
            out=Path(out).absolute(),
            ranks=parse_ranks(ranks) if ranks else None,
            window=window,
            trace=trace,
            nsys_args=tuple(nsys_args),
            annotate=kinds,
            capture_when=capture_when,
            **sampling,
            **rest,
        )

    def wrapper_args(self) -> list[str]:
        """Options that give the per-rank wrapper this configuration (see `from_wrapper_args`)."""
        args = ["--out", str(self.out), "--trace", self.trace, "--nsys", self.nsys]
        if self.ranks is not None:
            args += ["--ranks", format_ranks(self.ranks)]  # (short: argv has a size limit)
        if self.window is not None:
            args += ["--steps", f"{self.window.start}:{self.window.stop}"]
            if self.window.every:
                args += ["--every", str(self.window.every)]
        if self.annotate:
            args += ["--annotate", ",".join(self.annotate)]
        if "sample" in self.annotate:
            end = "" if self.sample_end is None else self.sample_end
            args += [
                "--sample-every",
                str(self.sample_every),
                "--sample-steps",
                f"{self.sample_start}:{end}",
            ]
        if self.capture_when is not None:
            args += ["--capture-when", self.capture_when]
        args += [f"--nsys-arg={a}" for a in self.nsys_args]
        return (
            args
            + (["--force"] if self.force else [])
            + (["--precompute"] if self.precompute else [])
        )

    @classmethod
    def from_wrapper_args(cls, argv: list[str]) -> LaunchConfig:
        parser = argparse.ArgumentParser(prog="nsyswrap.launch.rank")
        for name in (
            "--out",
            "--trace",
            "--nsys",
            "--ranks",
            "--steps",
            "--every",
            "--annotate",
            "--sample-every",
            "--sample-steps",
            "--capture-when",
        ):
            parser.add_argument(name)
        parser.add_argument("--nsys-arg", action="append", default=[])
        parser.add_argument("--force", action="store_true")
        parser.add_argument("--precompute", action="store_true")
        parser.add_argument("command", nargs=argparse.REMAINDER)
        ns = parser.parse_args(argv)
        command = ns.command[1:] if ns.command[:1] == ["--"] else ns.command
        config = cls.build(
            command,
            out=ns.out,
            ranks=ns.ranks,
            steps=ns.steps,
            every=ns.every,
            trace=ns.trace,
            nsys_args=ns.nsys_arg,
            annotate=ns.annotate,
            force=ns.force,
            precompute=ns.precompute,
            sample_every=ns.sample_every,
            sample_steps=ns.sample_steps,
            capture_when=ns.capture_when,
        )
        return replace(config, nsys=ns.nsys)


def _sampling(every, steps) -> dict:
    """The sampler's every, start and end from option text (--sample-every N,
    --sample-steps A:B)."""
    out = {}
    if every is not None:
        if not str(every).isdigit() or int(every) < 1:
            raise NsysWrapError(
                f"--sample-every {every}",
                "is not a whole number of steps >= 1",
                "write e.g. --sample-every 10",
            )
        out["sample_every"] = int(every)
    if steps is not None:
        start, colon, end = str(steps).partition(":")
        start, end = start.strip() or "0", end.strip()
        bad_end = end and (not end.isdigit() or int(end) <= int(start))
        if not colon or not start.isdigit() or bad_end:
            raise NsysWrapError(
                f"--sample-steps {steps}",
                "is not a step window",
                "write START:STOP or START: (to the end), e.g. 100:",
            )
        out["sample_start"], out["sample_end"] = int(start), int(end) if end else None
    return out
