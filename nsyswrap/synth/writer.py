"""Write one rank's trace as an nsys 2026.2 SQLite export (lazy: only tables with rows).

Tables are created from the real DDL text. Every insert names an SQL expression for
each real column (checked against the DDL), so a file can't drift from the schema.
Big tables go through TEMP tables and one INSERT ... SELECT.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from nsyswrap.synth import ids, metadata, nccl_nvtx
from nsyswrap.synth.catalog import API_CLASS, API_NAMES, ATTR_COLUMNS
from nsyswrap.synth.scenario import Scenario
from nsyswrap.synth.schema import template
from nsyswrap.synth.trace import NCCL_DOMAIN, RankTrace

PUSH_POP, DOMAIN_CREATE = 59, 75  # ENUM_NSYS_EVENT_TYPE
GRID_ID_BASE = 161_000
TRACE_TABLES = {  # table -> RankTrace attribute whose rows it holds
    "CUPTI_ACTIVITY_KIND_KERNEL": "k_start",
    "CUPTI_ACTIVITY_KIND_RUNTIME": "r_start",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "memcpys",
    "CUPTI_ACTIVITY_KIND_MEMSET": "memsets",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "syncs",
    "NVTX_EVENTS": "nvtx",
}
PAYLOAD_TABLES = ("NVTX_PAYLOAD_SCHEMAS", "NVTX_PAYLOAD_SCHEMA_ENTRIES")  # with NCCL payloads only
ALWAYS = (
    "StringIds",
    "TARGET_INFO_SYSTEM_ENV",
    "TARGET_INFO_SESSION_START_TIME",
    "ANALYSIS_DETAILS",
    "PROCESSES",
    "ThreadNames",
    "TARGET_INFO_CUDA_STREAM",
    "META_DATA_CAPTURE",
    "META_DATA_EXPORT",
)


class Strings:
    """StringIds, interned in first-use order."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, value: str) -> int:
        return self.ids.setdefault(value, len(self.ids) + 1)


def _exprs(table: str, spec: dict[str, str]) -> str:
    """The spec's SQL expressions in the table's DDL column order (spec must name all columns)."""
    columns = template().columns(table)
    if set(spec) != set(columns):
        raise RuntimeError(
            f"{table}: spec columns differ from the real DDL: "
            f"missing {set(columns) - set(spec)}, extra {set(spec) - set(columns)}"
        )
    return ", ".join(spec[c] for c in columns)


def _insert(con: sqlite3.Connection, table: str, spec: dict[str, str], rows: list) -> None:
    """Insert ``rows``; each row holds the values of the spec's ``?`` columns in DDL order."""
    if rows:
        con.executemany(f'INSERT INTO "{table}" VALUES ({_exprs(table, spec)})', rows)


def _insert_select(
    con: sqlite3.Connection, table: str, spec: dict[str, str], source: str, params: dict
) -> None:
    con.execute(f'INSERT INTO "{table}" SELECT {_exprs(table, spec)} FROM {source}', params)


def write_report(traces: list[RankTrace], sc: Scenario, path: Path) -> None:
    """Write the ranks' ``traces`` (one capture: one session, one clock; usually one rank)
    to a new SQLite file at ``path`` (which must not exist)."""
    con = sqlite3.connect(path)
    try:
        for pragma in (
            "journal_mode=OFF",
            "synchronous=OFF",
            "temp_store=MEMORY",
            "cache_size=-262144",
        ):
            con.execute(f"PRAGMA {pragma}")
        filled = {
            t for t, attr in TRACE_TABLES.items() for trace in traces if len(getattr(trace, attr))
        }
        if any(trace.nvtx_payloads for trace in traces):
            filled.update(PAYLOAD_TABLES)
        tables = [t for t in template().ddl if t in filled or t in ALWAYS or t.startswith("ENUM_")]
        for table in tables:
            con.execute(template().ddl[table])
        strings = Strings()
        for table in template().enum_tables:
            rows = template().rows.get(table, [])
            if rows:
                con.executemany(
                    f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(rows[0]))})', rows
                )
        for trace in traces:
            _write_activity(con, trace, strings)
        for trace in traces:
            _write_nvtx(con, trace, strings)
        _write_info(con, traces, sc, strings)
        con.executemany(
            'INSERT INTO "StringIds" VALUES (?, ?)', ((i, v) for v, i in strings.ids.items())
        )
        con.commit()
    finally:
        con.close()


