-- One row per rank and collective call of the kind chosen for the run (made by
-- nsyswrap.crossrank.solve: matching), with its key and verdict.
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.solve.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads session, kernels, api_calls, nvtx, xr_rank_keys, xr_processes, xr_steps, xr_phases,
--        payload_schemas
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  See nsyswrap.crossrank.solve.
-- @column pg                 VARCHAR  See nsyswrap.crossrank.solve.
-- @column seq                BIGINT   See nsyswrap.crossrank.solve.
-- @column op                 VARCHAR  See nsyswrap.crossrank.solve.
-- @column bytes              BIGINT   See nsyswrap.crossrank.solve.
-- @column group_size         BIGINT   See nsyswrap.crossrank.solve.
-- @column cpu_start_ns       BIGINT   See nsyswrap.crossrank.solve.
-- @column cpu_end_ns         BIGINT   See nsyswrap.crossrank.solve.
-- @column kernel_start_ns    BIGINT   See nsyswrap.crossrank.solve.
-- @column kernel_end_ns      BIGINT   See nsyswrap.crossrank.solve.
-- @column group_ranks        BIGINT   See nsyswrap.crossrank.solve.
-- @column ranks              BIGINT   See nsyswrap.crossrank.solve.
-- @column duplicate          BOOLEAN  See nsyswrap.crossrank.solve.
-- @column op_differs         BOOLEAN  See nsyswrap.crossrank.solve.
-- @column bytes_differ       BOOLEAN  See nsyswrap.crossrank.solve.
-- @column matches            BOOLEAN  See nsyswrap.crossrank.solve.
-- @column found_by           VARCHAR  See nsyswrap.crossrank.solve.
-- @column size_differs       BOOLEAN  See nsyswrap.crossrank.solve.
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS VARCHAR) AS pg,
    CAST(NULL AS BIGINT) AS seq,
    CAST(NULL AS VARCHAR) AS op,
    CAST(NULL AS BIGINT) AS bytes,
    CAST(NULL AS BIGINT) AS group_size,
    CAST(NULL AS BIGINT) AS cpu_start_ns,
    CAST(NULL AS BIGINT) AS cpu_end_ns,
    CAST(NULL AS BIGINT) AS kernel_start_ns,
    CAST(NULL AS BIGINT) AS kernel_end_ns,
    CAST(NULL AS BIGINT) AS group_ranks,
    CAST(NULL AS BIGINT) AS ranks,
    CAST(NULL AS BOOLEAN) AS duplicate,
    CAST(NULL AS BOOLEAN) AS op_differs,
    CAST(NULL AS BOOLEAN) AS bytes_differ,
    CAST(NULL AS BOOLEAN) AS matches,
    CAST(NULL AS VARCHAR) AS found_by,
    CAST(NULL AS BOOLEAN) AS size_differs
WHERE false
