-- One row per memcpy of one report.
-- @include _macros
-- @reads raw_memcpy, raw_analysis
-- Copies whose times cannot be right (event_defect) or without a device are left out (and
-- counted by data_quality).
-- @column pid BIGINT              Process id, decoded from globalPid.
-- @column device BIGINT           CUDA device id.
-- @column context BIGINT          CUDA context id.
-- @column stream BIGINT           CUDA stream id.
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns on the report's session clock.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column correlation_id BIGINT   CUPTI correlation id, unique within pid.
-- @column bytes BIGINT            Bytes copied.
-- @column copy_kind VARCHAR       HtoD, DtoH, DtoD, PtoP, ... (ENUM_CUDA_MEMCPY_OPER).
-- @column src_kind VARCHAR        Source memory: Pageable, Pinned, Device, Array, Managed, ...
--                                 (ENUM_CUDA_MEM_KIND); Unknown when not recorded.
-- @column dst_kind VARCHAR        Destination memory, as src_kind.
SELECT
    pid_of(globalPid) AS pid,
    deviceId AS device,
    contextId AS context,
    streamId AS stream,
    start AS start_ns,
    "end" AS end_ns,
    "end" - start AS dur_ns,
    correlationId AS correlation_id,
    bytes,
    coalesce(copy_kind_name(copyKind), 'Unknown') AS copy_kind,
    coalesce(mem_kind_name(srcKind), 'Unknown') AS src_kind,
    coalesce(mem_kind_name(dstKind), 'Unknown') AS dst_kind
FROM raw_memcpy
CROSS JOIN (
    SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
    FROM raw_analysis WHERE _proto = 0
) AS c
WHERE _proto = 0
    AND event_defect(start, "end", _not_integer, c.ns, c.end_ns) IS NULL
    AND deviceId IS NOT NULL
