-- One row per (rank, process, step): the step on the host, its NVTX ranges merged into one
-- span (steps.ranges lists the ranges themselves; the step definition is step_ranges in
-- sql/_macros/metrics.sql: ranges LIKE step_pattern, numbered by the text's last integer,
-- else by start order; one number on several threads is one step), whether or not the
-- process has GPU work. What the report's window is chosen from (the steps a capture has,
-- warm-up and outlier steps) and the host step times of a capture without GPU activity.
-- @scope report
-- @reads xr_steps
-- @column rank INTEGER                 Rank of the process.
-- @column pid BIGINT                   Process holding the step's ranges.
-- @column step BIGINT                  Step number.
-- @column start_ns BIGINT              Earliest start of its ranges (session clock ns).
-- @column end_ns BIGINT                Latest end of its ranges (ns).
-- @column duration_ns BIGINT           end_ns - start_ns.
-- @order rank, pid, step
SELECT
    rank,
    pid,
    step,
    min(start_ns) AS start_ns,
    max(end_ns) AS end_ns,
    max(end_ns) - min(start_ns) AS duration_ns
FROM xr_steps
GROUP BY rank, pid, step
ORDER BY rank, pid, step
