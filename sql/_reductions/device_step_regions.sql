-- One row per step of a device (step_regions): its range and the region it holds,
-- computed once per report and step pattern (whatever the window) and read by every
-- object that places times in steps.
-- @include metrics
-- @column device             BIGINT   CUDA device id.
-- @column step               BIGINT   Step number.
-- @column start_ns           BIGINT   Step start (earliest of its ranges), session clock ns.
-- @column end_ns             BIGINT   Step end (latest of its ranges), ns.
-- @column region_end_ns      BIGINT   End of the time it holds: end_ns cut at the next step (ns).
SELECT *
FROM step_regions($step_pattern)
