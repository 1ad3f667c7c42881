"""The nsys CLI: finding and checking it, one rank's `nsys profile` command, and .qdstrm rescue."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Hashable
from pathlib import Path

from nsyswrap.annotate.ranges import DOMAIN
from nsyswrap.annotate.steps import CAPTURE_RANGE
from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.config import LaunchConfig
from nsyswrap.sample.capture import parse_rule

MIN_VERSION = (2021, 1)
# nsyswrap's defaults for training; an --nsys-arg naming the same option replaces the default.
DEFAULTS = {"--sample": "none", "--cpuctxsw": "none"}
QDSTRM_FIX = (
    "nsys could not find its QdstrmImporter; on Debian link "
    "/usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64 to "
    "/usr/lib/nsight-systems/host-linux-x64 "
    "(.ci/install-nsys.sh does), or run `QdstrmImporter -i FILE.qdstrm` from the nsys installation"
)


STALL_VARIABLE = "NSYSWRAP_NSYS_STALL_S"
DEFAULT_STALL_S = 600.0  # nsys 2022.4 has hung for half an hour at the end of a capture
STOP_GRACE_S = 10.0  # at most, after SIGTERM, before SIGKILL


def stall_limit() -> float:
    """Seconds without progress after which a running nsys counts as stuck
    ($NSYSWRAP_NSYS_STALL_S)."""
    try:
        return max(0.5, float(os.environ.get(STALL_VARIABLE) or DEFAULT_STALL_S))
    except ValueError:
        return DEFAULT_STALL_S


def wait_or_stop(
    process: subprocess.Popen, progress: Callable[[], Hashable], limit: float
) -> str | None:
    """Wait for `process` (started in a session of its own); when `progress()` has not changed
    for `limit` seconds, stop its process group (SIGTERM, then SIGKILL) and say what happened."""
    last, since = progress(), time.monotonic()
    while True:
        try:
            process.wait(timeout=min(1.0, limit / 4))
            return None
        except subprocess.TimeoutExpired:
            pass
        now = progress()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= limit:
            _stop_group(process, grace=min(STOP_GRACE_S, limit))
            return (
                f"nsys made no progress for {limit:g} s and was stopped "
                "(what it had written is kept)"
            )


def _stop_group(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM (nsys may still write its report within `grace` seconds), then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


def tree_cpu_ticks(pid: int) -> int:
    """CPU time (clock ticks) used so far by `pid` and every process below it."""
    parents, ticks = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_bytes().rsplit(b")", 1)[-1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
        ticks[int(stat.parent.name)] = int(fields[11]) + int(fields[12])
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        total += ticks.get(current, 0)
        todo += [p for p, pp in parents.items() if pp == current]
    return total


def file_sizes(paths) -> tuple:
    """(name, size) of each existing file, to see whether nsys is still writing."""
    sizes = []
    for path in paths:
        try:
            sizes.append((path.name, path.stat().st_size))
        except OSError:
            continue
    return tuple(sorted(sizes))


def find_nsys(name: str = "nsys") -> tuple[str, str]:
    """(absolute path, version) of nsys; NsysWrapError when it is missing, broken or too old."""
    path = shutil.which(name)
    if path is None:
        raise NsysWrapError(
            name,
            "was not found on PATH",
            "install NVIDIA Nsight Systems (on Debian: bash .ci/install-nsys.sh) "
            "or pass --nsys PATH",
        )
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NsysWrapError(path, f"does not run ({exc})", "reinstall Nsight Systems") from None
    found = re.search(r"\b(20\d\d)\.(\d+)(?:\.\d+)*", done.stdout + done.stderr)
    if done.returncode != 0 or found is None:
        raise NsysWrapError(
            path, "did not print an Nsight Systems version", "check that it is NVIDIA's nsys"
        )
    if (int(found.group(1)), int(found.group(2))) < MIN_VERSION:
        raise NsysWrapError(
            path,
            f"is Nsight Systems {found.group(0)}, older than {MIN_VERSION[0]}.{MIN_VERSION[1]}",
            "install a newer Nsight Systems",
        )
    return path, found.group(0)


def report_stem(out: Path, host: str, rank: int) -> Path:
    """`<out>/<host>.rank<N>`: nsys adds .nsys-rep, export adds .sqlite."""
    return Path(out) / f"{host}.rank{rank}"


def nsys_argv(rank: int, cfg: LaunchConfig, host: str) -> list[str]:
    """`nsys profile ... <cfg.command>` for this rank (cfg.command is the rank's own program)."""
    options = dict(DEFAULTS)
    if cfg.window is not None or cfg.capture_when is not None:  # the program opens the window
        options["--capture-range"] = "nvtx"
        options["--nvtx-capture"] = f"{CAPTURE_RANGE}@{DOMAIN}"
        again = (
            cfg.window.every
            if cfg.window is not None
            else parse_rule(cfg.capture_when).captures > 1
        )
        options["--capture-range-end"] = "repeat" if again else "stop"
    if cfg.force:
        options["--force-overwrite"] = "true"
    given = {arg.split("=")[0] for arg in cfg.nsys_args}
    argv = [cfg.nsys, "profile", f"--trace={cfg.trace}"]
    argv += [f"{name}={value}" for name, value in options.items() if name not in given]
    argv += [*cfg.nsys_args, f"--output={report_stem(cfg.out, host, rank)}"]
    return argv + list(cfg.command)


def rescue_qdstrm(qdstrm: Path, nsys: str = "nsys") -> Path | None:
    """Import a .qdstrm that nsys left behind into a .nsys-rep; None when no importer is found."""
    importer = find_importer(nsys)
    if importer is None:
        return None
    subprocess.run([str(importer), "-i", str(qdstrm)], capture_output=True)
    report = qdstrm.with_suffix(".nsys-rep")
    return report if report.exists() else None


def find_importer(nsys: str = "nsys") -> Path | None:
    real = Path(shutil.which(nsys) or nsys).resolve()
    candidates = [
        real.parent.parent / "host-linux-x64" / "QdstrmImporter",
        Path("/usr/lib/nsight-systems/host-linux-x64/QdstrmImporter"),
    ]
    on_path = shutil.which("QdstrmImporter")
    return next((c for c in [*candidates, on_path] if c and Path(c).is_file()), None)
