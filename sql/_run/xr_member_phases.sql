-- One row per rank (process) and phase range (xr_phases by rank; nsyswrap.crossrank.solve).
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.solve.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads session, kernels, api_calls, nvtx, xr_rank_keys, xr_processes, xr_steps, xr_phases,
--        payload_schemas
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  See nsyswrap.crossrank.solve.
-- @column pid                BIGINT   See nsyswrap.crossrank.solve.
-- @column tid                BIGINT   See nsyswrap.crossrank.solve.
-- @column step               BIGINT   See nsyswrap.crossrank.solve.
-- @column phase              VARCHAR  See nsyswrap.crossrank.solve.
-- @column start_ns           BIGINT   See nsyswrap.crossrank.solve.
-- @column end_ns             BIGINT   See nsyswrap.crossrank.solve.
-- @column host_ns            BIGINT   See nsyswrap.crossrank.solve.
-- @column gpu_ns             BIGINT   See nsyswrap.crossrank.solve.
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS pid,
    CAST(NULL AS BIGINT) AS tid,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS VARCHAR) AS phase,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS host_ns,
    CAST(NULL AS BIGINT) AS gpu_ns
WHERE false
