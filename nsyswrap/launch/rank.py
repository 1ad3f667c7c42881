"""The per-rank wrapper: `python -m nsyswrap.launch.rank <options> -- <program...>`.

It finds its rank in the launcher's environment, runs the program under `nsys profile` when
the rank is selected (as is otherwise), with the automatic-annotation environment; passes
SIGINT/SIGTERM/SIGHUP on to it once, so that nsys can still write its report; records itself
in <out>/ranks/; and exits with the program's exit code.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from nsyswrap.annotate.auto import VARIABLE as ANNOTATE_VARIABLE
from nsyswrap.annotate.ranks import env_rank, short_host
from nsyswrap.annotate.steps import EVERY_VARIABLE, STEPS_VARIABLE
from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.manifest import now_utc, rank_record_path, write_json
from nsyswrap.launch.nsys import (
    QDSTRM_FIX,
    file_sizes,
    nsys_argv,
    report_stem,
    rescue_qdstrm,
    stall_limit,
    tree_cpu_ticks,
    wait_or_stop,
)
from nsyswrap.sample.capture import VARIABLE as RULE_VARIABLE
from nsyswrap.sample.sampler import VARIABLE as SAMPLE_VARIABLE
from nsyswrap.storage.processes import alive

STARTUP_DIR = Path(__file__).resolve().parent.parent / "annotate" / "startup"
STARTED_VARIABLE = (
    "NSYSWRAP_STARTED"  # file that startup/sitecustomize.py creates when Python starts
)
NSYS_ATTEMPTS = 3  # nsys 2022.4 sometimes dies before starting the program on a busy machine


def is_profiled(rank: int, cfg: LaunchConfig) -> bool:
    return cfg.profiles and (cfg.ranks is None or rank in cfg.ranks)


def rank_command(
    rank: int, cfg: LaunchConfig, host: str, environ: Mapping[str, str] = os.environ
) -> tuple[list[str], dict[str, str]]:
    """(argv, environment variables to add) for this rank; cfg.command is the rank's program."""
    env = {}
    if cfg.annotate or is_profiled(rank, cfg):
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(STARTUP_DIR), environ.get("PYTHONPATH")) if p
        )
    if cfg.annotate:
        env[ANNOTATE_VARIABLE] = ",".join(cfg.annotate)
    if cfg.window is not None:
        env[STEPS_VARIABLE] = f"{cfg.window.start}:{cfg.window.stop}"
        if cfg.window.every:
            env[EVERY_VARIABLE] = str(cfg.window.every)
    if "sample" in cfg.annotate:
        env[SAMPLE_VARIABLE] = json.dumps(
            {
                "out_dir": str(cfg.out),
                "every": cfg.sample_every,
                "start": cfg.sample_start,
                "end": cfg.sample_end,
            }
        )
    if cfg.capture_when is not None:
        env[RULE_VARIABLE] = cfg.capture_when
    argv = nsys_argv(rank, cfg, host) if is_profiled(rank, cfg) else list(cfg.command)
    return argv, env


def reports_of(stem: Path) -> list[Path]:
    """The reports nsys wrote for one rank: stem.nsys-rep, or stem.1.nsys-rep, ... with repeated
    captures."""
    return sorted(
        p
        for p in stem.parent.glob(stem.name + "*.nsys-rep")
        if p.name == stem.name + ".nsys-rep" or p.name[len(stem.name) + 1 : -9].isdigit()
    )


def runs_python_with_site(program: list[str]) -> bool:
    """A Python interpreter without -I, -S or -E: its start shows through
    startup/sitecustomize.py."""
    if not Path(program[0]).name.startswith("python"):
        return False
    for arg in program[1:]:
        if not arg.startswith("-") or arg.startswith("--") or arg in ("-m", "-c"):
            break
        if set(arg[1:]) & set("ISE"):
            return False
    return True


class _Child:
    """The program (under nsys or not). A signal that reaches the wrapper goes to the Python program
    itself when its pid is known (nsys then ends the capture and writes the report as on a normal
    exit; a signal to nsys while it writes would lose the report), else to the child."""

    def __init__(self):
        self.process: subprocess.Popen | None = None
        self.started: Path | None = None
        self.signalled = False
        self.stuck: str | None = None
        self.observed = False  # the program's start shows through startup/sitecustomize.py
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, self._forward)

    def _forward(self, signum, frame) -> None:
        self.signalled = True
        program = self.program_pid()
        try:
            if program is not None:
                os.kill(program, signum)
            elif self.process is not None:
                self.process.send_signal(signum)
        except ProcessLookupError:
            pass  # it has ended already; nsys is finishing the report

    def _progress(self, stem: Path):
        """Changes while nsys works: the program runs, its CPU time grows (a program whose start
        cannot be seen), or the report files grow (nsys writing after the program ended)."""
        sizes = file_sizes(stem.parent.glob(stem.name + ".*"))
        program = self.program_pid()
        if program is not None:
            return (sizes, time.monotonic()) if alive(program) else sizes
        return sizes, (None if self.observed else tree_cpu_ticks(self.process.pid))

    def program_pid(self) -> int | None:
        try:
            return int(self.started.read_text())
        except (AttributeError, OSError, ValueError):
            return None

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        started: Path,
        on_start,
        stem: Path | None = None,
    ) -> int:
        """Run argv; with `stem` (under nsys), stop nsys when it makes no progress (`self.stuck`
        says so)."""
        self.started = started
        self.process = subprocess.Popen(
            argv, env={**os.environ, **env, STARTED_VARIABLE: str(started)}, start_new_session=True
        )
        on_start(self.process.pid)
        self.stuck = (
            None
            if stem is None
            else wait_or_stop(self.process, lambda: self._progress(stem), stall_limit())
        )
        code = self.process.wait()
        return (
            128 - code if code < 0 else code
        )  # killed by signal N -> 128 + N, as a shell reports it


