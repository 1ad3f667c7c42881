-- One row per aligned rank and matched collective, in run time (nsyswrap.crossrank.solve).
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.solve.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads session, kernels, api_calls, nvtx, xr_rank_keys, xr_processes, xr_steps, xr_phases,
--        payload_schemas
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column pg                 VARCHAR  See nsyswrap.crossrank.solve.
-- @column seq                BIGINT   See nsyswrap.crossrank.solve.
-- @column op                 VARCHAR  See nsyswrap.crossrank.solve.
-- @column bytes              BIGINT   See nsyswrap.crossrank.solve.
-- @column group_size         BIGINT   See nsyswrap.crossrank.solve.
-- @column on_gpu             BOOLEAN  See nsyswrap.crossrank.solve.
-- @column rank               INTEGER  See nsyswrap.crossrank.solve.
-- @column step               BIGINT   See nsyswrap.crossrank.solve.
-- @column start_ns           BIGINT   See nsyswrap.crossrank.solve.
-- @column end_ns             BIGINT   See nsyswrap.crossrank.solve.
-- @column wait_ns            BIGINT   See nsyswrap.crossrank.solve.
-- @column lag_ns             BIGINT   See nsyswrap.crossrank.solve.
-- @column last_rank          INTEGER  See nsyswrap.crossrank.solve.
-- @column skew_ns            BIGINT   See nsyswrap.crossrank.solve.
-- @column transfer_ns        BIGINT   See nsyswrap.crossrank.solve.
-- @column threshold_ns       BIGINT   See nsyswrap.crossrank.solve.
-- @column significant        BOOLEAN  See nsyswrap.crossrank.solve.
-- @column barrier            BOOLEAN  See nsyswrap.crossrank.solve.
SELECT
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS BIGINT) AS seq,
    CAST(NULL AS VARCHAR) AS op,
    CAST(NULL AS BIGINT) AS bytes,
    CAST(NULL AS BIGINT) AS group_size,
    CAST(NULL AS BOOLEAN) AS on_gpu,
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS wait_ns,
    CAST(NULL AS BIGINT) AS lag_ns,
    CAST(NULL AS INTEGER) AS last_rank,
    CAST(NULL AS BIGINT) AS skew_ns,
    CAST(NULL AS BIGINT) AS transfer_ns,
    CAST(NULL AS BIGINT) AS threshold_ns,
    CAST(NULL AS BOOLEAN) AS significant,
    CAST(NULL AS BOOLEAN) AS barrier
WHERE false
