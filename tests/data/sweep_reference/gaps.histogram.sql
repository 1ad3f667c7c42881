-- One row per (rank, device, cause, length bucket) of the idle gaps in the window.
-- Buckets are decades: [0, 1 us), [1 us, 10 us), ... , [10 ms, 100 ms), [100 ms, inf).
-- @reads idle_gaps
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column cause VARCHAR                host_bound, sync, other or unknown.
-- @column bucket_lo_ns BIGINT          Shortest gap length in the bucket (ns).
-- @column bucket_hi_ns BIGINT          Bucket end, exclusive (ns; NULL: unbounded).
-- @column gaps BIGINT                  Number of gaps.
-- @column total_ns BIGINT              Their summed length (ns).
-- @scope report
-- @order rank, device, cause, bucket_lo_ns
WITH bucketed AS (
    SELECT
        rank,
        device,
        cause,
        dur_ns,
        CASE
            WHEN dur_ns < 1000 THEN 0
            WHEN dur_ns < 10000 THEN 1000
            WHEN dur_ns < 100000 THEN 10000
            WHEN dur_ns < 1000000 THEN 100000
            WHEN dur_ns < 10000000 THEN 1000000
            WHEN dur_ns < 100000000 THEN 10000000
            ELSE 100000000
        END::BIGINT AS bucket_lo_ns
    FROM idle_gaps
)
SELECT
    rank,
    device,
    cause,
    bucket_lo_ns,
    CASE
        WHEN bucket_lo_ns = 0 THEN 1000
        WHEN bucket_lo_ns < 100000000 THEN bucket_lo_ns * 10
    END::BIGINT AS bucket_hi_ns,
    count(*) AS gaps,
    sum(dur_ns)::BIGINT AS total_ns
FROM bucketed
GROUP BY rank, device, cause, bucket_lo_ns
ORDER BY rank, device, cause, bucket_lo_ns
