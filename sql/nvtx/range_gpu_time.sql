-- One row per NVTX range LIKE text_like: the GPU work launched inside it, i.e. whose
-- launch call started within [start_ns, end_ns) on the range's thread (nested ranges
-- each count the work of their children). Time is summed kernel/copy duration.
-- @include metrics, launch_metrics
-- @param text_like VARCHAR = %         Only ranges whose text is LIKE this.
-- @column rank INTEGER                 Rank of the report.
-- @column pid BIGINT                   Process id.
-- @column tid BIGINT                   Thread that opened the range.
-- @column text VARCHAR                 Range text.
-- @column start_ns BIGINT              Range start (session clock ns).
-- @column end_ns BIGINT                Range end (ns).
-- @column dur_ns BIGINT                Range duration (ns).
-- @column kernels BIGINT               GPU activities launched inside the range.
-- @column gpu_ns BIGINT                Their summed GPU time (ns).
-- @column compute_ns BIGINT            Of which compute kernels (ns).
-- @column nccl_ns BIGINT               Of which NCCL kernels (ns).
-- @column copy_ns BIGINT               Of which memcpy and memset (ns).
-- @scope report
-- @order rank, pid, tid, start_ns, end_ns DESC, text
SELECT *
FROM nvtx_gpu_projection($text_like)
ORDER BY rank, pid, tid, start_ns, end_ns DESC, text
