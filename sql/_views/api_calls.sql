-- One row per CUDA runtime or driver API call of one report.
-- @include _macros
-- @reads raw_runtime, raw_strings
-- @column pid BIGINT              Process id, decoded from globalTid.
-- @column tid BIGINT              Thread id, decoded from globalTid.
-- @column api VARCHAR             API name, e.g. cudaLaunchKernel_v7000.
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns on the report's session clock.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column correlation_id BIGINT   CUPTI correlation id, unique within pid.
-- @column api_class VARCHAR       runtime, driver, or other (e.g. a second tracing
--                                 layer that repeats the call with the same id).
SELECT
    pid_of(r.globalTid) AS pid,
    tid_of(r.globalTid) AS tid,
    s.value AS api,
    r.start AS start_ns,
    r."end" AS end_ns,
    r."end" - r.start AS dur_ns,
    r.correlationId AS correlation_id,
    CASE r.eventClass WHEN 0 THEN 'runtime' WHEN 1 THEN 'driver' ELSE 'other' END
        AS api_class
FROM raw_runtime AS r
LEFT JOIN (SELECT id, value FROM raw_strings WHERE _proto = 0) AS s
    ON s.id = r.nameId
WHERE r._proto = 0
