-- One row per kernel starting in the window: its launch call and launch latency
-- (kernel start - launch call start); NULL latency when the call was not traced.
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column stream BIGINT                CUDA stream id.
-- @column pid BIGINT                   Process id.
-- @column tid BIGINT                   Thread of the launch call.
-- @column correlation_id BIGINT        CUPTI correlation id.
-- @column kind VARCHAR                 compute, nccl or other.
-- @column name VARCHAR                 Kernel name.
-- @column launch_ns BIGINT             Launch call start (session clock ns).
-- @column start_ns BIGINT              Kernel start (ns).
-- @column dur_ns BIGINT                Kernel duration (ns).
-- @column latency_ns BIGINT            start_ns - launch_ns (ns).
SELECT
    k.rank,
    k.device,
    k.stream,
    k.pid,
    l.tid,
    k.correlation_id,
    k.kind,
    k.name,
    l.start_ns AS launch_ns,
    k.start_ns,
    k.dur_ns,
    k.start_ns - l.start_ns AS latency_ns
FROM kernels AS k
JOIN analysis_window($window_nvtx, $step_pattern, $step_from, $step_to) AS w
    ON w.rank = k.rank
    AND w.device = k.device
LEFT JOIN launches AS l
    ON l.rank = k.rank
    AND l.pid = k.pid
    AND l.correlation_id = k.correlation_id
WHERE k.kind NOT IN ('memcpy', 'memset')
    AND k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns
ORDER BY k.rank, k.device, k.start_ns, k.correlation_id
