-- One row per step of a process (its step ranges of one number merged, see step_ranges in
-- sql/_macros/metrics.sql), with the region of time it holds: the one rule that says
-- which step holds an instant of the process, for every caller (the cross-rank solve's
-- collective calls, kernels by step, NVTX ranges by step). A step holds instant t of its
-- process when start_ns <= t < region_end_ns: from its start to its end, cut at the next
-- step's start; of steps starting together the lowest holds the time; a step without an
-- end holds none. (device_step_regions is the same rule over the processes that ran
-- work on a device, for GPU time.)
-- @include metrics
-- @column pid BIGINT              Process of the step ranges.
-- @column step BIGINT             Step number.
-- @column start_ns BIGINT         Step start (earliest of its ranges), session clock ns.
-- @column end_ns BIGINT           Step end (latest of its ranges), ns.
-- @column region_end_ns BIGINT    End of the time it holds: end_ns cut at the next step (ns).
WITH steps AS (
    SELECT pid, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM step_ranges($step_pattern)
    GROUP BY pid, step
)
SELECT
    pid,
    step,
    start_ns,
    end_ns,
    CASE WHEN end_ns IS NOT NULL THEN least(end_ns, lead(start_ns) OVER (
        PARTITION BY pid ORDER BY start_ns, step DESC
    )) END AS region_end_ns
FROM steps
WHERE start_ns IS NOT NULL
ORDER BY pid, start_ns, step
