-- One row per step and what its critical path charges: work of a (rank, phase) or transfer
-- of a (pg, op) (nsyswrap.crossrank.whatif).
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.whatif.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads xr_aligned, xr_clock, xr_keys, xr_member_steps, xr_member_phases, xr_issues, xr_joins, xr_lane_phases
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column step               BIGINT   See nsyswrap.crossrank.whatif.
-- @column kind               VARCHAR  See nsyswrap.crossrank.whatif.
-- @column rank               INTEGER  See nsyswrap.crossrank.whatif.
-- @column phase              VARCHAR  See nsyswrap.crossrank.whatif.
-- @column pg                 VARCHAR  See nsyswrap.crossrank.whatif.
-- @column op                 VARCHAR  See nsyswrap.crossrank.whatif.
-- @column ns                 BIGINT   See nsyswrap.crossrank.whatif.
SELECT
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS VARCHAR) AS kind,
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS VARCHAR) AS phase,
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS VARCHAR) AS op,
    CAST(NULL AS BIGINT) AS ns
WHERE false
