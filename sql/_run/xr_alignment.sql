-- One row per rank (its clock: xr_clock) and matched collective, plus one row (pg and
-- seq NULL) per rank with none. Per collective, in run time: arrival (start_ns) and
-- end, by the NCCL kernels when every member has them (on_gpu), else by the ranges;
-- the step (lowest over the ranks); the wait before the last rank arrived; lag behind
-- the median arrival; the last rank (lowest on ties); skew; transfer time (shortest
-- duration across ranks); threshold_ns (twice the largest alignment uncertainty of
-- the members) and significant (skew above it); barrier (its members end together:
-- false for all_to_all, send/recv, broadcast, ...). Unaligned ranks have no collectives.
-- @reads xr_clock, xr_aligned
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  See the summary.
-- @column utc_epoch_ns       BIGINT   See the summary.
-- @column offset_ns          BIGINT   See the summary.
-- @column shift_ns           BIGINT   See the summary.
-- @column drift_ppb          DOUBLE   See the summary.
-- @column collectives        BIGINT   See the summary.
-- @column source             VARCHAR  See the summary.
-- @column aligned            BOOLEAN  See the summary.
-- @column pg                 VARCHAR  See the summary.
-- @column seq                BIGINT   See the summary.
-- @column op                 VARCHAR  See the summary.
-- @column bytes              BIGINT   See the summary.
-- @column group_size         BIGINT   See the summary.
-- @column on_gpu             BOOLEAN  See the summary.
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
    c.significant,
    c.barrier
FROM xr_clock AS o
LEFT JOIN xr_aligned AS c
    ON c.rank = o.rank
