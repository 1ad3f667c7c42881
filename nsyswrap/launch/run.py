"""`nsyswrap launch`: run a training command with every selected rank under `nsys profile`.

Checks nsys and the output directory before anything starts, runs the rewritten command in
its own session (a Ctrl-C reaches it exactly once, through this process), waits for nsys to
finish writing, writes the manifest, exports the reports, and returns the training's exit code.
"""

from __future__ import annotations

import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from rich.console import Console

from nsyswrap.annotate.ranks import format_ranks, short_host
from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.launch.export import TMP_DIR, export_run
from nsyswrap.launch.manifest import (
    CAPTURE_FILES,
    MANIFEST,
    RANKS_DIR,
    SAMPLE_FILES,
    files_of_run,
    now_utc,
    rank_record_path,
    read_rank_records,
    write_json,
    write_manifest,
)
from nsyswrap.launch.nsys import find_nsys
from nsyswrap.launch.rank import rank_command
from nsyswrap.launch.rewrite import rewrite
from nsyswrap.storage.processes import alive
from nsyswrap.storage.safe_output import check_writable

WRAPPER_MODULE = "nsyswrap.launch.rank"
RUN_FILES = (MANIFEST, RANKS_DIR, "*.nsys-rep", "*.qdstrm", "*.sqlite", SAMPLE_FILES, CAPTURE_FILES)
NSYS_WAIT_S = 600  # how long to wait for nsys to finish a report after the launcher has exited


def plan(cfg: LaunchConfig) -> tuple[list[str], int | None]:
    """(the command to run, number of ranks if known): cfg.command with the wrapper inserted."""
    wrapper = [sys.executable, "-m", WRAPPER_MODULE, *cfg.wrapper_args(), "--"]
    argv, ranks = rewrite(list(cfg.command), wrapper)
    absent = sorted(r for r in cfg.ranks or () if ranks is not None and r >= ranks)
    if absent:
        raise NsysWrapError(
            f"--ranks {format_ranks(cfg.ranks)}",
            f"names rank(s) {format_ranks(absent)}, but the command starts "
            f"{ranks} rank(s), 0 to {ranks - 1}",
            f"choose ranks below {ranks}",
        )
    return argv, ranks


def rank_lines(cfg: LaunchConfig, argv: list[str], ranks: int | None) -> list[str]:
    """What each rank will run, for --dry-run."""
    rank_cfg = LaunchConfig.from_wrapper_args(argv[argv.index(WRAPPER_MODULE) + 1 :])
    shown = range(ranks) if ranks else sorted(cfg.ranks or {0})
    lines = []
    for rank in shown:
        command, env = rank_command(rank, rank_cfg, short_host())
        prefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
        lines.append(f"rank {rank}: {shlex.join(prefix + command)}")
    if not ranks:
        lines.append(
            "(other ranks: the same with their own number; unselected ranks run without nsys)"
        )
    return lines


def launch(cfg: LaunchConfig, console: Console | None = None) -> int:
    """Run the launch; returns the training's exit code (128+N when a signal N ended it)."""
    console = console or Console(stderr=True)
    argv, ranks = plan(cfg)
    if cfg.dry_run:
        console.print(f"launch: {shlex.join(argv)}", markup=False, highlight=False, soft_wrap=True)
        for line in rank_lines(cfg, argv, ranks):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        return 0
    nsys_path, nsys_version = find_nsys(cfg.nsys) if cfg.profiles else (None, None)
    _prepare_out(cfg)
    manifest = {
        "nsyswrap_version": _own_version(),
        "command": list(cfg.command),
        "launched": argv,
        "options": _options(cfg),
        "nsys": {"path": nsys_path, "version": nsys_version},
        "launcher_host": short_host(),
        "started_utc": now_utc(),
        "status": "running",
    }
    write_manifest(cfg.out, manifest)
    console.print(
        f"nsyswrap: profiling {_which_ranks(cfg)} into {cfg.out}", markup=False, highlight=False
    )
    try:
        code, stopped_by = _supervise(argv, Path(cfg.command[0]).name)
    except NsysWrapError as exc:  # the command never started: the manifest says so
        manifest.update(ended_utc=now_utc(), status="failed", note=str(exc))
        write_manifest(cfg.out, manifest)
        raise
    _wait_for_nsys(cfg.out, console)
    status = "interrupted" if stopped_by else ("ok" if code == 0 else "failed")
    manifest.update(ended_utc=now_utc(), exit_code=code, status=status, stopped_by=stopped_by)
    if "sample" in cfg.annotate:  # what the ranks' samplers wrote (launch --force may replace it)
        manifest.update(
            samples=sorted(p.name for p in cfg.out.glob(SAMPLE_FILES)),
            captures=sorted(p.name for p in cfg.out.glob(CAPTURE_FILES)),
        )
    write_manifest(cfg.out, manifest)
    if cfg.export and (any(cfg.out.glob("*.nsys-rep")) or any(cfg.out.glob("*.qdstrm"))):
        try:
            manifest["sqlite"] = [
                str(p)
                for p in export_run(
                    cfg.out, force=cfg.force, jobs=cfg.jobs, nsys=cfg.nsys, console=console
                )
            ]
        except NsysWrapError as exc:
            console.print(f"nsyswrap: export: {exc}", markup=False, highlight=False)
        write_manifest(cfg.out, manifest)
    # the main job is the report; reports not exported yet are exported first
    after = (
        f"nsyswrap export {cfg.out}, then nsyswrap report {cfg.out}"
        if cfg.profiles and not cfg.export
        else f"nsyswrap report {cfg.out}"
    )
    console.print(
        f"nsyswrap: {status}, exit code {code}; manifest: {cfg.out / MANIFEST}\nnext: {after}",
        markup=False,
        highlight=False,
    )
    return code


