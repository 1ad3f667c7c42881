-- One row per rank: its clock from the global solve (nsyswrap.crossrank.solve).
-- A run object computed in Python, once per run and parameters: the planner calls
-- nsyswrap.crossrank.solve.build (see planner.PYTHON_BUILT); this body only types it.
-- @reads session, kernels, api_calls, nvtx, xr_rank_keys, xr_processes, xr_steps, xr_phases,
--        payload_schemas
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @column rank               INTEGER  See nsyswrap.crossrank.solve.
-- @column utc_epoch_ns       BIGINT   See nsyswrap.crossrank.solve.
-- @column offset_ns          BIGINT   See nsyswrap.crossrank.solve.
-- @column drift_ppb          DOUBLE   See nsyswrap.crossrank.solve.
-- @column shift_ns           BIGINT   See nsyswrap.crossrank.solve.
-- @column uncertainty_ns     BIGINT   See nsyswrap.crossrank.solve.
-- @column spread_ns          BIGINT   See nsyswrap.crossrank.solve.
-- @column max_residual_ns    BIGINT   See nsyswrap.crossrank.solve.
-- @column collectives        BIGINT   See nsyswrap.crossrank.solve.
-- @column source             VARCHAR  See nsyswrap.crossrank.solve.
-- @column method             VARCHAR  See nsyswrap.crossrank.solve.
-- @column aligned            BOOLEAN  See nsyswrap.crossrank.solve.
-- @column host               VARCHAR  See nsyswrap.crossrank.solve.
-- @column clock              VARCHAR  See nsyswrap.crossrank.solve.
-- @column jump_at_ns         BIGINT   See nsyswrap.crossrank.solve.
-- @column jump_ns            BIGINT   See nsyswrap.crossrank.solve.
-- @column report_rank        INTEGER  See nsyswrap.crossrank.solve.
-- @column pid                BIGINT   See nsyswrap.crossrank.solve.
-- @column rank_source        VARCHAR  See nsyswrap.crossrank.solve.
SELECT
    CAST(NULL AS INTEGER) AS rank,
    CAST(NULL AS BIGINT) AS utc_epoch_ns,
    CAST(NULL AS BIGINT) AS offset_ns,
    CAST(NULL AS DOUBLE) AS drift_ppb,
    CAST(NULL AS BIGINT) AS shift_ns,
    CAST(NULL AS BIGINT) AS uncertainty_ns,
    CAST(NULL AS BIGINT) AS spread_ns,
    CAST(NULL AS BIGINT) AS max_residual_ns,
    CAST(NULL AS BIGINT) AS collectives,
    CAST(NULL AS VARCHAR) AS source,
    CAST(NULL AS VARCHAR) AS method,
    CAST(NULL AS BOOLEAN) AS aligned,
    CAST(NULL AS VARCHAR) AS host,
    CAST(NULL AS VARCHAR) AS clock,
    CAST(NULL AS BIGINT) AS jump_at_ns,
    CAST(NULL AS BIGINT) AS jump_ns,
    CAST(NULL AS INTEGER) AS report_rank,
    CAST(NULL AS BIGINT) AS pid,
    CAST(NULL AS VARCHAR) AS rank_source
WHERE false
