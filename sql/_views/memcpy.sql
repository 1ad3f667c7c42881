-- One row per memcpy of one report.
-- @include _macros
-- @reads raw_memcpy
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
WHERE _proto = 0
