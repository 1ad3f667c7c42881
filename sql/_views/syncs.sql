-- One row per CUDA synchronization of one report (CUPTI SYNCHRONIZATION table).
-- @include _macros
-- @reads raw_sync, raw_analysis
-- The span is the host-side wait. deviceId is 0 on every row in real exports,
-- so attribute syncs by pid and context, not device. Syncs whose times cannot be right
-- (event_defect) are left out (and counted by data_quality).
-- @column pid BIGINT              Process id, decoded from globalPid.
-- @column device BIGINT           deviceId as exported (unreliable, see above).
-- @column context BIGINT          CUDA context id.
-- @column stream BIGINT           CUDA stream id (4294967295 for context syncs).
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns on the report's session clock.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column correlation_id BIGINT   Correlation id of the API call that synced.
-- @column sync_type VARCHAR       event_sync, stream_wait, stream_sync, context_sync, unknown.
SELECT
    pid_of(globalPid) AS pid,
    deviceId AS device,
    contextId AS context,
    streamId AS stream,
    start AS start_ns,
    "end" AS end_ns,
    "end" - start AS dur_ns,
    correlationId AS correlation_id,
    sync_type_name(syncType) AS sync_type
FROM raw_sync
CROSS JOIN (
    SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
    FROM raw_analysis WHERE _proto = 0
) AS c
WHERE _proto = 0
    AND event_defect(start, "end", _not_integer, c.ns, c.end_ns) IS NULL
