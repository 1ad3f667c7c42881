-- One row per (step, rank, phase) of steps [step_from, step_to) (phases and their
-- host and GPU time: see sql/_reductions/xr_phases.sql; by rank: xr_member_phases): summed duration, host time
-- and GPU time, and the medians of both over the ranks that have the phase in the step.
-- @reads xr_member_phases
-- @column step               BIGINT   See the summary.
-- @column rank               INTEGER  See the summary.
-- @column phase              VARCHAR  See the summary.
-- @column dur_ns             BIGINT   See the summary.
-- @column host_ns            BIGINT   See the summary.
-- @column host_median_ns     BIGINT   See the summary.
-- @column gpu_ns             BIGINT   See the summary.
-- @column gpu_median_ns      BIGINT   See the summary.
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
FROM xr_member_phases
WHERE ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
GROUP BY step, rank, phase
