-- One row per (rank, device, compute kernel name) in the analysed window, longest total
-- first: how often it ran, its summed time and share of the device's compute kernel
-- time, its median and spread, and its class (matmul, attention or other: see
-- kernels.tensor_cores). NCCL kernels, copies and sets are not compute kernels (see
-- collectives.exposure, copies.bandwidth). Kernels overlapping the window count whole.
-- @scope report
-- @reads kernel_stats
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column position BIGINT              1 for the kernel with the longest total on the
--                                      device, 2 for the next, ...
-- @column name VARCHAR                 Kernel short name.
-- @column class VARCHAR                matmul, attention or other.
-- @column kernels BIGINT               Runs in the window.
-- @column total_ns BIGINT              Summed duration (ns); overlapping runs count twice.
-- @column share_of_compute DOUBLE      total_ns / summed duration of every compute kernel
--                                      of the device in the window.
-- @column p10_ns DOUBLE                10th percentile duration (ns).
-- @column median_ns DOUBLE             Median duration (ns).
-- @column p90_ns DOUBLE                90th percentile duration (ns).
-- @column max_ns BIGINT                Longest run (ns).
-- @order rank, device, position
SELECT
    rank,
    device,
    row_number() OVER (
        PARTITION BY rank, device ORDER BY total_ns DESC, name, class
    ) AS position,
    name,
    class,
    kernels,
    total_ns,
    total_ns / sum(total_ns) OVER (PARTITION BY rank, device) AS share_of_compute,
    p10_ns,
    p50_ns AS median_ns,
    p90_ns,
    max_ns
FROM kernel_stats
ORDER BY rank, device, position
