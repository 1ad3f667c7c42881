-- One row per report: when and with what it was captured.
-- @reads raw_meta, raw_session_start, raw_system_env, raw_capture_meta
-- @column utc_epoch_ns BIGINT    UTC time of the session clock's zero, ns since 1970.
-- @column utc_time VARCHAR       The same as ISO text.
-- @column nsys_version VARCHAR   Nsight Systems version that exported the report.
-- @column schema_version VARCHAR Export schema version.
-- @column host VARCHAR           Host name of the captured machine: its Hostname row,
--                                 else HOSTNAME, SLURMD_NODENAME or PMIX_HOSTNAME of
--                                 the recorded environment (NULL: none recorded).
-- @column traced VARCHAR         What nsys recorded tracing (META_DATA_CAPTURE's
--                                 CAPTURE_EVENT_TYPE rows) in nsys --trace names,
--                                 sorted, comma-separated: cuda, nvtx, osrt (others
--                                 as nsys names them, lower case); NULL: the export
--                                 does not record it (nsys 2022 has no such table).
WITH meta AS (
    SELECT name, value FROM raw_meta WHERE _proto = 0
),
env AS (
    -- The recorded environment, one variable per line.
    SELECT replace(value, chr(0), chr(10)) AS lines
    FROM raw_system_env
    WHERE _proto = 0
        AND name = 'DeviceEnvironment'
)
SELECT
    (SELECT max(utcEpochNs) FROM raw_session_start WHERE _proto = 0) AS utc_epoch_ns,
    (SELECT max(utcTime) FROM raw_session_start WHERE _proto = 0) AS utc_time,
    (SELECT max(value) FROM meta WHERE name = 'EXPORT_PRODUCT_VERSION') AS nsys_version,
    (SELECT max(value) FROM meta WHERE name = 'EXPORT_SCHEMA_VERSION') AS schema_version,
    coalesce(
        (SELECT max(value) FROM raw_system_env WHERE _proto = 0 AND name = 'Hostname'),
        (SELECT max(nullif(regexp_extract(lines, '(?m)^HOSTNAME=(.+)$', 1), '')) FROM env),
        (SELECT max(nullif(regexp_extract(lines, '(?m)^SLURMD_NODENAME=(.+)$', 1), '')) FROM env),
        (SELECT max(nullif(regexp_extract(lines, '(?m)^PMIX_HOSTNAME=(.+)$', 1), '')) FROM env)
    ) AS host,
    (
        SELECT string_agg(DISTINCT traced, ',' ORDER BY traced)
        FROM (
            SELECT CASE value
                WHEN 'Cuda' THEN 'cuda'
                WHEN 'NvtxEvents' THEN 'nvtx'
                WHEN 'OSRuntime' THEN 'osrt'
                ELSE lower(value)
            END AS traced
            FROM raw_capture_meta
            WHERE _proto = 0 AND name = 'CAPTURE_EVENT_TYPE'
        )
    ) AS traced
