"""Per-report metadata rows: export/capture metadata, session start, system env, processes.

Generic rows come from the real export's template (``schema.template()``); only the values
that describe this rank's capture are replaced.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from nsyswrap.synth import ids
from nsyswrap.synth.scenario import Scenario
from nsyswrap.synth.schema import template
from nsyswrap.synth.trace import RankTrace

NODE_CLOCK_NS = 28_254_349_605  # target system clock at true time 0 on node 0 (as in the real file)
NODE_CLOCK_STEP_NS = 7_000_000_000
NSYS_PID = 104
EXPORT_DELAY_S = 30
# (tid offset from the pid, thread name) of the rank process, as PyTorch + nsys name them
THREADS = (
    (0, "python3"),
    (2, "[NSys]"),
    (3, "[NSys Comms]"),
    (15, "pt_nccl_watchdg"),
    (16, "pt_nccl_heartbt"),
    (30, "pt_autograd_0"),
)


def iso_seconds(epoch_ns: int) -> str:
    return datetime.fromtimestamp(epoch_ns // 10**9, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")


def duration_ns(trace: RankTrace) -> int:
    return trace.end - trace.session_start


def system_clock_ns(trace: RankTrace) -> int:
    return NODE_CLOCK_NS + trace.node * NODE_CLOCK_STEP_NS + trace.session_start


def export_rows(trace: RankTrace, sc: Scenario) -> list[tuple[str, str]]:
    """META_DATA_EXPORT: the real file's keys (minus nsys-ai's DERIVED_*) + NSYSWRAP_SYNTHETIC."""
    name = f"rank{trace.rank}"
    exported = trace.utc_epoch_ns + duration_ns(trace) + EXPORT_DELAY_S * 10**9
    values = {
        "EXPORT_TIME_UTC": iso_seconds(exported),
        "EXPORT_TIME_LOCAL": iso_seconds(exported) + " +0000 UTC",
        "EXPORT_HOST": trace.hostname,
        "EXPORT_PARAM_INPUT_FILE": f"{name}.nsys-rep",
        "EXPORT_PARAM_OUTPUT_FILE": f"{name}.sqlite",
        "EXPORT_PARAM_INPUT_PATH": f"/tmp/nsyswrap/{name}.nsys-rep",
        "EXPORT_PARAM_OUTPUT_PATH": f"/tmp/nsyswrap/{name}.sqlite",
        "EXPORT_PARAM_INPUT_PATH_ABS": f"/tmp/nsyswrap/{name}.nsys-rep",
        "EXPORT_PARAM_OUTPUT_PATH_ABS": f"/tmp/nsyswrap/{name}.sqlite",
        "EXPORT_TIME": "1.00 sec",
    }
    rows = [(k, values.get(k, v)) for k, v in template().rows["META_DATA_EXPORT"]]
    return rows + [("NSYSWRAP_SYNTHETIC", sc.name)]


def capture_rows(trace: RankTrace, sc: Scenario) -> list[tuple[str, str]]:
    """META_DATA_CAPTURE: the real capture options, this rank's command and environment."""
    env = {
        "RANK": trace.rank,
        "LOCAL_RANK": trace.local_rank,
        "WORLD_SIZE": sc.ranks,
        "LOCAL_WORLD_SIZE": min(sc.ranks_per_node, sc.ranks),
        "GROUP_RANK": trace.node,
        "MASTER_ADDR": "node0",
        "MASTER_PORT": 29500,
    }
    session = uuid.uuid5(uuid.NAMESPACE_URL, f"nsyswrap:{sc.name}:{sc.seed}:{trace.rank}")
    values = {
        "DEVICE_DISPLAY_NAME": trace.hostname,
        "PROCESS_0:COMMAND": "python3",
        "PROCESS_0:WORKING_DIR": "/workspace",
        "PROFILING_SESSION_UUID": str(session),
        "RUN_DURATION_MS": str(duration_ns(trace) // 10**6),
    }
    rows = []
    for key, value in template().rows["META_DATA_CAPTURE"]:
        rows.append((key, values.get(key, value)))
        if key == "PROCESS_0:COMMAND":
            rows += [
                ("PROCESS_0:ARGUMENT_0", "train.py"),
                ("PROCESS_0:ARGUMENT_1", f"--scenario={sc.name}"),
            ]
        if key == "PROCESS_0:COLLECT_VIDEO_API_TRACE":
            rows += [("PROCESS_0:ENVIRONMENT_VARIABLE", f'{k}="{v}"') for k, v in env.items()]
    return rows


def system_env_rows(trace: RankTrace) -> list[tuple]:
    """TARGET_INFO_SYSTEM_ENV of the real machine, with this rank's hostname."""
    return [
        (vid, state, name, enum, trace.hostname if name == "Hostname" else value)
        for vid, state, name, enum, value in template().rows["TARGET_INFO_SYSTEM_ENV"]
    ]


def session_start_row(trace: RankTrace) -> tuple:
    utc = trace.utc_epoch_ns
    return (utc, iso_seconds(utc), iso_seconds(utc), system_clock_ns(trace))


def analysis_details_row(trace: RankTrace) -> tuple:
    start = system_clock_ns(trace)
    return (ids.VM_BIT, duration_ns(trace), start, start + duration_ns(trace))


def process_rows(trace: RankTrace) -> list[tuple]:
    return [
        (ids.global_pid(NSYS_PID), NSYS_PID, "nsys"),
        (ids.global_pid(trace.pid), trace.pid, "python3"),
    ]


def thread_rows(trace: RankTrace) -> list[tuple[int, str]]:
    """(globalTid, name) of the rank process's threads and nsys's main thread."""
    rows = [(ids.global_tid(NSYS_PID, NSYS_PID), "nsys")]
    return rows + [(ids.global_tid(trace.pid, trace.pid + off), name) for off, name in THREADS]
