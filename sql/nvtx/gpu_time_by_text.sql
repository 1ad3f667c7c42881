-- One row per (rank, process, NVTX range text LIKE text_like): how often the range ran and the
-- GPU work launched inside it (see nvtx.range_gpu_time), most GPU time first. Per-call
-- counters (PyTorch's `seq = N`, `op_id = N`, nsyswrap's `seq=N`) are cut from the text
-- so that the calls of one op or collective group together.
-- @include metrics, launch_metrics
-- @param text_like VARCHAR = %         Only ranges whose text is LIKE this.
-- @column rank INTEGER                 Rank of the process (a report may hold several).
-- @column pid BIGINT                   Process id.
-- @column text VARCHAR                 Range text without per-call counters.
-- @column ranges BIGINT                Number of ranges with this text.
-- @column range_ns BIGINT              Their summed duration (ns).
-- @column kernels BIGINT               GPU activities launched inside them.
-- @column gpu_ns BIGINT                Their summed GPU time (ns).
-- @column compute_ns BIGINT            Of which compute kernels (ns).
-- @column nccl_ns BIGINT               Of which NCCL kernels (ns).
-- @column copy_ns BIGINT               Of which memcpy and memset (ns).
-- @scope report
-- @order rank, gpu_ns DESC, text, pid
WITH ranges AS (
    SELECT
        * EXCLUDE (text),
        regexp_replace(text, '(,\s*|\s+)(seq|op_id)\s*=\s*\d+', '', 'g') AS text
    FROM nvtx_gpu_projection($text_like)
)
SELECT
    rank,
    pid,
    text,
    count(*) AS ranges,
    sum(dur_ns)::BIGINT AS range_ns,
    sum(kernels)::BIGINT AS kernels,
    sum(gpu_ns)::BIGINT AS gpu_ns,
    sum(compute_ns)::BIGINT AS compute_ns,
    sum(nccl_ns)::BIGINT AS nccl_ns,
    sum(copy_ns)::BIGINT AS copy_ns
FROM ranges
GROUP BY rank, pid, text
ORDER BY rank, gpu_ns DESC, text, pid
