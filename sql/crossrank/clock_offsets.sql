-- One row per rank: the clock offset that aligns its report to the reference
-- rank's (the lowest rank in a matched collective, normally 0). Coarse
-- alignment is each report's UTC session start; the fine offset is the median,
-- over matched collectives, of (the reference rank's end - this rank's end),
-- both in UTC: the NCCL kernels of a collective end at nearly the same instant
-- on every rank (the ranges' ends are used when a collective lacks kernels on
-- some rank). aligned time = utc_epoch_ns + session time + offset_ns. A rank
-- that shares no matched collective with the reference rank keeps offset 0
-- (source utc).
-- @scope run
-- @reads xr_clock_offsets
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank INTEGER             Rank of the report.
-- @column utc_epoch_ns BIGINT      UTC of the report's session clock zero (ns).
-- @column offset_ns BIGINT         Added to UTC time (ns); 0 for the reference.
-- @column shift_ns BIGINT          Session time + shift_ns = run time: ns since
--                                  the reference rank's aligned session start.
-- @column spread_ns BIGINT         Uncertainty: 1.4826 x median absolute
--                                  residual of the per-collective differences
--                                  (ns).
-- @column max_residual_ns BIGINT   Largest absolute residual (ns).
-- @column collectives BIGINT       Matched collectives the offset rests on.
-- @column source VARCHAR           kernel (NCCL kernel ends), nvtx (collective
--                                  range ends) or utc (no shared collective).
SELECT *
FROM xr_clock_offsets
ORDER BY rank
