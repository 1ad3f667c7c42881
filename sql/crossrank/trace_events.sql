-- One row per event of the aligned multi-rank trace: NVTX ranges, GPU
-- activities (kernels, copies, sets) and the wait of each rank inside each
-- matched collective, in run time (each report's clock: offset and drift, see
-- crossrank.clock_offsets and the macro run_ns). With
-- step_from / step_to only events overlapping those steps (on any rank) are
-- kept, with window_nvtx only those overlapping the NVTX ranges LIKE it (from the
-- first start to the last end on any rank; both: the intersection); at most
-- max_events, longest first. An event is its process's rank
-- (crossrank.clock_offsets: a report may hold several); the event of a process that
-- is no rank, the lowest rank of its report.
-- @scope run
-- @include metrics
-- @reads xr_alignment, xr_clock, xr_steps, xr_events
-- @param max_events BIGINT = 100000  At most this many events, longest first.
-- @column rank INTEGER             Rank of the event's process.
-- @column track VARCHAR            `thread <tid>`, `GPU <device> stream
--                                  <stream>` or `collective wait`.
-- @column name VARCHAR             Range text, kernel name or `wait <op> ...`.
-- @column category VARCHAR         nvtx, wait or the kernel's kernels.kind.
-- @column start_ns BIGINT          Start, ns of run time.
-- @column dur_ns BIGINT            Duration (ns).
WITH alignment AS MATERIALIZED (
    SELECT * FROM xr_alignment
),
members AS (
    SELECT report_rank, pid, rank, min(rank) OVER (PARTITION BY report_rank) AS lowest
    FROM xr_clock
),
offsets AS (
    -- Per report (its processes share one clock): its shift and drift.
    SELECT DISTINCT report_rank AS rank, shift_ns, drift_ppb FROM xr_clock WHERE aligned
),
bounds AS (
    -- The window in run time: the selected steps' and the matching ranges' spans (a
    -- limit without a match: no row); no limit: one row of NULLs.
    SELECT
        greatest(s.start_ns, n.start_ns) AS start_ns,
        least(s.end_ns, n.end_ns) AS end_ns
    FROM (
        SELECT
            min(run_ns(s.start_ns, o.shift_ns, o.drift_ppb)) AS start_ns,
            max(run_ns(s.end_ns, o.shift_ns, o.drift_ppb)) AS end_ns
        FROM xr_steps AS s
        JOIN offsets AS o
            USING (rank)
        WHERE ($step_from IS NOT NULL OR $step_to IS NOT NULL)
            AND s.step >= coalesce($step_from, s.step)
            AND s.step < coalesce($step_to, s.step + 1)
    ) AS s
    CROSS JOIN (
        SELECT
            min(run_ns(e.start_ns, o.shift_ns, o.drift_ppb)) AS start_ns,
            max(run_ns(e.end_ns, o.shift_ns, o.drift_ppb)) AS end_ns
        FROM xr_events AS e
        JOIN offsets AS o
            USING (rank)
        WHERE e.source = 'nvtx'
            AND e.name LIKE $window_nvtx
    ) AS n
    WHERE (s.start_ns IS NOT NULL OR ($step_from IS NULL AND $step_to IS NULL))
        AND (n.start_ns IS NOT NULL OR $window_nvtx IS NULL)
),
windows AS (
    -- Per rank, the window in session time (run_ns inverted to the ns; no rows
    -- without a window).
    SELECT
        o.rank,
        o.shift_ns,
        o.drift_ppb,
        floor((b.start_ns - o.shift_ns) / (1 + o.drift_ppb / 1e9))::BIGINT AS start_ns,
        ceil((b.end_ns - o.shift_ns) / (1 + o.drift_ppb / 1e9))::BIGINT AS end_ns
    FROM offsets AS o
    CROSS JOIN bounds AS b
    WHERE $window_nvtx IS NOT NULL
        OR $step_from IS NOT NULL
        OR $step_to IS NOT NULL
),
events AS NOT MATERIALIZED (
    -- Without a window only the longest max_events of each rank can make the list;
    -- with one, the join bounds are pushed into the scans of xr_events.
    SELECT
        e.rank,
        e.pid,
        e.source,
        e.tid,
        e.device,
        e.stream,
        e.name,
        e.category,
        run_ns(e.start_ns, o.shift_ns, o.drift_ppb) AS start_ns,
        run_ns(e.end_ns, o.shift_ns, o.drift_ppb) - run_ns(e.start_ns, o.shift_ns, o.drift_ppb) AS dur_ns
    FROM xr_events AS e
    JOIN offsets AS o
        USING (rank)
    WHERE $window_nvtx IS NULL
        AND $step_from IS NULL
        AND $step_to IS NULL
        AND e.dur_rank <= $max_events
    UNION ALL
    SELECT
        e.rank,
        e.pid,
        e.source,
        e.tid,
        e.device,
        e.stream,
        e.name,
        e.category,
        run_ns(e.start_ns, w.shift_ns, w.drift_ppb),
        run_ns(e.end_ns, w.shift_ns, w.drift_ppb) - run_ns(e.start_ns, w.shift_ns, w.drift_ppb)
    FROM xr_events AS e
    JOIN windows AS w
        ON w.rank = e.rank
        AND e.end_ns > w.start_ns
        AND e.start_ns < w.end_ns
    UNION ALL
    SELECT
        a.rank,
        NULL,
        'wait',
        NULL,
        NULL,
        NULL,
        'wait ' || a.op || ' pg=' || a.pg || ' seq=' || a.seq,
        'wait',
        a.start_ns,
        a.wait_ns
    FROM alignment AS a
    CROSS JOIN bounds AS b
    WHERE a.wait_ns > 0
        AND (
            ($window_nvtx IS NULL AND $step_from IS NULL AND $step_to IS NULL)
            OR (a.start_ns + a.wait_ns > b.start_ns AND a.start_ns < b.end_ns)
        )
),
cut AS (
    -- The shortest duration that makes the list: only events at least this long
    -- are sorted on all keys (a NULL duration among the longest: no cut).
    SELECT
        CASE WHEN NOT bool_or(dur_ns IS NULL) THEN min(dur_ns) END AS dur_ns
    FROM (
        SELECT dur_ns
        FROM events
        ORDER BY dur_ns DESC
        LIMIT $max_events
    )
),
chosen AS (
    -- The track is spelled out only for the events that make the list.
    SELECT
        CASE WHEN e.source = 'wait' THEN e.rank
            ELSE coalesce(m.rank, r.lowest, e.rank)
        END AS rank,
        CASE e.source
            WHEN 'nvtx' THEN 'thread ' || e.tid
            WHEN 'gpu' THEN 'GPU ' || e.device || ' stream ' || e.stream
            ELSE 'collective wait'
        END AS track,
        e.name,
        e.category,
        e.start_ns,
        e.dur_ns
    FROM events AS e
    LEFT JOIN members AS m
        ON e.source <> 'wait'
        AND m.report_rank = e.rank
        AND m.pid = e.pid
    LEFT JOIN (SELECT DISTINCT report_rank, lowest FROM members) AS r
        ON e.source <> 'wait'
        AND r.report_rank = e.rank
    WHERE coalesce(e.dur_ns >= (SELECT dur_ns FROM cut), TRUE)
)
SELECT *
FROM chosen
ORDER BY dur_ns DESC, rank, start_ns, track, name
LIMIT $max_events