def _write_activity(con: sqlite3.Connection, trace: RankTrace, strings: Strings) -> None:
    """KERNEL and RUNTIME via TEMP tables; MEMCPY, MEMSET, SYNCHRONIZATION row by row."""
    gpid = ids.global_pid(trace.pid)
    _write_runtime(con, trace, strings, {"gpid": gpid})
    if len(trace.k_start):
        _write_kernels(con, trace, strings, {"gpid": gpid})
    _write_copies(con, trace, gpid)
    _write_syncs(con, trace, gpid)


def _write_runtime(
    con: sqlite3.Connection, trace: RankTrace, strings: Strings, params: dict
) -> None:
    """The TEMP tables of streams and API names, and RUNTIME (every CUDA call)."""
    ts = trace.session_ns
    for temp in ("st", "api", "r", "kt", "k"):  # another process of the same report came first
        con.execute(f"DROP TABLE IF EXISTS temp.{temp}")
    con.execute("CREATE TEMP TABLE st (idx INTEGER PRIMARY KEY, device, context, sid)")
    con.executemany(
        "INSERT INTO temp.st VALUES (?, ?, ?, ?)",
        [(s.index, s.device, s.context, s.sid) for s in trace.streams],
    )

    con.execute("CREATE TEMP TABLE api (idx INTEGER PRIMARY KEY, class, name_id)")
    con.executemany(
        "INSERT INTO temp.api VALUES (?, ?, ?)",
        [(i, API_CLASS[n], strings(n)) for i, n in enumerate(API_NAMES)],
    )
    con.execute("CREATE TEMP TABLE r (start, end, corr, api, tid)")
    con.executemany(
        "INSERT INTO temp.r VALUES (?, ?, ?, ?, ?)",
        zip(
            ts(trace.r_start).tolist(),
            ts(trace.r_end).tolist(),
            trace.r_corr,
            trace.r_api,
            trace.r_tid,
        ),
    )
    _insert_select(
        con,
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        {
            "start": "r.start",
            "end": "r.end",
            "eventClass": "a.class",
            "globalTid": ":gpid + r.tid",
            "correlationId": "r.corr",
            "nameId": "a.name_id",
            "returnValue": "0",
            "callchainId": "NULL",
        },
        "temp.r AS r JOIN temp.api AS a ON a.idx = r.api ORDER BY r.rowid",
        params,
    )


def _write_kernels(
    con: sqlite3.Connection, trace: RankTrace, strings: Strings, params: dict
) -> None:
    """KERNEL via TEMP tables of kernel types and kernels, joined to the streams'."""
    ts = trace.session_ns
    attrs = ", ".join(ATTR_COLUMNS)
    con.execute(
        f"CREATE TEMP TABLE kt (idx INTEGER PRIMARY KEY, short, demangled, mangled, {attrs})"
    )
    con.executemany(
        f"INSERT INTO temp.kt VALUES ({', '.join('?' * (4 + len(ATTR_COLUMNS)))})",
        [
            (i, strings(k.short), strings(k.demangled), strings(k.mangled), *k.attrs)
            for i, k in enumerate(trace.kernel_types)
        ],
    )
    con.execute("CREATE TEMP TABLE k (start, end, stream, corr, type)")
    con.executemany(
        "INSERT INTO temp.k VALUES (?, ?, ?, ?, ?)",
        zip(
            ts(trace.k_start).tolist(),
            ts(trace.k_end).tolist(),
            trace.k_stream,
            trace.k_corr,
            trace.k_type,
        ),
    )
    spec = {
        "start": "k.start",
        "end": "k.end",
        "deviceId": "s.device",
        "contextId": "s.context",
        "greenContextId": "0",
        "streamId": "s.sid",
        "correlationId": "k.corr",
        "globalPid": ":gpid",
        "demangledName": "t.demangled",
        "shortName": "t.short",
        "mangledName": "t.mangled",
        "launchType": "1",
        "cacheConfig": "1",
        "gridId": f"{GRID_ID_BASE} + k.rowid",
        "graphNodeId": "NULL",
        "qmdBulkReleaseDone": "NULL",
        "qmdPreexitDone": "NULL",
        "qmdLastCtaDone": "NULL",
        "graphId": "NULL",
        "sharedMemoryRequestedPercentage": "NULL",
        "tensorSizeMinusOneElements": "'[]'",
    }
    spec.update({c: f"t.{c}" for c in ATTR_COLUMNS})
    _insert_select(
        con,
        "CUPTI_ACTIVITY_KIND_KERNEL",
        spec,
        "temp.k AS k JOIN temp.st AS s ON s.idx = k.stream "
        "JOIN temp.kt AS t ON t.idx = k.type ORDER BY k.rowid",
        params,
    )


