"""`make_report`: a tiny SQLite file shaped like an nsys export, built from Python lists.

Only the tables and columns nsyswrap reads are written; the generator in
`nsyswrap.synth` writes complete reports.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

GLOBAL_BIT = 1 << 48


def global_pid(pid: int) -> int:
    return GLOBAL_BIT | (pid << 24)


def global_tid(pid: int, tid: int) -> int:
    return global_pid(pid) | tid


def make_report(
    path: Path,
    kernels: list[tuple] = (),
    nvtx: list[tuple] = (),
    runtime: list[tuple] = (),
    syncs: list[tuple] = (),
    pid: int = 100,
    utc_epoch_ns: int = 1_700_000_000_000_000_000,
) -> Path:
    """kernels: (start, end, device, stream, name[, correlation_id]);
    nvtx: (start, end, text[, tid]); runtime: (start, end, api, correlation_id[, tid]);
    syncs: (start, end, stream)."""
    con = sqlite3.connect(path)
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    con.executescript(
        """
        CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE META_DATA_EXPORT (name TEXT NOT NULL, value TEXT);
        CREATE TABLE TARGET_INFO_SESSION_START_TIME (utcEpochNs INTEGER, utcTime TEXT, localTime TEXT);
        CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, demangledName INTEGER, shortName INTEGER, mangledName INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (start INTEGER NOT NULL, end INTEGER NOT NULL,
            eventClass INTEGER, globalTid INTEGER, correlationId INTEGER, nameId INTEGER,
            returnValue INTEGER, callchainId INTEGER);
        CREATE TABLE CUPTI_ACTIVITY_KIND_SYNCHRONIZATION (start INTEGER NOT NULL, end INTEGER NOT NULL,
            deviceId INTEGER, contextId INTEGER, streamId INTEGER, correlationId INTEGER,
            globalPid INTEGER, syncType INTEGER, eventId INTEGER);
        CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL,
            rangeId INTEGER, category INTEGER, color INTEGER, text TEXT, globalTid INTEGER,
            endGlobalTid INTEGER, textId INTEGER, domainId INTEGER, uint64Value INTEGER,
            int64Value INTEGER, doubleValue REAL, uint32Value INTEGER, int32Value INTEGER,
            floatValue REAL, jsonTextId INTEGER, jsonText TEXT);
        """  # noqa: E501  (the schema's SQL kept as written)
    )
    con.executemany(
        "INSERT INTO META_DATA_EXPORT VALUES (?, ?)",
        [("EXPORT_PRODUCT_VERSION", "2026.2.1.210"), ("EXPORT_SCHEMA_VERSION", "3.25.0")],
    )
    con.execute(
        "INSERT INTO TARGET_INFO_SESSION_START_TIME VALUES (?, '2023-11-14T22:13:20', '')",
        (utc_epoch_ns,),
    )
    for i, (start, end, device, stream, name, *corr) in enumerate(kernels):
        corr_id = corr[0] if corr else 10_000 + i
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, ?, 1, ?, ?, ?, ?, ?, NULL)",
            (start, end, device, stream, corr_id, global_pid(pid), sid(name), sid(name)),
        )
    for start, end, api, corr_id, *tid in runtime:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (?, ?, 0, ?, ?, ?, 0, NULL)",
            (start, end, global_tid(pid, tid[0] if tid else pid), corr_id, sid(api)),
        )
    for start, end, stream in syncs:
        con.execute(
            "INSERT INTO CUPTI_ACTIVITY_KIND_SYNCHRONIZATION VALUES (?, ?, 0, 1, ?, 0, ?, 3, 0)",
            (start, end, stream, global_pid(pid)),
        )
    for start, end, text, *tid in nvtx:
        con.execute(
            "INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid, domainId) "
            "VALUES (?, ?, 59, ?, ?, 0)",
            (start, end, text, global_tid(pid, tid[0] if tid else pid)),
        )
    con.executemany("INSERT INTO StringIds VALUES (?, ?)", [(i, s) for s, i in strings.items()])
    con.commit()
    con.close()
    return path
