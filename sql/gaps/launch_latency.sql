-- One row per kernel starting in the window: its launch call and launch latency
-- (kernel start - launch call start); NULL latency when the call was not traced.
-- @include metrics, launch_metrics
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
-- @scope report
-- @order rank, device, start_ns, correlation_id
SELECT *
FROM window_launch_latency($window_nvtx, $step_pattern, $step_from, $step_to)
ORDER BY rank, device, start_ns, correlation_id
