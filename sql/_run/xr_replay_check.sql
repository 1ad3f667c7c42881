-- One row per rank and step: its step time recorded and replayed from the recorded
-- durations (nsyswrap.crossrank.whatif).
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.whatif.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads xr_aligned, xr_clock, xr_keys, xr_member_steps, xr_member_phases, xr_issues, xr_joins, xr_lane_phases
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  See nsyswrap.crossrank.whatif.
-- @column step               BIGINT   See nsyswrap.crossrank.whatif.
-- @column recorded_ns        BIGINT   See nsyswrap.crossrank.whatif.
-- @column replayed_ns        BIGINT   See nsyswrap.crossrank.whatif.
-- @column residual_ns        BIGINT   See nsyswrap.crossrank.whatif.
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS recorded_ns,
    CAST(NULL AS BIGINT) AS replayed_ns,
    CAST(NULL AS BIGINT) AS residual_ns
WHERE false
