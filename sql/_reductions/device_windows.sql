-- One row per (rank, device) with a window: the analysed window (analysis_window),
-- computed once per report and window and read by every windowed object.
-- @include metrics
-- @column device             BIGINT   CUDA device id.
-- @column window_source      VARCHAR  activity, nvtx, steps or nvtx+steps.
-- @column window_start_ns    BIGINT   Window start, ns on the report's session clock.
-- @column window_end_ns      BIGINT   Window end, ns.
SELECT *
FROM analysis_window($window_nvtx, $step_pattern, $step_from, $step_to)
