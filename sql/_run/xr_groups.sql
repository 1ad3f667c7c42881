-- One row per process group found (nsyswrap.crossrank.solve): members, how found,
-- captured vs group size, whether it spans hosts.
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.solve.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads session, kernels, api_calls, nvtx, xr_rank_keys, xr_processes, xr_steps, xr_phases,
--        payload_schemas
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column pg                 VARCHAR  See nsyswrap.crossrank.solve.
-- @column found_by           VARCHAR  See nsyswrap.crossrank.solve.
-- @column members            VARCHAR  See nsyswrap.crossrank.solve.
-- @column captured           BIGINT   See nsyswrap.crossrank.solve.
-- @column group_size         BIGINT   See nsyswrap.crossrank.solve.
-- @column status             VARCHAR  See nsyswrap.crossrank.solve.
-- @column calls              BIGINT   See nsyswrap.crossrank.solve.
-- @column left_out           BIGINT   See nsyswrap.crossrank.solve.
-- @column spans_hosts        BOOLEAN  See nsyswrap.crossrank.solve.
SELECT
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS VARCHAR) AS found_by,
    CAST(NULL AS VARCHAR) AS members,
    CAST(NULL AS BIGINT) AS captured,
    CAST(NULL AS BIGINT) AS group_size,
    CAST(NULL AS VARCHAR) AS status,
    CAST(NULL AS BIGINT) AS calls,
    CAST(NULL AS BIGINT) AS left_out,
    CAST(NULL AS BOOLEAN) AS spans_hosts
WHERE false
