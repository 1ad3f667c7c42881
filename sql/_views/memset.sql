-- One row per memset of one report.
-- @include _macros
-- @reads raw_memset
-- @column pid BIGINT              Process id, decoded from globalPid.
-- @column device BIGINT           CUDA device id.
-- @column context BIGINT          CUDA context id.
-- @column stream BIGINT           CUDA stream id.
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns on the report's session clock.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column correlation_id BIGINT   CUPTI correlation id, unique within pid.
-- @column bytes BIGINT            Bytes set.
SELECT
    pid_of(globalPid) AS pid,
    deviceId AS device,
    contextId AS context,
    streamId AS stream,
    start AS start_ns,
    "end" AS end_ns,
    "end" - start AS dur_ns,
    correlationId AS correlation_id,
    bytes
FROM raw_memset
WHERE _proto = 0
