-- One row per (rank, device): how many GPU activities (kernels, copies, sets) ran on it,
-- and how many of them were compute kernels, NCCL kernels and memory copies.
-- @scope report
-- @reads kernels
-- @column rank INTEGER        Rank of the report.
-- @column device BIGINT       CUDA device id.
-- @column activities BIGINT   GPU activities: kernels, memcpy and memset.
-- @column compute BIGINT      Of those, compute kernels (kernels.kind = compute).
-- @column nccl BIGINT         Of those, NCCL kernels.
-- @column copies BIGINT       Of those, memory copies (memcpy).
-- @order rank, device
SELECT
    rank,
    device,
    count(*) AS activities,
    count(*) FILTER (kind = 'compute') AS compute,
    count(*) FILTER (kind = 'nccl') AS nccl,
    count(*) FILTER (kind = 'memcpy') AS copies
FROM kernels
GROUP BY ALL
ORDER BY rank, device