def _prepare_out(cfg: LaunchConfig) -> None:
    """Make --out ready: empty, or (with --force) emptied of exactly the files a previous
    launch's manifest lists; files nsyswrap did not write are never deleted."""
    existing = [p for pattern in RUN_FILES for p in cfg.out.glob(pattern)]
    if existing and not cfg.force:
        raise NsysWrapError(
            cfg.out,
            f"already holds a run ({existing[0].name})",
            "choose another --out, or pass --force to replace that run",
        )
    if existing:
        ours = files_of_run(cfg.out)
        strangers = [p for p in existing if p.name != RANKS_DIR and p not in ours]
        if strangers:
            raise NsysWrapError(
                strangers[0],
                f"is not listed in {cfg.out / MANIFEST} ({len(strangers)} such file(s)); "
                "--force replaces only the files of a run nsyswrap wrote",
                "move those files away, or choose another --out",
            )
        named = [f for a in cfg.command for f in (a, a.partition("=")[2]) if Path(f).is_file()]
        for path in sorted(p for p in ours if p.is_file() or p.is_symlink()):
            # (never a file the training command names: its script, its configuration)
            check_writable(path, True, named, option="--out", wrote_before=True)
        for path in ours:
            if path.is_file() or path.is_symlink():
                path.unlink(missing_ok=True)
        shutil.rmtree(cfg.out / TMP_DIR, ignore_errors=True)
        if (cfg.out / RANKS_DIR).is_dir() and not any((cfg.out / RANKS_DIR).iterdir()):
            (cfg.out / RANKS_DIR).rmdir()
    try:
        cfg.out.mkdir(parents=True, exist_ok=True)
        probe = tempfile.TemporaryFile(dir=cfg.out)
    except OSError as exc:
        raise NsysWrapError(
            cfg.out,
            f"cannot be written ({exc.strerror})",
            "choose an --out directory you can write to",
        ) from None
    probe.close()


def _supervise(argv: list[str], launcher: str) -> tuple[int, str | None]:
    """Run argv in its own session, passing SIGINT/SIGTERM/SIGHUP on to it; (exit code, signal
    name)."""
    try:
        child = subprocess.Popen(argv, start_new_session=True)
    except OSError as exc:
        raise NsysWrapError(
            argv[0], f"cannot be started ({exc.strerror})", "check the training command"
        ) from None
    stopped_by: list[str] = []

    def forward(signum, frame) -> None:
        stopped_by.append(signal.Signals(signum).name)
        # srun only prints its status on one SIGINT; SIGTERM makes it stop its tasks.
        child.send_signal(
            signal.SIGTERM if launcher == "srun" and signum == signal.SIGINT else signum
        )

    handled = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    try:
        previous = {sig: signal.signal(sig, forward) for sig in handled}
    except ValueError:  # not the main thread: signals stay where they are
        previous = {}
    try:
        code = child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return (128 - code if code < 0 else code), (stopped_by[0] if stopped_by else None)


def _wait_for_nsys(out: Path, console: Console) -> None:
    """Give nsys time to finish reports whose wrapper was killed (torchrun kills slow ranks after
    30 s); then record such ranks as killed."""
    host, deadline, told = short_host(), time.monotonic() + NSYS_WAIT_S, False
    while True:
        running = [
            r for r in read_rank_records(out) if r["host"] == host and r["status"] == "running"
        ]
        busy = [r for r in running if alive(r.get("child_pid"))]
        if not busy or time.monotonic() > deadline:
            break
        if not told:
            console.print(
                f"nsyswrap: waiting for nsys to finish the reports of rank(s) "
                f"{', '.join(str(r['rank']) for r in busy)}",
                markup=False,
                highlight=False,
            )
            told = True
        time.sleep(1)
    for record in running:
        if not alive(record["pid"]):
            write_json(
                rank_record_path(out, host, record["rank"]),
                {**record, "status": "killed", "ended_utc": now_utc()},
            )


def _options(cfg: LaunchConfig) -> dict:
    options = asdict(cfg)
    options.pop("command")
    options["ranks"] = sorted(cfg.ranks) if cfg.ranks is not None else "all"
    return options


def _which_ranks(cfg: LaunchConfig) -> str:
    if not cfg.profiles:
        return f"no rank (sampling every {cfg.sample_every}th step of every rank)"
    return "every rank" if cfg.ranks is None else "rank(s) " + format_ranks(cfg.ranks)


def _own_version() -> str:
    try:
        return version("nsyswrap")
    except PackageNotFoundError:
        return "unknown"
