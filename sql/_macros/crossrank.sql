-- Table macros shared by the cross-rank modules (sql/crossrank/*.sql): matching
-- collectives across ranks, clock alignment, step and phase ranges. `open_run` creates
-- them after the views; names start with xr_ so they cannot collide with the metric
-- macros. A macro may only use macros defined above it. DuckDB binds the names in a
-- macro where it is used: a CTE of the caller named like a view (kernels, nvtx, ...)
-- would replace that view inside the macro, so modules must not use such names.
-- Times are session ns unless a column says run time (ns since the reference rank's
-- aligned session start). Step arguments: p_step_from / p_step_to (half-open step
-- numbers, NULL: unbounded).

-- ASOF joins must stay sort-merge joins (see metrics.sql).
SET asof_loop_join_threshold = 0;

-- One row per rank and collective key (pg, seq) it issued, with the key's verdict.
-- Keys are (pg, seq) of the `coll:` ranges when every report has some, else the k-th
-- NCCL kernel of an op on a device (pg 'nccl:<Op>'). kernel_*: the NCCL kernels
-- launched inside the range on the same thread. The verdict columns (ranks ..
-- matches) are NULL for groups seen on one rank only (not checked); matches: every
-- rank of the group has the key and no key of the group differs at or before it.
CREATE OR REPLACE MACRO xr_collective_keys() AS TABLE
WITH nccl AS (
    -- NCCL kernels with their launch call (the launches view: the runtime call when
    -- a driver call repeats the correlation id). Only NCCL launches are read, not
    -- every API call.
    SELECT
        k.rank,
        k.device,
        k.start_ns,
        k.end_ns,
        k.coll_op,
        min(l.start_ns) AS launch_ns,
        arg_min(l.tid, l.start_ns) AS tid,
        any_value(k.pid) AS pid
    FROM kernels AS k
    LEFT JOIN launches AS l
        ON l.rank = k.rank
        AND l.pid = k.pid
        AND l.correlation_id = k.correlation_id
        AND l.kind = 'nccl'
    WHERE k.kind = 'nccl'
    GROUP BY k.rank, k.pid, k.device, k.correlation_id, k.start_ns, k.end_ns,
        k.coll_op
),
range_kernels AS (
    -- NCCL kernels launched inside a collective range on the same thread.
    SELECT
        c.rank,
        c.pg,
        c.seq,
        min(n.start_ns) AS kernel_start_ns,
        max(n.end_ns) AS kernel_end_ns
    FROM nccl AS n
    ASOF JOIN collectives AS c
        ON c.rank = n.rank
        AND c.pid = n.pid
        AND c.tid = n.tid
        AND c.start_ns <= n.launch_ns
    WHERE n.launch_ns <= c.end_ns
    GROUP BY c.rank, c.pg, c.seq
),
keyed_by_range AS (
    SELECT
        c.rank,
        c.pg,
        c.seq,
        c.op,
        c.bytes,
        c.group_size,
        c.start_ns AS cpu_start_ns,
        c.end_ns AS cpu_end_ns,
        rk.kernel_start_ns,
        rk.kernel_end_ns
    FROM collectives AS c
    LEFT JOIN range_kernels AS rk
        USING (rank, pg, seq)
    WHERE c.pg IS NOT NULL
        AND c.seq IS NOT NULL
),
device_kernels AS (
    -- Without collective ranges: the k-th NCCL kernel of an op on a device.
    SELECT
        *,
        row_number() OVER (
            PARTITION BY rank, device, coll_op ORDER BY start_ns, end_ns
        ) - 1 AS seq
    FROM nccl
    WHERE coll_op IS NOT NULL
),
keyed_by_kernel AS (
    SELECT
        rank,
        'nccl:' || coll_op AS pg,
        seq,
        lower(regexp_replace(coll_op, '([a-z])([A-Z])', '\1_\2', 'g')) AS op,
        CAST(NULL AS BIGINT) AS bytes,
        CAST(NULL AS BIGINT) AS group_size,
        min(launch_ns) AS cpu_start_ns,
        CAST(NULL AS BIGINT) AS cpu_end_ns,
        min(start_ns) AS kernel_start_ns,
        max(end_ns) AS kernel_end_ns
    FROM device_kernels
    GROUP BY rank, coll_op, seq
),
keyed_by AS (
    -- Ranges give the keys when every report has some.
    SELECT
        (SELECT count(DISTINCT rank) FROM collectives)
        = (SELECT count(*) FROM session) AS ranges
),
per_rank AS (
    SELECT * FROM keyed_by_range WHERE (SELECT ranges FROM keyed_by)
    UNION ALL
    SELECT * FROM keyed_by_kernel WHERE NOT (SELECT ranges FROM keyed_by)
),
members AS (
    SELECT pg, count(DISTINCT rank) AS group_ranks
    FROM per_rank
    GROUP BY pg
),
keys AS (
    -- A key differs when a rank has it twice, or the ranks disagree on its op
    -- (send and recv pair up) or payload size (all_to_all sizes may differ).
    SELECT
        p.pg,
        p.seq,
        m.group_ranks,
        count(DISTINCT p.rank) AS ranks,
        count(*) > count(DISTINCT p.rank) AS duplicate,
        count(DISTINCT CASE
            WHEN p.op IN ('send', 'recv', 'isend', 'irecv') THEN 'p2p'
            ELSE p.op
        END) > 1 AS op_differs,
        count(DISTINCT CASE
            WHEN p.op NOT LIKE 'all_to_all%' THEN p.bytes
        END) > 1 AS bytes_differ
    FROM per_rank AS p
    JOIN members AS m
        USING (pg)
    WHERE m.group_ranks >= 2
    GROUP BY p.pg, p.seq, m.group_ranks
),
verdicts AS (
    -- A key matches when every rank of its group has it and no key of the
    -- group differs at or before it: past a divergence the sequences disagree.
    SELECT
        *,
        seq < coalesce(min(seq) FILTER (
            WHERE duplicate OR op_differs OR bytes_differ
        ) OVER (PARTITION BY pg), seq + 1)
        AND ranks = group_ranks AS matches
    FROM keys
)
SELECT
    p.*,
    v.group_ranks,
    v.ranks,
    v.duplicate,
    v.op_differs,
    v.bytes_differ,
    v.matches
FROM per_rank AS p
LEFT JOIN verdicts AS v
    ON v.pg = p.pg
    AND v.seq = p.seq;

-- One row per `step:<i>` NVTX range of a rank: its step number and span.
CREATE OR REPLACE MACRO xr_steps() AS TABLE
SELECT
    rank,
    CAST(regexp_extract(text, '^step:(\d+)$', 1) AS BIGINT) AS step,
    start_ns,
    end_ns
FROM nvtx
WHERE regexp_full_match(text, 'step:\d+')
    AND event_type <> 'mark';

-- One row per rank and matched collective, plus one row (pg and seq NULL) per rank
-- with none. Per rank: the clock offset to the reference rank (the lowest rank in a
-- matched collective, else the lowest) and shift_ns (session time + shift_ns = run
-- time: ns since the reference rank's aligned session start). offset_ns = median,
-- over the rank's collectives shared with the reference, of diff_ns = reference's
-- end - this rank's end, both in UTC (NCCL kernels of a collective end together);
-- a rank with kernel-timed collectives fits on those only (diff_ns NULL for the
-- rest). Per collective, in run time: arrival (start_ns) and end, by the NCCL
-- kernels when every rank has them (on_gpu), else by the ranges; the step (the
-- `step:<i>` range holding its CPU start, lowest over the ranks); the wait before
-- the last rank arrived; lag behind the median arrival; the last rank (lowest on
-- ties); skew; transfer time (shortest duration across ranks).
CREATE OR REPLACE MACRO xr_alignment() AS TABLE
WITH matched AS (
    SELECT *
    FROM xr_collective_keys()
    WHERE matches
),
spans AS (
    -- GPU times when every rank has the collective's kernels, else range times.
    SELECT
        m.*,
        s.utc_epoch_ns,
        bool_and(m.kernel_end_ns IS NOT NULL)
            OVER (PARTITION BY m.pg, m.seq) AS on_gpu
    FROM matched AS m
    JOIN session AS s
        USING (rank)
),
timed AS (
    SELECT
        *,
        CASE WHEN on_gpu THEN kernel_start_ns ELSE cpu_start_ns END AS start_ns,
        CASE WHEN on_gpu THEN kernel_end_ns ELSE cpu_end_ns END AS end_ns
    FROM spans
),
reference AS (
    SELECT rank, utc_epoch_ns
    FROM session
    ORDER BY rank NOT IN (SELECT rank FROM matched), rank
    LIMIT 1
),
end_diffs AS (
    -- Per collective: how much later, in UTC, the reference rank saw its end.
    SELECT
        t.rank,
        t.pg,
        t.seq,
        t.on_gpu,
        (r.utc_epoch_ns - t.utc_epoch_ns) + (r.end_ns - t.end_ns) AS diff_ns
    FROM timed AS t
    JOIN timed AS r
        ON r.pg = t.pg
        AND r.seq = t.seq
        AND r.rank = (SELECT rank FROM reference)
    QUALIFY t.on_gpu = max(t.on_gpu) OVER (PARTITION BY t.rank)
),
fits AS (
    SELECT
        rank,
        round(median(diff_ns))::BIGINT AS offset_ns,
        any_value(on_gpu) AS on_gpu,
        count(*) AS collectives
    FROM end_diffs
    GROUP BY rank
),
offsets AS (
    SELECT
        s.rank,
        s.utc_epoch_ns,
        coalesce(f.offset_ns, 0) AS offset_ns,
        s.utc_epoch_ns - r.utc_epoch_ns + coalesce(f.offset_ns, 0) AS shift_ns,
        coalesce(f.collectives, 0) AS collectives,
        CASE
            WHEN f.on_gpu THEN 'kernel'
            WHEN NOT f.on_gpu THEN 'nvtx'
            ELSE 'utc'
        END AS source
    FROM session AS s
    CROSS JOIN reference AS r
    LEFT JOIN fits AS f
        ON f.rank = s.rank
),
stepped AS (
    -- The step range of the rank that holds the collective's CPU start.
    SELECT
        t.*,
        CASE WHEN t.cpu_start_ns <= s.end_ns THEN s.step END AS rank_step
    FROM timed AS t
    ASOF LEFT JOIN xr_steps() AS s
        ON s.rank = t.rank
        AND s.start_ns <= t.cpu_start_ns
),
aligned AS (
    SELECT
        st.pg,
        st.seq,
        st.op,
        st.bytes,
        st.group_size,
        st.on_gpu,
        st.rank,
        min(st.rank_step) OVER (PARTITION BY st.pg, st.seq) AS step,
        st.start_ns + o.shift_ns AS start_ns,
        st.end_ns + o.shift_ns AS end_ns
    FROM stepped AS st
    JOIN offsets AS o
        USING (rank)
),
scored AS (
    SELECT
        *,
        arg_max(rank, [start_ns, -rank]) OVER w AS last_rank,
        max(start_ns) OVER w - min(start_ns) OVER w AS skew_ns,
        min(end_ns - start_ns) OVER w AS transfer_ns,
        greatest(0, least(max(start_ns) OVER w, end_ns) - start_ns) AS wait_ns,
        start_ns - round(median(start_ns) OVER w)::BIGINT AS lag_ns
    FROM aligned
    WINDOW w AS (PARTITION BY pg, seq)
)
SELECT
    o.rank,
    o.utc_epoch_ns,
    o.offset_ns,
    o.shift_ns,
    o.collectives,
    o.source,
    c.pg,
    c.seq,
    c.op,
    c.bytes,
    c.group_size,
    c.on_gpu,
    c.step,
    c.start_ns,
    c.end_ns,
    c.wait_ns,
    c.lag_ns,
    c.last_rank,
    c.skew_ns,
    c.transfer_ns,
    d.diff_ns
FROM offsets AS o
LEFT JOIN scored AS c
    ON c.rank = o.rank
LEFT JOIN end_diffs AS d
    ON d.rank = c.rank
    AND d.pg = c.pg
    AND d.seq = c.seq;

-- One row per rank: its clock offset and shift (see xr_alignment), the robust spread
-- (1.4826 x median absolute residual |diff_ns - offset_ns|) and largest residual of
-- the fit, the matched collectives it rests on and its source (kernel, nvtx or utc).
CREATE OR REPLACE MACRO xr_clock_offsets() AS TABLE
SELECT
    rank,
    utc_epoch_ns,
    offset_ns,
    shift_ns,
    round(1.4826 * median(abs(diff_ns - offset_ns)))::BIGINT AS spread_ns,
    max(abs(diff_ns - offset_ns)) AS max_residual_ns,
    collectives,
    source
FROM xr_alignment()
GROUP BY rank, utc_epoch_ns, offset_ns, shift_ns, collectives, source;

-- One row per rank and matched collective of steps [p_step_from, p_step_to), in run
-- time (see xr_alignment).
CREATE OR REPLACE MACRO xr_collectives(p_step_from, p_step_to) AS TABLE
SELECT
    pg,
    seq,
    op,
    bytes,
    group_size,
    on_gpu,
    rank,
    step,
    start_ns,
    end_ns,
    wait_ns,
    lag_ns,
    last_rank,
    skew_ns,
    transfer_ns
FROM xr_alignment()
WHERE pg IS NOT NULL
    AND (p_step_from IS NULL OR step >= p_step_from)
    AND (p_step_to IS NULL OR step < p_step_to);

-- One row per phase: an NVTX range directly inside a `step:<i>` range on the same
-- thread (one level deeper, ending inside it; zero-length and `coll:` ranges are not
-- phases). `thread` packs (rank, pid, tid) into one key.
CREATE OR REPLACE MACRO xr_phases() AS TABLE
WITH thread_ranges AS (
    -- NVTX ranges on threads that hold step ranges (zero-length ones left out).
    SELECT
        (n.rank::BIGINT << 48) | (n.pid << 24) | n.tid AS thread,
        n.rank,
        n.start_ns,
        n.end_ns,
        n.text
    FROM nvtx AS n
    SEMI JOIN (
        SELECT DISTINCT rank, pid, tid
        FROM nvtx
        WHERE regexp_full_match(text, 'step:\d+')
    ) AS s
        ON s.rank = n.rank
        AND s.pid = n.pid
        AND s.tid = n.tid
    WHERE n.event_type <> 'mark'
        AND n.end_ns > n.start_ns
),
edges AS (
    SELECT thread, rank, start_ns AS t, 1 AS delta, start_ns, end_ns, text
    FROM thread_ranges
    UNION ALL
    SELECT thread, rank, end_ns, -1, NULL, NULL, NULL
    FROM thread_ranges
),
depths AS (
    -- Nesting depth of a range = ranges open on its thread once it starts;
    -- ends sort before starts at the same time, longer ranges start first, and
    -- of two equal ranges a module or collective range (fwd:, bwd:, coll:)
    -- is the inner one.
    SELECT thread, rank, start_ns, end_ns, text, depth
    FROM (
        SELECT
            *,
            sum(delta) OVER (
                PARTITION BY thread
                ORDER BY
                    t,
                    delta,
                    end_ns DESC,
                    regexp_matches(text, '^(fwd|bwd|coll):'),
                    text
                ROWS UNBOUNDED PRECEDING
            ) AS depth
        FROM edges
    )
    WHERE delta = 1
),
step_ranges AS (
    SELECT
        thread,
        depth,
        CAST(regexp_extract(text, '^step:(\d+)$', 1) AS BIGINT) AS step,
        start_ns,
        end_ns
    FROM depths
    WHERE regexp_full_match(text, 'step:\d+')
),
candidates AS (
    -- Only ranges one level below some step of their thread can be phases.
    SELECT c.*
    FROM depths AS c
    SEMI JOIN (SELECT DISTINCT thread, depth FROM step_ranges) AS s
        ON s.thread = c.thread
        AND s.depth + 1 = c.depth
    WHERE c.text NOT LIKE 'coll:%'
)
SELECT c.thread, c.rank, s.step, c.text AS phase, c.start_ns, c.end_ns
FROM candidates AS c
ASOF JOIN step_ranges AS s
    ON s.thread = c.thread
    AND s.start_ns <= c.start_ns
WHERE c.depth = s.depth + 1
    AND c.end_ns <= s.end_ns;

-- One row per (step, rank, phase) of steps [p_step_from, p_step_to): summed duration,
-- host time (duration less the CUDA synchronize calls and collective ranges started
-- in it: waiting for others is not lag), GPU time of the compute kernels launched in
-- it, and the medians of both over the ranks that have the phase in the step.
CREATE OR REPLACE MACRO xr_phase_lag(p_step_from, p_step_to) AS TABLE
WITH phases AS (
    SELECT * FROM xr_phases()
),
owned AS (
    -- The span whose launches a phase owns: a launch belongs to the latest phase
    -- started on its thread, if that has not ended. Spans are cut into buckets of
    -- one width per thread (its span / its phases: two buckets per phase on
    -- average), so that each launch meets only the few spans of its bucket in a
    -- hash join on (thread, bucket) instead of every launch being sorted.
    SELECT
        thread,
        start_ns,
        least(end_ns, lead(start_ns) OVER (PARTITION BY thread ORDER BY start_ns))
            AS until_ns,
        greatest(1, (max(end_ns) OVER t - min(start_ns) OVER t) // count(*) OVER t)
            AS width
    FROM phases
    WINDOW t AS (PARTITION BY thread)
),
buckets AS (
    SELECT
        thread,
        start_ns,
        until_ns,
        unnest(range(start_ns // width, (until_ns - 1) // width + 1)) AS bucket
    FROM owned
    WHERE until_ns > start_ns
),
compute_launches AS (
    SELECT l.thread, l.start_ns, l.gpu_ns, l.start_ns // w.width AS bucket
    FROM (
        SELECT
            (rank::BIGINT << 48) | (pid << 24) | tid AS thread,
            start_ns,
            kernel_end_ns - kernel_start_ns AS gpu_ns
        FROM launches
        WHERE kind IN ('compute', 'other')
    ) AS l
    JOIN (SELECT DISTINCT thread, width FROM owned) AS w
        ON w.thread = l.thread
),
phase_gpu AS (
    -- GPU time of the compute kernels launched in each phase.
    SELECT b.thread, b.start_ns, sum(l.gpu_ns) AS gpu_ns
    FROM compute_launches AS l
    JOIN buckets AS b
        ON b.thread = l.thread
        AND b.bucket = l.bucket
    WHERE l.start_ns >= b.start_ns
        AND l.start_ns < b.until_ns
    GROUP BY b.thread, b.start_ns
),
phase_waits AS (
    SELECT p.thread, p.start_ns, sum(w.dur_ns) AS wait_ns
    FROM (
        SELECT rank, pid, tid, start_ns, dur_ns
        FROM api_calls
        WHERE api ILIKE '%synchronize%'
        UNION ALL
        SELECT rank, pid, tid, start_ns, dur_ns
        FROM collectives
    ) AS w
    ASOF JOIN phases AS p
        ON p.thread = (w.rank::BIGINT << 48) | (w.pid << 24) | w.tid
        AND p.start_ns <= w.start_ns
    WHERE w.start_ns < p.end_ns
    GROUP BY p.thread, p.start_ns
),
phase_times AS (
    SELECT
        p.step,
        p.rank,
        p.phase,
        p.end_ns - p.start_ns AS dur_ns,
        greatest(0, p.end_ns - p.start_ns - coalesce(w.wait_ns, 0)) AS host_ns,
        coalesce(g.gpu_ns, 0) AS gpu_ns
    FROM phases AS p
    LEFT JOIN phase_gpu AS g
        ON g.thread = p.thread
        AND g.start_ns = p.start_ns
    LEFT JOIN phase_waits AS w
        ON w.thread = p.thread
        AND w.start_ns = p.start_ns
    WHERE (p_step_from IS NULL OR p.step >= p_step_from)
        AND (p_step_to IS NULL OR p.step < p_step_to)
)
SELECT
    step,
    rank,
    phase,
    sum(dur_ns)::BIGINT AS dur_ns,
    sum(host_ns)::BIGINT AS host_ns,
    round(median(sum(host_ns)) OVER (PARTITION BY step, phase))::BIGINT
        AS host_median_ns,
    sum(gpu_ns)::BIGINT AS gpu_ns,
    round(median(sum(gpu_ns)) OVER (PARTITION BY step, phase))::BIGINT
        AS gpu_median_ns
FROM phase_times
GROUP BY step, rank, phase;