def run_rank(cfg: LaunchConfig) -> int:
    """Run this rank's command (under nsys where it is profiled), keeping its record in
    the run directory up to date; its exit code (127: it could not start)."""
    rank, host = env_rank() or 0, short_host()
    argv, env = rank_command(rank, cfg, host)
    record_path = rank_record_path(cfg.out, host, rank)
    record = {
        "rank": rank,
        "host": host,
        "pid": os.getpid(),
        "profiled": is_profiled(rank, cfg),
        "command": argv,
        "started_utc": now_utc(),
        "status": "running",
    }
    stem = report_stem(cfg.out, host, rank)
    record_path.parent.mkdir(parents=True, exist_ok=True)
    child = _Child()
    child.observed = runs_python_with_site(list(cfg.command))
    code = _run_child(cfg, child, argv, env, record, record_path, stem)
    if code is None:
        return 127
    reports, note = _reports(cfg, child, stem, record["profiled"], rank)
    write_json(
        record_path,
        {
            **record,
            "child_pid": child.process.pid,
            "ended_utc": now_utc(),
            "exit_code": code,
            "status": "stuck" if child.stuck else ("ok" if code == 0 else "failed"),
            "reports": reports,
            "note": note,
        },
    )
    return code


def _run_child(
    cfg: LaunchConfig,
    child: _Child,
    argv: list[str],
    env: dict,
    record: dict,
    record_path: Path,
    stem: Path,
) -> int | None:
    """Run the command, again (up to NSYS_ATTEMPTS times) where nsys died before the
    program started; its exit code, or None where it could not start (recorded)."""
    rank = record["rank"]
    for attempt in range(1, NSYS_ATTEMPTS + 1):
        started = record_path.with_name(f".{record_path.stem}.started{attempt}")
        record["nsys_attempts"] = attempt
        try:
            code = child.run(
                argv,
                env,
                started,
                lambda pid: write_json(record_path, {**record, "child_pid": pid}),
                stem if record["profiled"] else None,
            )
        except OSError as exc:
            print(f"nsyswrap: rank {rank}: cannot start {argv[0]}: {exc}", file=sys.stderr)
            write_json(
                record_path,
                {**record, "ended_utc": now_utc(), "status": "failed", "exit_code": 127},
            )
            return None
        died_early = (
            record["profiled"]
            and code != 0
            and not child.signalled
            and not child.stuck
            and not started.exists()
            and runs_python_with_site(list(cfg.command))
            and not reports_of(stem)
            and not Path(f"{stem}.qdstrm").exists()
        )
        started.unlink(missing_ok=True)
        if not died_early:
            break
        _stop_stray_agents(started)
        if attempt < NSYS_ATTEMPTS:
            print(
                f"nsyswrap: rank {rank}: nsys ended (exit code {code}) before the program started; "
                "starting it again",
                file=sys.stderr,
            )
            time.sleep(random.uniform(1, 3))
    return code


def _reports(
    cfg: LaunchConfig, child: _Child, stem: Path, profiled: bool, rank: int
) -> tuple[list[str], str | None]:
    """The rank's reports (a .qdstrm nsys left rescued, each exported and its results
    computed with --precompute) and a note on what went wrong, if anything did."""
    qdstrm, note = Path(f"{stem}.qdstrm"), None
    if child.stuck:
        note = child.stuck
        print(f"nsyswrap: rank {rank}: {note}", file=sys.stderr)
    if profiled and not reports_of(stem) and qdstrm.exists():
        if rescue_qdstrm(qdstrm, cfg.nsys) is None:
            note = f"{qdstrm}: {QDSTRM_FIX}" + (f"; {note}" if note else "")
            print(f"nsyswrap: rank {rank}: {note}", file=sys.stderr)
    reports = [str(p) for p in reports_of(stem)] if profiled else []
    if cfg.precompute and reports:
        from nsyswrap.launch.precompute import export_and_precompute

        if failed := export_and_precompute(reports_of(stem), cfg.nsys):
            note = f"{note}; {failed}" if note else failed
            print(f"nsyswrap: rank {rank}: {failed}", file=sys.stderr)
    return reports, note


def _stop_stray_agents(started: Path) -> None:
    """An nsys that dies early leaves its agent process behind; stop the one of this attempt."""
    tag = f"{STARTED_VARIABLE}={started}".encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"--start-agent" in (proc / "cmdline").read_bytes() and tag in (
                proc / "environ"
            ).read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGTERM)
        except OSError:
            continue


def main(argv: list[str] | None = None) -> int:
    try:
        cfg = LaunchConfig.from_wrapper_args(sys.argv[1:] if argv is None else argv)
    except NsysWrapError as exc:
        print(f"nsyswrap: {exc}", file=sys.stderr)
        return 2
    return run_rank(cfg)


if __name__ == "__main__":
    sys.exit(main())
