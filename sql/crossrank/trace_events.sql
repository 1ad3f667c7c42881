-- One row per event of the aligned multi-rank trace: NVTX ranges, GPU
-- activities (kernels, copies, sets) and the wait of each rank inside each
-- matched collective, in run time (see crossrank.clock_offsets). With
-- start_step / end_step only events overlapping those steps (on any rank) are
-- kept; at most max_events, longest first.
-- @param start_step BIGINT = NULL  First step of the window (NULL: first).
-- @param end_step BIGINT = NULL    Last step, included (NULL: last).
-- @param max_events BIGINT = 100000  At most this many events, longest first.
-- @column rank INTEGER             Rank of the report.
-- @column track VARCHAR            `thread <tid>`, `GPU <device> stream
--                                  <stream>` or `collective wait`.
-- @column name VARCHAR             Range text, kernel name or `wait <op> ...`.
-- @column category VARCHAR         nvtx, wait or the kernel's kernels.kind.
-- @column start_ns BIGINT          Start, ns of run time.
-- @column dur_ns BIGINT            Duration (ns).
WITH alignment AS MATERIALIZED (
    SELECT * FROM xr_alignment()
),
offsets AS (
    SELECT DISTINCT rank, shift_ns FROM alignment
),
bounds AS (
    SELECT
        min(s.start_ns + o.shift_ns) AS start_ns,
        max(s.end_ns + o.shift_ns) AS end_ns
    FROM xr_steps() AS s
    JOIN offsets AS o
        USING (rank)
    WHERE s.step >= coalesce($start_step, s.step)
        AND s.step <= coalesce($end_step, s.step)
),
waits AS (
    SELECT
        rank,
        'wait ' || op || ' pg=' || pg || ' seq=' || seq AS name,
        start_ns,
        wait_ns
    FROM alignment
    WHERE wait_ns > 0
),
events AS NOT MATERIALIZED (
    -- The track is spelled out only for the events that make the list.
    SELECT
        n.rank,
        'nvtx' AS source,
        n.tid,
        NULL AS device,
        NULL AS stream,
        n.text AS name,
        'nvtx' AS category,
        n.start_ns + o.shift_ns AS start_ns,
        n.dur_ns
    FROM nvtx AS n
    JOIN offsets AS o
        USING (rank)
    WHERE n.event_type <> 'mark'
    UNION ALL
    SELECT
        k.rank,
        'gpu',
        NULL,
        k.device,
        k.stream,
        k.name,
        k.kind,
        k.start_ns + o.shift_ns,
        k.dur_ns
    FROM kernels AS k
    JOIN offsets AS o
        USING (rank)
    UNION ALL
    SELECT rank, 'wait', NULL, NULL, NULL, name, 'wait', start_ns, wait_ns
    FROM waits
),
windowed AS NOT MATERIALIZED (
    SELECT e.*
    FROM events AS e
    CROSS JOIN bounds AS b
    WHERE ($start_step IS NULL AND $end_step IS NULL)
        OR (e.start_ns + e.dur_ns > b.start_ns AND e.start_ns < b.end_ns)
),
cut AS (
    -- The shortest duration that makes the list: only events at least this long
    -- are sorted on all keys (a NULL duration among the longest: no cut).
    SELECT
        CASE WHEN NOT bool_or(dur_ns IS NULL) THEN min(dur_ns) END AS dur_ns
    FROM (
        SELECT dur_ns
        FROM windowed
        ORDER BY dur_ns DESC
        LIMIT $max_events
    )
),
chosen AS (
    SELECT
        e.rank,
        CASE e.source
            WHEN 'nvtx' THEN 'thread ' || e.tid
            WHEN 'gpu' THEN 'GPU ' || e.device || ' stream ' || e.stream
            ELSE 'collective wait'
        END AS track,
        e.name,
        e.category,
        e.start_ns,
        e.dur_ns
    FROM windowed AS e
    WHERE coalesce(e.dur_ns >= (SELECT dur_ns FROM cut), TRUE)
)
SELECT *
FROM chosen
ORDER BY dur_ns DESC, rank, start_ns, track, name
LIMIT $max_events
