"""Where the CPU of one report's cold work goes, stage by stage (`python -m bench.tasks
stages RUN`): the first report of RUN, in this process alone (DuckDB on one thread, as in
a worker of `-j` 2 on 2 cores), into an empty cache, exactly the work a cold `nsyswrap
report` does per report in its worker: the views, then every per-report object and module
the report reads (`nsyswrap.report.planned`).

Stages, CPU seconds of this process (user + system, every thread):

- read: the ADBC reads out of SQLite (CPU of the thread pulling the batches, UTF-8 checks
  included), timed inside the batch generator;
- views: the rest of normalization (names, the views), and the lazy `launches` built in
  memory for the objects (nsyswrap.engine.lazy_views);
- sort/sweep: the device timeline's builder (the activities read back from the kernels
  view, one sort per device, the sweep, each NCCL kernel's overlap);
- look-ups: the objects read off the timeline (window unions, step unions, idle gaps);
- replay inputs: the per-report objects the replay reads (REPLAY_INPUTS);
- objects: every other per-report object and module the report reads (SQL);
- store: writing Parquet, measured apart: every file the views and objects wrote is read
  into memory and written again with the same options, and that write is its share (the
  other stages are given net of it).

Memory, the process's peak resident set (VmHWM, reset to the current size through
/proc/self/clear_refs before each stage and each object, Linux): before the work, during
read + views (one stage: the reads stream into the views), during the device timeline's
builder (sort/sweep), during the look-ups, during every other object; DuckDB gets a
worker's memory limit at `-j 2` (MEMORY_LIMIT_MB / 2), so this is one worker's peak.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa

TIMELINE = {"device_timeline", "nccl_overlap"}
LOOKUPS = {"window_unions", "step_unions", "idle_gap_rows"}
REPLAY_INPUTS = {"xr_segments", "xr_nccl_calls", "xr_host_waits"}
"""The per-report objects the replay (crossrank.whatif) reads."""
LOG_STAGES = (
    ("views", "read + views"),
    ("sort_sweep", "device sort/sweep"),
    ("lookups", "look-ups off the timeline"),
    ("replay_inputs", "replay inputs"),
    ("objects", "other per-report objects"),
)
"""The per-report stages of a stage log (`$NSYSWRAP_STAGE_LOG`), in the workers."""


WORKERS = 2  # the workers of `-j 2`: DuckDB's memory limit is theirs


def cpu() -> float:
    return time.process_time()


def reset_peak() -> bool:
    """Set this process's peak resident set (VmHWM) to its current size (Linux 4.0+)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def memory(key: str) -> float:
    """VmHWM or VmRSS of this process in MB (0 where /proc is not there)."""
    from bench.tasks import memory_mb

    return memory_mb().get(key, 0.0)


class _Timers:
    """What `stages` times, hooked into nsyswrap while it runs: the ADBC reads (in the thread
    pulling the batches), each per-report object (CPU and peak, the lazy views it had built
    in memory taken out: they are views' work) and those lazy builds."""

    def __init__(self):
        from nsyswrap.engine import cache, lazy_views, planner

        self.read = self.lazy = 0.0
        self.per_object: dict[str, float] = {}
        self.peak_object: dict[str, float] = {}
        self._hooked = [
            (cache, "read_batches", self._reader),
            (planner, "_store", self._store),
            (lazy_views, "_in_memory", self._in_memory),
        ]
        self._saved = [(module, name, getattr(module, name)) for module, name, _ in self._hooked]

    def __enter__(self):
        for module, name, hook in self._hooked:
            setattr(module, name, hook)
        return self

    def __exit__(self, *exc):
        for module, name, original in self._saved:
            setattr(module, name, original)

    def _original(self, name: str):
        return next(fn for _, n, fn in self._saved if n == name)

    def _reader(self, path, query):
        reader = self._original("read_batches")(path, query)

        def batches():
            it = iter(reader)
            while True:
                started = time.thread_time()
                batch = next(it, None)
                self.read += time.thread_time() - started
                if batch is None:
                    return
                yield batch

        return pa.RecordBatchReader.from_batches(reader.schema, batches())

    def _store(self, one, name, params, target):
        reset_peak()
        started, lazy = cpu(), self.lazy
        self._original("_store")(one, name, params, target)
        spent = cpu() - started - (self.lazy - lazy)
        self.per_object[name] = self.per_object.get(name, 0.0) + spent
        self.peak_object[name] = max(self.peak_object.get(name, 0.0), memory("VmHWM"))

    def _in_memory(self, run, name):
        started = cpu()
        self._original("_in_memory")(run, name)
        self.lazy += cpu() - started


def stages(run: Path) -> dict:
    from nsyswrap.engine import cache, planner
    from nsyswrap.engine.opening import plan_of
    from nsyswrap.engine.run import MEMORY_LIMIT_MB
    from nsyswrap.report import ReportOptions, wanted
    from nsyswrap.storage.reports import expand
    from nsyswrap.storage.validate import inspect_tables

    report = sorted(expand([run]), key=lambda p: p.name)[0]
    items = wanted(ReportOptions())  # every step usual: the window the report chooses
    _, (cached,) = plan_of([report], items)
    targets = planner.planned(planner.plan.Scope((cached,), (), False, True), items)[0]
    with _Timers() as timers:
        measured = reset_peak()
        before_mb = memory("VmRSS")
        started = cpu()
        cache.normalize(report, inspect_tables(report), cached.views_dir)
        normalized = cpu() - started
        views_mb = memory("VmHWM")
        started = cpu()
        planner.compute(f"{MEMORY_LIMIT_MB // WORKERS}MB", 1, (cached, targets))
        computed = cpu() - started
    view_store = _rewrite(sorted(cached.views_dir.glob("*.parquet")), cache.VIEW_PARQUET)
    object_store = {
        name: _rewrite(
            [target / planner.ROWS], f"FORMAT parquet, ROW_GROUP_SIZE {planner.ROW_GROUP}"
        )
        for name, _, target in targets
    }
    split = _split(timers, normalized, computed, view_store, object_store)
    return {
        "report": str(report),
        "kernels": _count(cached.views_dir / "kernels.parquet"),
        **split,
        **({"memory": _memory(timers, before_mb, views_mb)} if measured else {}),
    }


