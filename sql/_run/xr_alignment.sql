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
-- @reads session, xr_collective_keys, xr_steps
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  Rank of the report.
-- @column utc_epoch_ns       BIGINT   UTC of the report's session clock zero (ns).
-- @column offset_ns          BIGINT   Clock offset to the reference rank (ns).
-- @column shift_ns           BIGINT   Session time + shift_ns = run time (ns).
-- @column collectives        BIGINT   Matched collectives the offset rests on.
-- @column source             VARCHAR  kernel, nvtx or utc.
-- @column pg                 VARCHAR  Process group id (NULL: the rank has no matched collective).
-- @column seq                BIGINT   Sequence number in the group.
-- @column op                 VARCHAR  Collective, e.g. all_reduce.
-- @column bytes              BIGINT   Payload bytes, if known.
-- @column group_size         BIGINT   Ranks in the group, if known.
-- @column on_gpu             BOOLEAN  Timed by NCCL kernels (else by ranges).
-- @column step               BIGINT   Step holding its CPU start (lowest over the ranks).
-- @column start_ns           BIGINT   Arrival, ns of run time.
-- @column end_ns             BIGINT   End, ns of run time.
-- @column wait_ns            BIGINT   Wait before the last rank arrived (ns).
-- @column lag_ns             BIGINT   Arrival minus the median arrival (ns).
-- @column last_rank          INTEGER  Rank that arrived last (lowest on ties).
-- @column skew_ns            BIGINT   Latest minus earliest arrival (ns).
-- @column transfer_ns        BIGINT   Shortest duration across ranks (ns).
-- @column diff_ns            BIGINT   Reference rank's end - this rank's end, in UTC (ns).
WITH matched AS (
    SELECT *
    FROM xr_collective_keys
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
    AND d.seq = c.seq
