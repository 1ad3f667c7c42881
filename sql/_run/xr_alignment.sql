-- One row per rank (its clock: xr_clock) and matched collective, plus one row (pg and
-- seq NULL) per rank with none. Per collective, in run time: arrival (start_ns) and
-- end, by the NCCL kernels when every member has them (on_gpu), else by the ranges;
-- the step (lowest over the ranks); the wait before the last rank arrived; lag behind
-- the median arrival; the last rank (lowest on ties); skew; transfer time (shortest
-- duration across ranks); threshold_ns (twice the largest alignment uncertainty of
-- the members) and significant (skew above it). Unaligned ranks have no collectives.
-- @reads xr_clock, xr_aligned
-- @column rank               INTEGER
-- @column utc_epoch_ns       BIGINT
-- @column offset_ns          BIGINT
-- @column shift_ns           BIGINT
-- @column drift_ppb          DOUBLE
-- @column collectives        BIGINT
-- @column source             VARCHAR
-- @column aligned            BOOLEAN
-- @column pg                 VARCHAR
-- @column seq                BIGINT
-- @column op                 VARCHAR
-- @column bytes              BIGINT
-- @column group_size         BIGINT
-- @column on_gpu             BOOLEAN
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
    o.rank,
    o.utc_epoch_ns,
    o.offset_ns,
    o.shift_ns,
    o.drift_ppb,
    o.collectives,
    o.source,
    o.aligned,
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
    c.threshold_ns,
    c.significant
FROM xr_clock AS o
LEFT JOIN xr_aligned AS c
    ON c.rank = o.rank
