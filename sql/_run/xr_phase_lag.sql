-- One row per (step, rank, phase) of steps [step_from, step_to) (phases and their
-- host and GPU time: see sql/_reductions/xr_phases.sql; by rank: xr_member_phases):
-- summed duration, host time and GPU time, and the medians of both over the ranks that have the phase in the step.
-- @reads xr_member_phases
-- @column step               BIGINT
-- @column rank               INTEGER
-- @column phase              VARCHAR
-- @column dur_ns             BIGINT  Summed duration of the rank's ranges of the phase in the step (ns).
-- @column host_ns            BIGINT  Their summed host time (duration less the waits started in them, ns).
-- @column host_median_ns     BIGINT  Median of host_ns over the ranks with the phase in the step (ns).
-- @column gpu_ns             BIGINT  Their summed GPU time of the compute kernels launched in them (ns).
-- @column gpu_median_ns      BIGINT  Median of gpu_ns over the ranks with the phase in the step (ns).
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
