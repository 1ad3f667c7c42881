-- One row per process of one report: those in PROCESSES plus any process that
-- @reads api_calls, kernels, nvtx, raw_processes
-- owns events but is missing there (PROCESSES is not exhaustive).
-- @column pid BIGINT     Process id.
-- @column name VARCHAR   Process name, if known.
WITH listed AS (
    SELECT pid, any_value(name) AS name
    FROM raw_processes
    WHERE _proto = 0
    GROUP BY pid
),
seen AS (
    SELECT pid FROM kernels
    UNION
    SELECT pid FROM api_calls
    UNION
    SELECT pid FROM nvtx
)
SELECT coalesce(l.pid, s.pid) AS pid, l.name
FROM listed AS l
FULL OUTER JOIN seen AS s
    ON s.pid = l.pid
