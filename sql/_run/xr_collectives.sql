-- One row per rank and matched collective of steps [step_from, step_to), in run
-- time (see xr_alignment).
-- @reads xr_alignment
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Only steps >= this (NULL: from the first).
-- @param step_to BIGINT = NULL         Only steps < this (NULL: to the last).
-- @column pg                 VARCHAR  Process group id.
-- @column seq                BIGINT   Sequence number in the group.
-- @column op                 VARCHAR  Collective, e.g. all_reduce.
-- @column bytes              BIGINT   Payload bytes, if known.
-- @column group_size         BIGINT   Ranks in the group, if known.
-- @column on_gpu             BOOLEAN  Timed by NCCL kernels (else by ranges).
-- @column rank               INTEGER  Rank of the report.
-- @column step               BIGINT   Step it was issued in.
-- @column start_ns           BIGINT   Arrival, ns of run time.
-- @column end_ns             BIGINT   End, ns of run time.
-- @column wait_ns            BIGINT   Wait before the last rank arrived (ns).
-- @column lag_ns             BIGINT   Arrival minus the median arrival (ns).
-- @column last_rank          INTEGER  Rank that arrived last.
-- @column skew_ns            BIGINT   Latest minus earliest arrival (ns).
-- @column transfer_ns        BIGINT   Shortest duration across ranks (ns).
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
FROM xr_alignment
WHERE pg IS NOT NULL
    AND ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
