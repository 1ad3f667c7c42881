-- One row per CUDA runtime or driver API call of one report.
-- @include _macros
-- @reads raw_runtime, raw_strings, raw_analysis
-- Calls whose times cannot be right (event_defect) are left out (and counted by data_quality).
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
LEFT JOIN (SELECT id, min(value) AS value FROM raw_strings WHERE _proto = 0 GROUP BY id) AS s
    ON s.id = r.nameId
CROSS JOIN (
    SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
    FROM raw_analysis WHERE _proto = 0
) AS c
WHERE r._proto = 0
    AND event_defect(r.start, r."end", r._not_integer, c.ns, c.end_ns) IS NULL
