-- One row per event of one rank's trace: an NVTX range (not a mark) or a GPU activity
-- (kernel, copy, set). Rows are stored longest first for the rank's 100000 longest
-- events (crossrank.trace_events' default max_events), then by start: reading the
-- longest N (dur_rank <= N) or a time window (start_ns, end_ns) skips the other row
-- groups. Times are session ns.
-- @reads nvtx, kernels
-- @column source VARCHAR          nvtx (an NVTX range) or gpu (a GPU activity).
-- @column pid BIGINT              Process of the range or activity.
-- @column tid BIGINT              Thread of an NVTX range (NULL for gpu).
-- @column device BIGINT           Device of a GPU activity (NULL for nvtx).
-- @column stream BIGINT           Stream of a GPU activity (NULL for nvtx).
-- @column name VARCHAR            Range text or kernel name.
-- @column category VARCHAR        nvtx, or the activity's kernels.kind.
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           start_ns + dur_ns (ns).
-- @column dur_ns BIGINT           Duration (ns).
-- @column dur_rank BIGINT         1 + the rank's events that are longer (ties share
--                                 it; NULL durations come last).
WITH events AS (
    SELECT
        'nvtx' AS source,
        pid,
        tid,
        CAST(NULL AS BIGINT) AS device,
        CAST(NULL AS BIGINT) AS stream,
        text AS name,
        'nvtx' AS category,
        start_ns,
        dur_ns
    FROM nvtx
    WHERE event_type <> 'mark'
    UNION ALL
    SELECT 'gpu', pid, CAST(NULL AS BIGINT), device, stream, name, kind, start_ns, dur_ns
    FROM kernels
),
ranked AS (
    SELECT
        source,
        pid,
        tid,
        device,
        stream,
        name,
        category,
        start_ns,
        start_ns + dur_ns AS end_ns,
        dur_ns,
        rank() OVER (ORDER BY dur_ns DESC NULLS LAST) AS dur_rank
    FROM events
)
SELECT *
FROM ranked
ORDER BY
    CASE WHEN dur_rank <= 100000 THEN dur_rank END NULLS LAST,
    start_ns