def _split(
    timers: _Timers, normalized: float, computed: float, view_store: float, object_store: dict
) -> dict:
    """The CPU by stage (ONE_PROCESS in bench.targets), each net of its Parquet writes."""

    def net(names) -> float:
        return sum(timers.per_object.get(n, 0) - object_store.get(n, 0) for n in names)

    sweep, lookups, replay = net(TIMELINE), net(LOOKUPS), net(REPLAY_INPUTS)
    return {
        "read_s": timers.read,
        "views_s": normalized - timers.read - view_store + timers.lazy,
        "sort_sweep_s": sweep,
        "lookups_s": lookups,
        "replay_inputs_s": replay,
        "objects_s": computed - timers.lazy - sweep - lookups - replay - sum(object_store.values()),
        "store_s": view_store + sum(object_store.values()),
        "total_s": normalized + computed,
        "costliest_objects": sorted(
            ((n, round(s - object_store.get(n, 0), 3)) for n, s in timers.per_object.items()),
            key=lambda x: -x[1],
        )[:8],
    }


def _memory(timers: _Timers, before_mb: float, views_mb: float) -> dict:
    """The peak resident set by stage."""

    def peak(names) -> float:
        return max((timers.peak_object[n] for n in names if n in timers.peak_object), default=0.0)

    return {
        "before_mb": before_mb,
        "views_mb": views_mb,
        "sort_sweep_mb": peak(TIMELINE),
        "lookups_mb": peak(LOOKUPS),
        "objects_mb": peak(set(timers.peak_object) - TIMELINE - LOOKUPS),
        "largest_objects_mb": sorted(
            ((n, round(mb)) for n, mb in timers.peak_object.items()), key=lambda x: -x[1]
        )[:5],
    }


def _rewrite(files: list[Path], options: str) -> float:
    """CPU to write the rows of `files` again with `options` (read into memory first)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET threads = 1")
    total = 0.0
    with tempfile.TemporaryDirectory() as folder:
        for i, file in enumerate(files):
            con.execute(f"CREATE OR REPLACE TABLE t AS SELECT * FROM read_parquet('{file}')")
            started = cpu()
            con.execute(f"COPY t TO '{os.path.join(folder, f'{i}.parquet')}' ({options})")
            total += cpu() - started
    con.close()
    return total


def _count(file: Path) -> int:
    import pyarrow.parquet as pq

    return pq.ParquetFile(file).metadata.num_rows


def from_log(path: Path, tree_cpu_s: float) -> dict:
    """What a command's stage log (`$NSYSWRAP_STAGE_LOG`: nsyswrap.engine.stage_log) says
    of its CPU: per report by stage (LOG_STAGES, the mean over its reports), the run
    objects on the run (`run_s`, the cross-rank stage), the rest of the tree's CPU
    (`rest_s`: interpreter starts, imports, the report's sections and answer), the costliest
    objects, and which step each process's peak resident set was reached in."""
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    reports = {r["report"] for r in rows if r["kind"] != "run"} or {""}
    stage, objects, run = Counter(), Counter(), Counter()
    for r in rows:
        if r["kind"] == "run":
            run[r["name"]] += r["cpu_s"]
            continue
        stage[_stage_of(r)] += r["cpu_s"]
        if r["kind"] == "object":
            objects[r["name"]] += r["cpu_s"]
    main = {r["pid"] for r in rows if r["kind"] == "run"}
    return {
        "reports": len(reports),
        "per_report_s": {key: stage[key] / len(reports) for key, _ in LOG_STAGES},
        "run_s": sum(run.values()),
        "rest_s": tree_cpu_s - sum(stage.values()) - sum(run.values()),
        "costliest_objects": [
            [name, round(cpu / len(reports), 3)] for name, cpu in objects.most_common(8)
        ],
        "costliest_run_objects": [[name, round(cpu, 3)] for name, cpu in run.most_common(3)],
        "worker_peak": _peak([r for r in rows if r["pid"] not in main]),
        "main_peak": _peak([r for r in rows if r["pid"] in main]),
    }


def _stage_of(row: dict) -> str:
    if row["kind"] == "views":
        return "views"
    name = row["name"]
    if name in TIMELINE:
        return "sort_sweep"
    if name in LOOKUPS:
        return "lookups"
    return "replay_inputs" if name in REPLAY_INPUTS else "objects"


def _peak(rows: list[dict]) -> list | None:
    """[MB, step]: the highest peak resident set of these rows' processes, and the step
    (kind name) in which it was first reached."""
    rows = [r for r in rows if r.get("hwm_mb")]
    if not rows:
        return None
    top = max(r["hwm_mb"] for r in rows)
    first = next(r for r in rows if r["hwm_mb"] == top)
    return [round(top), f"{first['kind']} {first['name']}"]
