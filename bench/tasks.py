"""What one measured process does: `python -m bench.tasks TASK RUN [options]`.

Each task imports only what it needs, times its own work and prints one JSON line
({"work_s": ..., "peak_rss_mb": its own VmHWM, more}); `measure.run_task` adds the
wall time, and the CPU time and peak RSS of the whole process tree (workers included).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
from pathlib import Path


def task_floor(args) -> dict:
    from bench.floor import floor

    return floor(args.run)


def task_startup(args) -> dict:
    import nsyswrap.cli  # noqa: F401  (the import is the work)

    return {}


def task_extract(args) -> dict:
    """Read the big tables into Arrow exactly as nsyswrap's cache does, `jobs` reports at a time."""
    from concurrent.futures import ThreadPoolExecutor

    from nsyswrap.engine.cache import _raw
    from nsyswrap.storage.reports import expand
    from nsyswrap.storage.validate import inspect_tables

    def read(path: Path) -> int:
        tables = inspect_tables(path)
        return sum(
            sum(b.num_rows for b in _raw(path, key, tables))
            for key in ("kernel", "runtime", "nvtx")
        )

    with ThreadPoolExecutor(args.jobs) as pool:
        return {"rows": sum(pool.map(read, expand([args.run])))}


def task_report(args) -> dict:
    """`nsyswrap report RUN -j N [--steps A:B] [--format F]`, its output captured (its length and
    SHA-256, to compare engines); with `--engine dask`, on a LocalCluster of `-j` worker processes
    this task starts (so they are measured with it), its start and stop timed apart from the
    report (`report_s`)."""
    import hashlib

    from nsyswrap.cli import main

    with _engine(args.engine, args.jobs) as (engine_args, timing):
        started = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as out:
            try:
                main(
                    [
                        "report",
                        str(args.run),
                        "-j",
                        str(args.jobs),
                        "--format",
                        args.format,
                        *engine_args,
                        *(["--steps", args.steps] if args.steps else []),
                    ]
                )
            except SystemExit as done:  # click ends every command with sys.exit
                if done.code:
                    raise
        report_s = time.perf_counter() - started
    text = out.getvalue()
    return {
        "output_chars": len(text),
        "output_sha256": hashlib.sha256(text.encode()).hexdigest(),
        "report_s": report_s,
        **timing,
    }


@contextlib.contextmanager
def _engine(name: str, workers: int):
    """(extra `nsyswrap report` arguments, timings) for the engine `name`: Dask's scheduler is
    found by the file it wrote, as on SLURM (`--scheduler-file`)."""
    if name == "local":
        yield [], {}
        return
    import tempfile

    from distributed import Client, LocalCluster

    started = time.perf_counter()
    cluster = LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
    )
    timing = {"cluster_start_s": time.perf_counter() - started}
    try:
        with (
            tempfile.TemporaryDirectory() as folder,
            Client(cluster, set_as_default=False) as client,
        ):
            scheduler_file = Path(folder) / "scheduler.json"
            client.write_scheduler_file(str(scheduler_file))
            yield ["--engine", "dask", "--scheduler-file", str(scheduler_file)], timing
    finally:
        from nsyswrap.engine.dask_engine import close_clients

        close_clients()  # nsyswrap's own client, kept between runs, before its scheduler goes
        cluster.close()


def task_open(args) -> dict:
    """open_run alone: normalization into the cache when it is cold, a few checks when warm."""
    from nsyswrap import open_run

    with open_run([args.run], jobs=args.jobs) as run:
        return {"reports": len(run.reports)}


def task_modules(args) -> dict:
    """Prebuilt modules (`--name`, repeatable) on one open run; the open and the queries are
    timed apart. With `--stream DIR`, each module's rows go to DIR/NAME.parquet as `nsyswrap
    query NAME RUN -o FILE -f parquet` writes them (streamed: never one DataFrame in this
    process)."""
    from nsyswrap import open_run
    from nsyswrap.engine.queries import run_module
    from nsyswrap.engine.stream import write_module

    def rows_of(run, name: str) -> int:
        if args.stream is None:
            return len(run_module(run, name))
        args.stream.mkdir(parents=True, exist_ok=True)
        return write_module(run, name, args.stream / f"{name}.parquet", "parquet")

    started = time.perf_counter()
    with open_run([args.run], jobs=args.jobs) as run:
        opened = time.perf_counter()
        rows = sum(rows_of(run, name) for name in args.name)
        return {"open_s": opened - started, "query_s": time.perf_counter() - opened, "rows": rows}


def task_stages(args) -> dict:
    """CPU of one report's cold work by stage (bench.stages), in this process."""
    from bench.stages import stages

    return stages(args.run)


def task_baseline(args) -> dict:
    from bench.baseline import analyse

    ledger, gaps, skew = analyse([args.run])
    return {"ledger_rows": len(ledger), "gaps": len(gaps), "collective_rows": len(skew)}


def task_whatif(args) -> dict:
    """The what-if stage alone on a synthetic run of `--size RANKSxCOLLECTIVESxSTEPS`
    (bench.whatif)."""
    from bench.whatif import stage

    ranks, collectives, steps = (int(x) for x in args.size.split("x"))
    cpu = time.process_time()
    out = stage(ranks, collectives, steps)
    return {**out, "whatif_cpu_s": time.process_time() - cpu}


TASKS = {name[5:]: fn for name, fn in globals().items() if name.startswith("task_")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.tasks")
    parser.add_argument("task", choices=sorted(TASKS))
    parser.add_argument("run", type=Path, nargs="?")
    parser.add_argument(
        "--name", action="append", default=[], help="module name (task modules, repeatable)"
    )
    parser.add_argument("--jobs", "-j", type=int, default=2)
    parser.add_argument(
        "--engine", choices=("local", "dask"), default="local", help="task report: the engine"
    )
    parser.add_argument(
        "--steps", help="task report: its --steps A:B (new options on a cached run)"
    )
    parser.add_argument("--format", default="table", help="task report: its --format")
    parser.add_argument(
        "--stream", type=Path, help="task modules: write each module's rows to DIR/NAME.parquet"
    )
    parser.add_argument(
        "--size", default="64x1000x100", help="task whatif: RANKSxCOLLECTIVESxSTEPS"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    result = TASKS[args.task](args)
    print(
        json.dumps(
            {"work_s": time.perf_counter() - started, "peak_rss_mb": peak_rss_mb(), **result}
        )
    )


def peak_rss_mb(pid: int | str = "self") -> float | None:
    """VmHWM of a live process: the peak resident set of its current program image only.

    Unlike ru_maxrss, it does not include the parent's memory the process started with
    (fork copies the parent's RSS, and Linux carries ru_maxrss across exec).
    """
    return memory_mb(pid).get("VmHWM")


def memory_mb(pid: int | str = "self") -> dict[str, float]:
    """The memory lines of /proc/PID/status (VmHWM, VmRSS, ...) in MB; none for a process
    that is gone or a zombie."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return {}
    return {
        ln.split(":")[0]: int(ln.split()[1]) / 1024
        for ln in status.splitlines()
        if ln.startswith("Vm") and ln.endswith(" kB")
    }


if __name__ == "__main__":
    main()
