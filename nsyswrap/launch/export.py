"""`nsyswrap export RUN`: every report of a run to SQLite, several nsys processes at a time.

Resumable: a report whose .sqlite exists is skipped unless force=True; each export is
written to `<run>/.export-tmp/` first and moved into place only when complete. Where the
installed nsys can (its `nsys help export` lists `--include-blobs`, 2024.6.2 and later),
the export asks for NVTX payload blobs, so NCCL's ranges keep their communicator ids
(see docs/nccl-payloads.md).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from nsyswrap.errors import NsysWrapError
from nsyswrap.launch.nsys import (
    QDSTRM_FIX,
    file_sizes,
    find_nsys,
    rescue_qdstrm,
    stall_limit,
    tree_cpu_ticks,
    wait_or_stop,
)
from nsyswrap.storage.safe_output import check_writable

TMP_DIR = ".export-tmp"
HELP_TIMEOUT_S = 60  # nsys 2022.4 can hang on a loaded machine


def export_run(
    run_dir,
    force: bool = False,
    jobs: int | None = None,
    nsys: str = "nsys",
    console: Console | None = None,
) -> list[Path]:
    """Export every .nsys-rep in run_dir to a .sqlite beside it; returns all the .sqlite paths."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise NsysWrapError(
            run_dir, "is not a directory", "pass the --out directory of `nsyswrap launch`"
        )
    stranded = [
        q
        for q in sorted(run_dir.glob("*.qdstrm"))
        if not q.with_suffix(".nsys-rep").exists() and rescue_qdstrm(q, nsys) is None
    ]
    reports = sorted(run_dir.glob("*.nsys-rep"))
    if not reports and not stranded:
        raise NsysWrapError(
            run_dir, "holds no .nsys-rep reports", "pass the --out directory of `nsyswrap launch`"
        )
    todo = [r for r in reports if force or not r.with_suffix(".sqlite").exists()]
    if todo:
        _check_writable(run_dir)
    for report in todo:  # (an export it replaces is what export wrote before)
        check_writable(
            report.with_suffix(".sqlite"), True, reports, option="RUN", wrote_before=True
        )
    failures = []
    if todo:
        nsys_path, _ = find_nsys(nsys)
        columns = (
            TextColumn("exporting"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("{task.description}"),
        )
        console = console or Console(stderr=True)
        with (  # (a bar only on a terminal: a log file gets no finished bar)
            Progress(
                *columns, console=console, transient=False, disable=not console.is_terminal
            ) as progress,
            ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 1) as pool,
        ):
            task = progress.add_task("", total=len(todo))
            for report, error in pool.map(lambda r: (r, export_one(nsys_path, r)), todo):
                progress.update(task, advance=1, description=report.name)
                if error:
                    failures.append((report, error))
        shutil.rmtree(run_dir / TMP_DIR, ignore_errors=True)
    if stranded:
        raise NsysWrapError(
            stranded[0],
            f"is a raw capture that was never turned into a report ({len(stranded)} such)",
            QDSTRM_FIX,
        )
    if failures:
        report, error = failures[0]
        raise NsysWrapError(
            report,
            f"nsys export failed ({len(failures)} of {len(todo)} reports): {error}",
            "check the report opens in nsys; run `nsyswrap export RUN` again to retry the rest",
        )
    return [r.with_suffix(".sqlite") for r in reports]


def _check_writable(run_dir: Path) -> None:
    try:
        tempfile.TemporaryFile(dir=run_dir).close()
    except OSError as exc:
        raise NsysWrapError(
            run_dir,
            f"cannot be written ({exc.strerror}), so its reports cannot be exported there",
            "make the run directory writable, or copy the run somewhere writable",
        ) from None


@functools.lru_cache
def include_blobs(nsys: str) -> bool:
    """Whether this nsys's export writes NVTX payload blobs when asked (`--include-blobs`)."""
    try:
        said = subprocess.run(
            [nsys, "help", "export"],
            capture_output=True,
            text=True,
            timeout=HELP_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--include-blobs" in said.stdout + said.stderr


def export_one(nsys: str, report: Path) -> str | None:
    """Export one report; None on success, else the end of nsys's complaint."""
    tmp = report.parent / TMP_DIR / report.with_suffix(".sqlite").name
    tmp.parent.mkdir(exist_ok=True)
    blobs = ["--include-blobs=true"] if include_blobs(nsys) else []
    with tempfile.TemporaryFile("w+") as said:
        try:
            done = subprocess.Popen(
                [
                    nsys,
                    "export",
                    "--type=sqlite",
                    *blobs,
                    "--force-overwrite=true",
                    f"--output={tmp}",
                    str(report),
                ],
                stdout=said,
                stderr=said,
                text=True,
                start_new_session=True,
            )
        except OSError as exc:  # e.g. nsys removed or replaced while the run is exported
            return f"{nsys} cannot be started ({exc.strerror})"
        stuck = wait_or_stop(
            done, lambda: (file_sizes([tmp]), tree_cpu_ticks(done.pid)), stall_limit()
        )
        said.seek(0)
        text = said.read().strip()
    if stuck:
        return f"nsys export {stuck.removeprefix('nsys ')}"
    if done.returncode != 0 or not tmp.exists():
        return text[-300:] or f"exit code {done.returncode}"
    os.replace(tmp, report.with_suffix(".sqlite"))
    return None
