-- One row per rank: its clock offset and shift (see xr_alignment), the robust spread
-- (1.4826 x median absolute residual |diff_ns - offset_ns|) and largest residual of
-- the fit, the matched collectives it rests on and its source (kernel, nvtx or utc).
-- @reads xr_alignment
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  Rank of the report.
-- @column utc_epoch_ns       BIGINT   UTC of the report's session clock zero (ns).
-- @column offset_ns          BIGINT   Clock offset to the reference rank (ns).
-- @column shift_ns           BIGINT   Session time + shift_ns = run time (ns).
-- @column spread_ns          BIGINT   1.4826 x median absolute residual (ns).
-- @column max_residual_ns    BIGINT   Largest absolute residual (ns).
-- @column collectives        BIGINT   Matched collectives the offset rests on.
-- @column source             VARCHAR  kernel, nvtx or utc.
SELECT
    rank,
    utc_epoch_ns,
    offset_ns,
    shift_ns,
    round(1.4826 * median(abs(diff_ns - offset_ns)))::BIGINT AS spread_ns,
    max(abs(diff_ns - offset_ns)) AS max_residual_ns,
    collectives,
    source
FROM xr_alignment
GROUP BY rank, utc_epoch_ns, offset_ns, shift_ns, collectives, source
