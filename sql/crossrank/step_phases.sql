-- One row per step range and per phase inside it, per rank, in aligned run time
-- (ns since the reference rank's aligned session start; see
-- crossrank.clock_offsets; unaligned ranks are left out). Phases are the ranges nested directly inside the
-- step on the same thread (see crossrank.phase_lag).
-- @scope run
-- @include metrics
-- @reads xr_member_steps, xr_member_phases, xr_clock_offsets
-- @column rank INTEGER             Rank of the report.
-- @column step BIGINT              Step index from `step:<i>`.
-- @column phase VARCHAR            Phase range text, NULL for the step itself.
-- @column start_ns BIGINT          Start, ns of run time.
-- @column end_ns BIGINT            End, ns of run time.
WITH ranges AS (
    SELECT rank, step, CAST(NULL AS VARCHAR) AS phase, start_ns, end_ns
    FROM xr_member_steps
    UNION ALL
    SELECT rank, step, phase, start_ns, end_ns
    FROM xr_member_phases
)
SELECT
    r.rank,
    r.step,
    r.phase,
    run_ns(r.start_ns, o.shift_ns, o.drift_ppb) AS start_ns,
    run_ns(r.end_ns, o.shift_ns, o.drift_ppb) AS end_ns
FROM ranges AS r
JOIN xr_clock_offsets AS o
    USING (rank)
WHERE o.aligned
ORDER BY r.rank, r.step, r.start_ns, r.phase NULLS FIRST
