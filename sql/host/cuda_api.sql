-- One row per (rank, process, CUDA API function) called in the analysed window: how often,
-- how long in total, the median and longest call, and its share of the process's time in
-- CUDA calls (as nsys stats cuda_api_sum). Runtime and driver calls both count, version
-- suffixes (_v7000) dropped. Long cudaStreamSynchronize / cudaDeviceSynchronize /
-- cudaEventSynchronize calls are the host waiting for the GPU; long launch calls
-- (cudaLaunchKernel, cuLaunchKernelEx) are launch overhead. The window is the span of the
-- report's device windows (first to last GPU activity by default); a report without GPU
-- work counts every call. Longest total first.
-- @scope report
-- @reads api_calls, device_windows
-- @column rank INTEGER                 Rank of the process.
-- @column pid BIGINT                   Process id.
-- @column api VARCHAR                  Function, e.g. cudaLaunchKernel.
-- @column calls BIGINT                 Calls starting in the window.
-- @column total_ns BIGINT              Their summed duration (ns).
-- @column share DOUBLE                 total_ns / the process's summed CUDA call time.
-- @column median_ns DOUBLE             Median call (ns).
-- @column p90_ns DOUBLE                90th percentile call (ns).
-- @column max_ns BIGINT                Longest call (ns).
-- @order rank, total_ns DESC, api, pid
WITH span AS (
    SELECT rank, min(window_start_ns) AS start_ns, max(window_end_ns) AS end_ns
    FROM device_windows
    GROUP BY rank
),
calls AS (
    SELECT
        a.rank,
        a.pid,
        regexp_replace(a.api, '_v[0-9]+$', '') AS api,
        count(*) AS calls,
        sum(a.dur_ns)::BIGINT AS total_ns,
        quantile_cont(a.dur_ns, [0.5, 0.9]) AS q,
        max(a.dur_ns) AS max_ns
    FROM api_calls AS a
    LEFT JOIN span AS s
        ON s.rank = a.rank
    WHERE s.rank IS NULL
        OR a.start_ns BETWEEN s.start_ns AND s.end_ns
    GROUP BY a.rank, a.pid, regexp_replace(a.api, '_v[0-9]+$', '')
)
SELECT
    rank,
    pid,
    api,
    calls,
    total_ns,
    total_ns / sum(total_ns) OVER (PARTITION BY rank, pid) AS share,
    q[1] AS median_ns,
    q[2] AS p90_ns,
    max_ns
FROM calls
ORDER BY rank, total_ns DESC, api, pid
