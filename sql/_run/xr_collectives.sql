-- One row per rank and matched collective of steps [step_from, step_to), in run
-- time (see xr_alignment).
-- @reads xr_alignment
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Only steps >= this (NULL: from the first).
-- @param step_to BIGINT = NULL         Only steps < this (NULL: to the last).
-- @column pg                 VARCHAR  See the summary.
-- @column seq                BIGINT   See the summary.
-- @column op                 VARCHAR  See the summary.
-- @column bytes              BIGINT   See the summary.
-- @column group_size         BIGINT   See the summary.
-- @column on_gpu             BOOLEAN  See the summary.
-- @column rank               INTEGER  See the summary.
-- @column step               BIGINT   See the summary.
-- @column start_ns           BIGINT   See the summary.
-- @column end_ns             BIGINT   See the summary.
-- @column wait_ns            BIGINT   See the summary.
-- @column lag_ns             BIGINT   See the summary.
-- @column last_rank          INTEGER  See the summary.
-- @column skew_ns            BIGINT   See the summary.
-- @column transfer_ns        BIGINT   See the summary.
-- @column threshold_ns       BIGINT   See the summary.
-- @column significant        BOOLEAN  See the summary.
-- @column barrier            BOOLEAN  See the summary.
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
    transfer_ns,
    threshold_ns,
    significant,
    barrier
FROM xr_alignment
WHERE pg IS NOT NULL
    AND ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
