-- One row per event of the aligned multi-rank trace: NVTX ranges, CUDA API calls, GPU
-- activities (kernels, copies, sets), and each rank's part in each matched collective
-- (from its arrival to its end) with the wait inside it (until the last rank arrived), in
-- run time (each report's clock: offset, drift and jump, see crossrank.clock_offsets and
-- the macro run_ns). With step_from / step_to only events overlapping those steps (on any
-- rank) are kept, with window_nvtx only those overlapping the NVTX ranges LIKE it (from
-- the first start to the last end on any rank; both: the intersection); at most
-- max_events, longest first. An event is its process's rank (crossrank.clock_offsets: a
-- report may hold several); the event of a process that is no rank, the lowest rank of
-- its report.
-- @scope run
-- @include metrics
-- @reads xr_alignment, xr_clock, xr_steps, xr_events
-- @param max_events BIGINT = 100000  At most this many events, longest first.
-- @column rank INTEGER             Rank of the event's process.
-- @column track VARCHAR            `<thread name> <tid>` (NVTX ranges; `thread <tid>` when
--                                  the thread has no recorded name), the same with ` CUDA
--                                  API` (calls), `GPU <device> stream <stream>` or
--                                  `collectives`.
-- @column name VARCHAR             Range text, API or kernel name, `<op> pg=<pg> seq=<seq>`
--                                  (a collective) or `wait <op> pg=<pg> seq=<seq>`.
-- @column category VARCHAR         nvtx, cuda_api, collective, wait or the activity's
--                                  kernels.kind.
-- @column start_ns BIGINT          Start, ns of run time.
-- @column dur_ns BIGINT            Duration (ns).
-- @column pid BIGINT               Process of a range, call or activity (NULL for a
--                                  collective or wait).
-- @column tid BIGINT               Thread of a range or call (NULL otherwise).
-- @column device BIGINT            Device of a GPU activity (NULL otherwise).
-- @column stream BIGINT            Stream of a GPU activity (NULL otherwise).
-- @column correlation_id BIGINT    CUPTI correlation id of a call or activity.
-- @column domain VARCHAR           NVTX domain of a range.
-- @column grid VARCHAR             A kernel's grid (`x,y,z` blocks).
-- @column block VARCHAR            A kernel's block (`x,y,z` threads).
-- @column bytes BIGINT             Bytes of a copy, set, collective range or collective.
-- @column op VARCHAR               Op of a collective range, collective or wait.
-- @column dtype VARCHAR            Dtype of a collective range.
-- @column pg VARCHAR               Process group of a collective range, collective or wait.
-- @column seq BIGINT               Sequence number in that group.
-- @column wait_ns BIGINT           A collective's wait on this rank before the last rank
--                                  arrived (ns; NULL otherwise).
-- @column last_rank INTEGER        A collective's last rank to arrive (NULL otherwise).
WITH alignment AS MATERIALIZED (
    SELECT * FROM xr_alignment
),
members AS (
    SELECT report_rank, pid, rank, min(rank) OVER (PARTITION BY report_rank) AS lowest
    FROM xr_clock
),
offsets AS (
    -- Per report (its processes share one clock): its shift and drift.
    SELECT DISTINCT report_rank AS rank, shift_ns, drift_ppb, jump_at_ns, jump_ns
    FROM xr_clock
    WHERE aligned
),
bounds AS (
    -- The window in run time: the selected steps' and the matching ranges' spans (a
    -- limit without a match: no row); no limit: one row of NULLs.
    SELECT
        greatest(s.start_ns, n.start_ns) AS start_ns,
        least(s.end_ns, n.end_ns) AS end_ns
    FROM (
        SELECT
            min(run_ns(s.start_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns)) AS start_ns,
            max(run_ns(s.end_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns)) AS end_ns
        FROM xr_steps AS s
        JOIN offsets AS o
            USING (rank)
        WHERE ($step_from IS NOT NULL OR $step_to IS NOT NULL)
            AND s.step >= coalesce($step_from, s.step)
            AND s.step < coalesce($step_to, s.step + 1)
    ) AS s
    CROSS JOIN (
        SELECT
            min(run_ns(e.start_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns)) AS start_ns,
            max(run_ns(e.end_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns)) AS end_ns
        FROM xr_events AS e
        JOIN offsets AS o
            USING (rank)
        WHERE e.source = 'nvtx'
            AND e.name LIKE $window_nvtx
    ) AS n
    WHERE (s.start_ns IS NOT NULL OR ($step_from IS NULL AND $step_to IS NULL))
        AND (n.start_ns IS NOT NULL OR $window_nvtx IS NULL)
),
clock_windows AS (
    -- Per rank, the window on its clock (run_ns inverted to the ns, before the jump is
    -- added back; no rows without a window).
    SELECT
        o.rank,
        o.shift_ns,
        o.drift_ppb,
        o.jump_at_ns,
        o.jump_ns,
        floor((b.start_ns - o.shift_ns) / (1 + o.drift_ppb / 1e9))::BIGINT AS start_ns,
        ceil((b.end_ns - o.shift_ns) / (1 + o.drift_ppb / 1e9))::BIGINT AS end_ns
    FROM offsets AS o
    CROSS JOIN bounds AS b
    WHERE $window_nvtx IS NOT NULL
        OR $step_from IS NOT NULL
        OR $step_to IS NOT NULL
),
windows AS (
    -- In session time: readings from jump_at_ns on are jump_ns late (where the jump's
    -- readings could fall on either side, the wider window).
    SELECT
        * EXCLUDE (start_ns, end_ns),
        start_ns + CASE WHEN start_ns >= jump_at_ns THEN jump_ns ELSE 0 END AS start_ns,
        end_ns + CASE WHEN end_ns >= jump_at_ns - jump_ns THEN jump_ns ELSE 0 END AS end_ns
    FROM clock_windows
),
events AS NOT MATERIALIZED (
    -- Without a window only the longest max_events of each rank can make the list;
    -- with one, the join bounds are pushed into the scans of xr_events.
    SELECT
        e.* EXCLUDE (start_ns, end_ns, dur_ns, dur_rank),
        run_ns(e.start_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns) AS start_ns,
        run_ns(e.end_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns)
        - run_ns(e.start_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns) AS dur_ns
    FROM xr_events AS e
    JOIN offsets AS o
        USING (rank)
    WHERE $window_nvtx IS NULL
        AND $step_from IS NULL
        AND $step_to IS NULL
        AND e.dur_rank <= $max_events
    UNION ALL BY NAME
    SELECT
        e.* EXCLUDE (start_ns, end_ns, dur_ns, dur_rank),
        run_ns(e.start_ns, w.shift_ns, w.drift_ppb, w.jump_at_ns, w.jump_ns) AS start_ns,
        run_ns(e.end_ns, w.shift_ns, w.drift_ppb, w.jump_at_ns, w.jump_ns)
        - run_ns(e.start_ns, w.shift_ns, w.drift_ppb, w.jump_at_ns, w.jump_ns) AS dur_ns
    FROM xr_events AS e
    JOIN windows AS w
        ON w.rank = e.rank
        AND e.end_ns > w.start_ns
        AND e.start_ns < w.end_ns
    UNION ALL BY NAME
    -- Each rank's part in each matched collective: from its arrival to its end, and the
    -- wait inside it.
    SELECT
        a.rank,
        part.source,
        CASE part.source WHEN 'wait' THEN 'wait ' ELSE '' END
        || a.op || ' pg=' || a.pg || ' seq=' || a.seq AS name,
        part.source AS category,
        a.start_ns,
        CASE part.source WHEN 'wait' THEN a.wait_ns ELSE a.end_ns - a.start_ns END AS dur_ns,
        a.bytes,
        a.op,
        a.pg,
        a.seq,
        a.wait_ns,
        a.last_rank
    FROM alignment AS a
    CROSS JOIN (VALUES ('collective'), ('wait')) AS part(source)
    CROSS JOIN bounds AS b
    WHERE a.seq IS NOT NULL
        AND (part.source = 'collective' OR a.wait_ns > 0)
        AND (
            ($window_nvtx IS NULL AND $step_from IS NULL AND $step_to IS NULL)
            OR (a.end_ns > b.start_ns AND a.start_ns < b.end_ns)
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
        CASE WHEN e.source IN ('collective', 'wait') THEN e.rank
            ELSE coalesce(m.rank, r.lowest, e.rank)
        END AS rank,
        CASE e.source
            WHEN 'nvtx' THEN coalesce(e.thread_name, 'thread') || ' ' || e.tid
            WHEN 'api' THEN coalesce(e.thread_name, 'thread') || ' ' || e.tid || ' CUDA API'
            WHEN 'gpu' THEN 'GPU ' || e.device || ' stream ' || e.stream
            ELSE 'collectives'
        END AS track,
        e.name,
        e.category,
        e.start_ns,
        e.dur_ns,
        e.pid,
        e.tid,
        e.device,
        e.stream,
        e.correlation_id,
        e.domain,
        e.grid,
        e.block,
        e.bytes,
        e.op,
        e.dtype,
        e.pg,
        e.seq,
        e.wait_ns,
        e.last_rank
    FROM events AS e
    LEFT JOIN members AS m
        ON e.source NOT IN ('collective', 'wait')
        AND m.report_rank = e.rank
        AND m.pid = e.pid
    LEFT JOIN (SELECT DISTINCT report_rank, lowest FROM members) AS r
        ON e.source NOT IN ('collective', 'wait')
        AND r.report_rank = e.rank
    WHERE coalesce(e.dur_ns >= (SELECT dur_ns FROM cut), TRUE)
)
SELECT *
FROM chosen
ORDER BY dur_ns DESC, rank, start_ns, track, name
LIMIT $max_events
