-- Table macros shared by the cross-rank modules (sql/crossrank/*.sql): matching
-- collectives across ranks, clock alignment, step and phase ranges. `open_run` creates
-- them after the views; names start with xr_ so they cannot collide with the metric
-- macros. A macro may only use macros defined above it. They read the per-rank
-- reductions of sql/_reductions (views xr_rank_keys, xr_steps, xr_phases, ...:
-- computed once per report) and small views (session, collectives), never the large
-- views (kernels, launches, nvtx, api_calls): per-rank work over those belongs in a
-- reduction. DuckDB binds the names in a macro where it is used: a CTE of the caller
-- named like a view or reduction (kernels, xr_steps, ...) would replace it inside the
-- macro, so modules must not use such names.
-- Times are session ns unless a column says run time (ns since the reference rank's
-- aligned session start). Step arguments: p_step_from / p_step_to (half-open step
-- numbers, NULL: unbounded).

-- ASOF joins must stay sort-merge joins (see metrics.sql).
SET asof_loop_join_threshold = 0;

-- One row per rank and collective key (pg, seq) it issued, with the key's verdict.
-- Keys are the `range` keys of xr_rank_keys (pg, seq of the `coll:` ranges) when
-- every report has collective ranges, else its `kernel` keys (the k-th NCCL kernel of
-- an op on a device, pg 'nccl:<Op>'). The verdict columns (ranks .. matches) are
-- NULL for groups seen on one rank only (not checked); matches: every rank of the
-- group has the key and no key of the group differs at or before it.
CREATE OR REPLACE MACRO xr_collective_keys() AS TABLE
WITH keyed_by AS (
    -- Ranges give the keys when every report has some.
    SELECT
        (SELECT count(DISTINCT rank) FROM collectives)
        = (SELECT count(*) FROM session) AS ranges
),
per_rank AS (
    SELECT
        rank,
        pg,
        seq,
        op,
        bytes,
        group_size,
        cpu_start_ns,
        cpu_end_ns,
        kernel_start_ns,
        kernel_end_ns
    FROM xr_rank_keys
    WHERE keyed = CASE WHEN (SELECT ranges FROM keyed_by) THEN 'range' ELSE 'kernel' END
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
stepped AS (
    -- The step range of the rank that holds the collective's CPU start.
    SELECT
        m.*,
        CASE WHEN m.cpu_start_ns <= s.end_ns THEN s.step END AS rank_step
    FROM matched AS m
    ASOF LEFT JOIN xr_steps AS s
        ON s.rank = m.rank
        AND s.start_ns <= m.cpu_start_ns
),
per_collective AS (
    -- Per collective: GPU times when every rank has its kernels, else range times;
    -- its step is the lowest over the ranks.
    SELECT
        pg,
        seq,
        bool_and(kernel_end_ns IS NOT NULL) AS on_gpu,
        min(rank_step) AS step
    FROM stepped
    GROUP BY pg, seq
),
timed AS (
    SELECT
        st.*,
        c.on_gpu,
        c.step,
        ss.utc_epoch_ns,
        CASE WHEN c.on_gpu THEN st.kernel_start_ns ELSE st.cpu_start_ns END AS start_ns,
        CASE WHEN c.on_gpu THEN st.kernel_end_ns ELSE st.cpu_end_ns END AS end_ns
    FROM stepped AS st
    JOIN per_collective AS c
        USING (pg, seq)
    JOIN session AS ss
        USING (rank)
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
aligned AS (
    SELECT
        t.pg,
        t.seq,
        t.op,
        t.bytes,
        t.group_size,
        t.on_gpu,
        t.rank,
        t.step,
        t.start_ns + o.shift_ns AS start_ns,
        t.end_ns + o.shift_ns AS end_ns
    FROM timed AS t
    JOIN offsets AS o
        USING (rank)
),
spread AS (
    -- Per collective: the last arrival, skew, transfer time and median arrival.
    SELECT
        pg,
        seq,
        arg_max(rank, [start_ns, -rank]) AS last_rank,
        max(start_ns) AS last_start_ns,
        max(start_ns) - min(start_ns) AS skew_ns,
        min(end_ns - start_ns) AS transfer_ns,
        round(median(start_ns))::BIGINT AS median_start_ns
    FROM aligned
    GROUP BY pg, seq
),
scored AS (
    SELECT
        a.*,
        v.last_rank,
        v.skew_ns,
        v.transfer_ns,
        greatest(0, least(v.last_start_ns, a.end_ns) - a.start_ns) AS wait_ns,
        a.start_ns - v.median_start_ns AS lag_ns
    FROM aligned AS a
    JOIN spread AS v
        USING (pg, seq)
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

-- One row per (step, rank, phase) of steps [p_step_from, p_step_to) (phases and their
-- host and GPU time: see sql/_reductions/xr_phases.sql): summed duration, host time
-- and GPU time, and the medians of both over the ranks that have the phase in the step.
CREATE OR REPLACE MACRO xr_phase_lag(p_step_from, p_step_to) AS TABLE
SELECT
    step,
    rank,
    phase,
    sum(end_ns - start_ns)::BIGINT AS dur_ns,
    sum(host_ns)::BIGINT AS host_ns,
    round(median(sum(host_ns)) OVER (PARTITION BY step, phase))::BIGINT
        AS host_median_ns,
    sum(gpu_ns)::BIGINT AS gpu_ns,
    round(median(sum(gpu_ns)) OVER (PARTITION BY step, phase))::BIGINT
        AS gpu_median_ns
FROM xr_phases
WHERE (p_step_from IS NULL OR step >= p_step_from)
    AND (p_step_to IS NULL OR step < p_step_to)
GROUP BY step, rank, phase;
