-- One row per (rank, device) with compute kernels in the analysed window: their summed
-- time by class and the tensor-core share, the share of compute kernel time spent in
-- matrix multiplies and attention (the kernels that run on tensor cores; the classifier
-- is kernel_class, documented in docs/compute.md). The share is of kernel time, by
-- kernel name: not a hardware counter (no tensor-pipe utilization is measured; a
-- matmul kernel that runs its tensor cores a tenth of its time counts whole, an FP32
-- `sgemm` on CUDA cores counts as matmul). Sums, not unions: kernels running at once
-- on several streams count each. Kernels overlapping the window count whole.
-- @scope report
-- @reads kernel_stats
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column kernels BIGINT               Compute kernels in the window.
-- @column compute_ns BIGINT            Their summed duration (ns).
-- @column matmul_ns BIGINT             Of which matrix-multiply kernels (ns).
-- @column attention_ns BIGINT          Of which attention kernels (ns).
-- @column other_ns BIGINT              Of which every other compute kernel (ns).
-- @column tensor_core_share DOUBLE     (matmul_ns + attention_ns) / compute_ns.
-- @order rank, device
SELECT
    rank,
    device,
    sum(kernels)::BIGINT AS kernels,
    sum(total_ns)::BIGINT AS compute_ns,
    coalesce(sum(total_ns) FILTER (WHERE class = 'matmul'), 0)::BIGINT AS matmul_ns,
    coalesce(sum(total_ns) FILTER (WHERE class = 'attention'), 0)::BIGINT AS attention_ns,
    coalesce(sum(total_ns) FILTER (WHERE class = 'other'), 0)::BIGINT AS other_ns,
    (coalesce(sum(total_ns) FILTER (WHERE class IN ('matmul', 'attention')), 0)
        / nullif(sum(total_ns), 0))::DOUBLE AS tensor_core_share
FROM kernel_stats
GROUP BY rank, device
ORDER BY rank, device