def _write_copies(con: sqlite3.Connection, trace: RankTrace, gpid: int) -> None:
    """MEMCPY and MEMSET, row by row."""
    ts = trace.session_ns
    streams = trace.streams
    _insert(
        con,
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        {
            "start": "?",
            "end": "?",
            "deviceId": "?",
            "contextId": "?",
            "greenContextId": "0",
            "streamId": "?",
            "correlationId": "?",
            "globalPid": str(gpid),
            "bytes": "?",
            "copyKind": "?",
            "deprecatedSrcId": "NULL",
            "srcKind": "?",
            "dstKind": "?",
            "srcDeviceId": "?",
            "srcContextId": "?",
            "dstDeviceId": "?",
            "dstContextId": "?",
            "migrationCause": "NULL",
            "graphNodeId": "NULL",
            "virtualAddress": "NULL",
            "copyCount": "1",
        },
        [
            (
                ts(s),
                ts(e),
                streams[i].device,
                streams[i].context,
                streams[i].sid,
                corr,
                nbytes,
                kind,
                src_kind,
                dst_kind,
                src,
                None if src is None else src + 1,
                dst,
                None if dst is None else dst + 1,
            )
            for s, e, i, corr, nbytes, kind, src_kind, dst_kind, src, dst in trace.memcpys
        ],
    )
    _insert(
        con,
        "CUPTI_ACTIVITY_KIND_MEMSET",
        {
            "start": "?",
            "end": "?",
            "deviceId": "?",
            "contextId": "?",
            "greenContextId": "0",
            "streamId": "?",
            "correlationId": "?",
            "globalPid": str(gpid),
            "value": "0",
            "bytes": "?",
            "graphNodeId": "NULL",
            "memKind": "2",
        },
        [
            (ts(s), ts(e), streams[i].device, streams[i].context, streams[i].sid, corr, nbytes)
            for s, e, i, corr, nbytes in trace.memsets
        ],
    )


def _write_syncs(con: sqlite3.Connection, trace: RankTrace, gpid: int) -> None:
    """SYNCHRONIZATION, row by row."""
    ts, streams = trace.session_ns, trace.streams
    # deviceId is 0 on every SYNCHRONIZATION row of real 2026.2 exports (schema note 4.3)
    _insert(
        con,
        "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
        {
            "start": "?",
            "end": "?",
            "deviceId": "0",
            "contextId": "?",
            "greenContextId": "NULL",
            "streamId": "?",
            "correlationId": "?",
            "globalPid": str(gpid),
            "deprecatedSyncType": "NULL",
            "syncType": "?",
            "eventId": "?",
            "eventSyncId": "?",
        },
        [
            (ts(s), ts(e), streams[i].context, streams[i].sid, corr, kind, event, event_sync)
            for s, e, i, corr, kind, event, event_sync in trace.syncs
        ],
    )


