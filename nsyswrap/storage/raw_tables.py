"""The columns nsyswrap reads from each export table, by name, with their types.

Names follow the real exports of nsys 2022.2 to 2026.2 (see
shared/docs/nsys-schema.md); a column or table missing from a report reads as
typed NULLs / no rows. Each table appears in DuckDB as `raw_<key>`.
"""

from __future__ import annotations

INT, REAL, TEXT, BLOB = "INTEGER", "REAL", "TEXT", "BLOB"

_DEVICE_ROW = {
    "start": INT,
    "end": INT,
    "deviceId": INT,
    "contextId": INT,
    "streamId": INT,
    "correlationId": INT,
    "globalPid": INT,
}

RAW_TABLES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "kernel": (
        ("CUPTI_ACTIVITY_KIND_KERNEL",),
        {
            **_DEVICE_ROW,
            "demangledName": INT,
            "shortName": INT,
            "gridX": INT,
            "gridY": INT,
            "gridZ": INT,
            "blockX": INT,
            "blockY": INT,
            "blockZ": INT,
        },
    ),
    "memcpy": (
        ("CUPTI_ACTIVITY_KIND_MEMCPY",),
        {
            **_DEVICE_ROW,
            "bytes": INT,
            "copyKind": INT,
            "srcKind": INT,
            "dstKind": INT,
        },
    ),
    "memset": (("CUPTI_ACTIVITY_KIND_MEMSET",), {**_DEVICE_ROW, "bytes": INT}),
    "sync": (("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",), {**_DEVICE_ROW, "syncType": INT}),
    "runtime": (
        ("CUPTI_ACTIVITY_KIND_RUNTIME",),
        {
            "start": INT,
            "end": INT,
            "eventClass": INT,
            "globalTid": INT,
            "correlationId": INT,
            "nameId": INT,
        },
    ),
    "nvtx": (
        ("NVTX_EVENTS",),
        {
            "start": INT,
            "end": INT,
            "eventType": INT,
            "rangeId": INT,
            "category": INT,
            "color": INT,
            "text": TEXT,
            "globalTid": INT,
            "endGlobalTid": INT,
            "textId": INT,
            "domainId": INT,
            "uint64Value": INT,
            "int64Value": INT,
            "doubleValue": REAL,
            "uint32Value": INT,
            "int32Value": INT,
            "floatValue": REAL,
        },
    ),
    # NVTX events with an extended payload (binaryData: a BLOB in a TEXT column, from nsys
    # 2024.6.2, filled only by `nsys export --include-blobs=true`) and the payload schemas
    "nvtx_payload": (
        ("NVTX_EVENTS",),
        {
            "start": INT,
            "end": INT,
            "eventType": INT,
            "text": TEXT,
            "globalTid": INT,
            "textId": INT,
            "domainId": INT,
            "binaryData": BLOB,
        },
    ),
    "payload_schemas": (
        ("NVTX_PAYLOAD_SCHEMAS",),
        {"domainId": INT, "schemaId": INT, "payloadSize": INT},
    ),
    "payload_entries": (
        ("NVTX_PAYLOAD_SCHEMA_ENTRIES",),
        {
            "domainId": INT,
            "schemaId": INT,
            "idx": INT,
            "type": INT,
            "name": TEXT,
            "offset": INT,
        },
    ),
    "osrt": (
        ("OSRT_API",),
        {
            "start": INT,
            "end": INT,
            "eventClass": INT,
            "globalTid": INT,
            "nameId": INT,
            "nestingLevel": INT,
        },
    ),
    "gpu_memory": (
        ("CUDA_GPU_MEMORY_USAGE_EVENTS",),
        {
            "start": INT,
            "globalPid": INT,
            "deviceId": INT,
            "contextId": INT,
            "address": INT,
            "bytes": INT,
            "memKind": INT,
            "memoryOperationType": INT,
            "correlationId": INT,
            "streamId": INT,
        },
    ),
    "strings": (("StringIds",), {"id": INT, "value": TEXT}),
    "processes": (("PROCESSES",), {"globalPid": INT, "pid": INT, "name": TEXT}),
    "thread_names": (("ThreadNames",), {"globalTid": INT, "nameId": INT, "priority": INT}),
    "gpus": (
        ("TARGET_INFO_GPU",),
        {
            "id": INT,
            "name": TEXT,
            "smCount": INT,
            "totalMemory": INT,
            "busLocation": TEXT,
            "uuid": TEXT,
        },
    ),
    "session_start": (("TARGET_INFO_SESSION_START_TIME",), {"utcEpochNs": INT, "utcTime": TEXT}),
    "meta": (("META_DATA_EXPORT", "EXPORT_META_DATA"), {"name": TEXT, "value": TEXT}),
    "analysis": (("ANALYSIS_DETAILS",), {"duration": INT, "stopTime": INT}),
    "capture_meta": (("META_DATA_CAPTURE",), {"name": TEXT, "value": TEXT}),
    "system_env": (("TARGET_INFO_SYSTEM_ENV",), {"name": TEXT, "value": TEXT}),
}

# The columns that say when and where an event ran: a row whose value there is not a whole
# number (see sqlite_source) counts in its `_not_integer`, and the views leave it out.
TIME_AND_PLACE = frozenset(
    {"start", "end", "deviceId", "contextId", "streamId", "globalPid", "globalTid"}
)

# Rows of TARGET_INFO_SYSTEM_ENV worth reading (others can hold huge or non-UTF-8 values):
# the host name, and the recorded environment (nsys before 2021 has no Hostname row; the
# environment's HOSTNAME names the host then).
RAW_FILTERS = {
    "system_env": "\"name\" IN ('Hostname', 'DeviceEnvironment')",
    "capture_meta": "\"name\" = 'CAPTURE_EVENT_TYPE'",
    "nvtx_payload": '"binaryData" IS NOT NULL',
}
