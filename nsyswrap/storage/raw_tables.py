"""The columns nsyswrap reads from each export table, by name, with their types.

Names follow the real exports of nsys 2022.2 to 2026.2 (see
shared/docs/nsys-schema.md); a column or table missing from a report reads as
typed NULLs / no rows. Each table appears in DuckDB as `raw_<key>`.
"""

from __future__ import annotations

I, R, T, B = "INTEGER", "REAL", "TEXT", "BLOB"

_DEVICE_ROW = {
    "start": I,
    "end": I,
    "deviceId": I,
    "contextId": I,
    "streamId": I,
    "correlationId": I,
    "globalPid": I,
}

RAW_TABLES: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "kernel": (
        ("CUPTI_ACTIVITY_KIND_KERNEL",),
        {
            **_DEVICE_ROW,
            "demangledName": I,
            "shortName": I,
        },
    ),
    "memcpy": (
        ("CUPTI_ACTIVITY_KIND_MEMCPY",),
        {
            **_DEVICE_ROW,
            "bytes": I,
            "copyKind": I,
            "srcKind": I,
            "dstKind": I,
        },
    ),
    "memset": (("CUPTI_ACTIVITY_KIND_MEMSET",), {**_DEVICE_ROW, "bytes": I}),
    "sync": (("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",), {**_DEVICE_ROW, "syncType": I}),
    "runtime": (
        ("CUPTI_ACTIVITY_KIND_RUNTIME",),
        {
            "start": I,
            "end": I,
            "eventClass": I,
            "globalTid": I,
            "correlationId": I,
            "nameId": I,
        },
    ),
    "nvtx": (
        ("NVTX_EVENTS",),
        {
            "start": I,
            "end": I,
            "eventType": I,
            "rangeId": I,
            "category": I,
            "color": I,
            "text": T,
            "globalTid": I,
            "endGlobalTid": I,
            "textId": I,
            "domainId": I,
            "uint64Value": I,
            "int64Value": I,
            "doubleValue": R,
            "uint32Value": I,
            "int32Value": I,
            "floatValue": R,
        },
    ),
    # NVTX events with an extended payload (binaryData: a BLOB in a TEXT column, from nsys
    # 2024.6.2, filled only by `nsys export --include-blobs=true`) and the payload schemas
    "nvtx_payload": (
        ("NVTX_EVENTS",),
        {
            "start": I,
            "end": I,
            "eventType": I,
            "text": T,
            "globalTid": I,
            "textId": I,
            "domainId": I,
            "binaryData": B,
        },
    ),
    "payload_schemas": (
        ("NVTX_PAYLOAD_SCHEMAS",),
        {"domainId": I, "schemaId": I, "payloadSize": I},
    ),
    "payload_entries": (
        ("NVTX_PAYLOAD_SCHEMA_ENTRIES",),
        {
            "domainId": I,
            "schemaId": I,
            "idx": I,
            "type": I,
            "name": T,
            "offset": I,
        },
    ),
    "osrt": (
        ("OSRT_API",),
        {
            "start": I,
            "end": I,
            "eventClass": I,
            "globalTid": I,
            "nameId": I,
            "nestingLevel": I,
        },
    ),
    "gpu_memory": (
        ("CUDA_GPU_MEMORY_USAGE_EVENTS",),
        {
            "start": I,
            "globalPid": I,
            "deviceId": I,
            "contextId": I,
            "address": I,
            "bytes": I,
            "memKind": I,
            "memoryOperationType": I,
            "correlationId": I,
            "streamId": I,
        },
    ),
    "strings": (("StringIds",), {"id": I, "value": T}),
    "processes": (("PROCESSES",), {"globalPid": I, "pid": I, "name": T}),
    "gpus": (("TARGET_INFO_GPU",), {"id": I, "name": T, "smCount": I, "totalMemory": I}),
    "session_start": (("TARGET_INFO_SESSION_START_TIME",), {"utcEpochNs": I, "utcTime": T}),
    "meta": (("META_DATA_EXPORT", "EXPORT_META_DATA"), {"name": T, "value": T}),
    "analysis": (("ANALYSIS_DETAILS",), {"duration": I, "stopTime": I}),
    "system_env": (("TARGET_INFO_SYSTEM_ENV",), {"name": T, "value": T}),
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
    "nvtx_payload": '"binaryData" IS NOT NULL',
}