def _write_nvtx(con: sqlite3.Connection, trace: RankTrace, strings: Strings) -> None:
    """Push/pop ranges (ours in ``text``, NCCL's as registered strings) + domain creations."""
    gtid = ids.global_tid(trace.pid, trace.pid)
    ts = trace.session_ns
    nulls = (
        "rangeId",
        "category",
        "color",
        "endGlobalTid",
        "uint64Value",
        "int64Value",
        "doubleValue",
        "uint32Value",
        "int32Value",
        "floatValue",
        "jsonTextId",
        "jsonText",
    )
    spec = {c: "NULL" for c in nulls}
    spec.update(
        {
            "start": "?",
            "end": "?",
            "eventType": "?",
            "text": "?",
            "globalTid": "?",
            "textId": "?",
            "domainId": "?",
            "binaryData": "?",
        }
    )
    created = [
        (ts(s), None, DOMAIN_CREATE, name, gtid, None, domain, None)
        for s, name, domain in trace.nvtx_domains
    ]
    tids = [ids.global_tid(trace.pid, tid) for tid in trace.nvtx_tid]
    payloads = trace.nvtx_payloads
    ranges = [
        (ts(s), ts(e), PUSH_POP, None, tid, strings(text), domain, payloads.get(i))
        if domain == NCCL_DOMAIN
        else (ts(s), ts(e), PUSH_POP, text, tid, None, domain, None)
        for i, ((s, e, text, domain), tid) in enumerate(zip(trace.nvtx, tids))
    ]
    _insert(con, "NVTX_EVENTS", spec, created + ranges)
    if payloads:  # the schemas, once per process as a real export repeats them
        calls = {trace.nvtx[i][2] for i in payloads}
        schemas, entries = nccl_nvtx.schema_rows(calls)
        _insert(
            con,
            "NVTX_PAYLOAD_SCHEMAS",
            {c: "?" for c in template().columns("NVTX_PAYLOAD_SCHEMAS")},
            schemas,
        )
        _insert(
            con,
            "NVTX_PAYLOAD_SCHEMA_ENTRIES",
            {c: "?" for c in template().columns("NVTX_PAYLOAD_SCHEMA_ENTRIES")},
            entries,
        )


def _write_info(
    con: sqlite3.Connection, traces: list[RankTrace], sc: Scenario, strings: Strings
) -> None:
    """Metadata, session, system (of the first rank: the capture's), process, thread and
    stream tables (of every rank's process)."""
    trace = traces[0]
    name_value = {"name": "?", "value": "?"}
    _insert(con, "META_DATA_EXPORT", name_value, metadata.export_rows(trace, sc))
    _insert(con, "META_DATA_CAPTURE", name_value, metadata.capture_rows(trace, sc))
    _insert(
        con,
        "TARGET_INFO_SYSTEM_ENV",
        {c: "?" for c in ("globalVid", "devStateName", "name", "nameEnum", "value")},
        metadata.system_env_rows(trace),
    )
    _insert(
        con,
        "TARGET_INFO_SESSION_START_TIME",
        {c: "?" for c in ("utcEpochNs", "utcTime", "localTime", "systemClockNs")},
        [metadata.session_start_row(trace)],
    )
    _insert(
        con,
        "ANALYSIS_DETAILS",
        {c: "?" for c in ("globalVid", "duration", "startTime", "stopTime")},
        [metadata.analysis_details_row(trace)],
    )
    processes = list(dict.fromkeys(row for t in traces for row in metadata.process_rows(t)))
    _insert(con, "PROCESSES", {"globalPid": "?", "pid": "?", "name": "?"}, processes)
    threads = list(dict.fromkeys(row for t in traces for row in metadata.thread_rows(t)))
    _insert(
        con,
        "ThreadNames",
        {"nameId": "?", "priority": "20", "globalTid": "?"},
        [(strings(name), gtid) for gtid, name in threads],
    )
    _insert(
        con,
        "TARGET_INFO_CUDA_STREAM",
        {
            "streamId": "?",
            "hwId": "0",
            "vmId": "1",
            "processId": "?",
            "contextId": "?",
            "priority": "?",
            "flag": "?",
        },
        [(s.sid, t.pid, s.context, s.priority, s.flag) for t in traces for s in t.streams],
    )
