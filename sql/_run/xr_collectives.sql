-- One row per rank and matched collective of steps [step_from, step_to), in run
-- time (see xr_alignment).
-- @reads xr_alignment
-- @column pg                 VARCHAR
-- @column seq                BIGINT
-- @column op                 VARCHAR
-- @column bytes              BIGINT
-- @column group_size         BIGINT
-- @column on_gpu             BOOLEAN
-- @column rank               INTEGER
-- @column step               BIGINT
-- @column start_ns           BIGINT
-- @column end_ns             BIGINT
-- @column wait_ns            BIGINT
-- @column lag_ns             BIGINT
-- @column last_rank          INTEGER
-- @column skew_ns            BIGINT
-- @column transfer_ns        BIGINT
-- @column threshold_ns       BIGINT
-- @column significant        BOOLEAN
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
    significant
FROM xr_alignment
WHERE pg IS NOT NULL
    AND ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
