-- One row per (rank, device) with kernels in the window: launch latency percentiles
-- and how many kernels are tiny (shorter than tiny_kernel_ns).
-- @include metrics
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @param tiny_kernel_ns BIGINT = 10000  Kernels shorter than this are tiny (ns).
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column kernels BIGINT               Kernels (not copies) starting in the window.
-- @column launched BIGINT              Of those, kernels with a traced launch call.
-- @column latency_p50_ns BIGINT        Median launch latency (ns).
-- @column latency_p90_ns BIGINT        90th percentile launch latency (ns).
-- @column latency_max_ns BIGINT        Longest launch latency (ns).
-- @column kernel_p50_ns BIGINT         Median kernel duration (ns).
-- @column tiny_kernels BIGINT          Kernels shorter than tiny_kernel_ns.
-- @column tiny_kernel_ns BIGINT        Their summed duration (ns).
-- @scope report
-- @order rank, device
SELECT
    rank,
    device,
    count(*) AS kernels,
    count(latency_ns) AS launched,
    quantile_disc(latency_ns, 0.5) AS latency_p50_ns,
    quantile_disc(latency_ns, 0.9) AS latency_p90_ns,
    max(latency_ns) AS latency_max_ns,
    quantile_disc(dur_ns, 0.5) AS kernel_p50_ns,
    count(*) FILTER (WHERE dur_ns < $tiny_kernel_ns) AS tiny_kernels,
    coalesce(sum(dur_ns) FILTER (WHERE dur_ns < $tiny_kernel_ns), 0)::BIGINT
        AS tiny_kernel_ns
FROM window_launch_latency($window_nvtx, $step_pattern, $step_from, $step_to)
GROUP BY rank, device
ORDER BY rank, device
