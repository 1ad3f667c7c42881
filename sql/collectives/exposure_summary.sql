-- One row per (rank, device) with NCCL kernels in the window: how many collectives were
-- hidden behind compute, partly hidden or exposed, and their time.
-- @reads collective_exposure
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column collectives BIGINT           NCCL kernels starting in the window.
-- @column hidden BIGINT                Kernels with no exposed time.
-- @column partly_hidden BIGINT         Kernels partly overlapped by compute.
-- @column exposed BIGINT               Kernels with no compute beside them.
-- @column total_ns BIGINT              Summed NCCL kernel time (ns).
-- @column overlap_ns BIGINT            Summed time compute ran beside them (ns).
-- @column exposed_ns BIGINT            Summed exposed time (ns).
-- @scope report
-- @order rank, device
SELECT
    rank,
    device,
    count(*) AS collectives,
    count(*) FILTER (WHERE exposure = 'hidden') AS hidden,
    count(*) FILTER (WHERE exposure = 'partly_hidden') AS partly_hidden,
    count(*) FILTER (WHERE exposure = 'exposed') AS exposed,
    sum(dur_ns)::BIGINT AS total_ns,
    sum(overlap_ns)::BIGINT AS overlap_ns,
    sum(exposed_ns)::BIGINT AS exposed_ns
FROM collective_exposure
GROUP BY rank, device
ORDER BY rank, device
