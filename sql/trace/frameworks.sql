-- One row per (rank, sign of a framework): how many rows of the report show PyTorch,
-- NCCL, DDP or FSDP in kernel names, NVTX ranges or the names of processes with GPU
-- work. Advice names a framework only when some rank shows it (the report's trace
-- section); every sign has a row per rank, in the order listed here.
-- @scope report
-- @reads session, kernels, nvtx, processes
-- @column rank INTEGER        Rank of the report.
-- @column framework VARCHAR   pytorch, nccl, ddp or fsdp.
-- @column seen_in VARCHAR     kernel names, NVTX ranges or names of processes with GPU work.
-- @column matches BIGINT      Rows (kernels, NVTX ranges, processes) that show it; 0: none.
-- @order rank
WITH signs(sign, framework, seen_in) AS (
    VALUES
        (1, 'pytorch', 'kernel names'),
        (2, 'pytorch', 'NVTX ranges'),
        (3, 'pytorch', 'names of processes with GPU work'),
        (4, 'nccl', 'kernel names'),
        (5, 'nccl', 'NVTX ranges'),
        (6, 'ddp', 'NVTX ranges'),
        (7, 'fsdp', 'NVTX ranges')
),
hits AS (
    SELECT rank, 1 AS sign, count(*) AS n
    FROM kernels
    WHERE name LIKE '%at::native%'
        OR demangled LIKE '%at::native%'
        OR name LIKE '%at_cuda_detail%'
        OR demangled LIKE '%c10::%'
    GROUP BY rank
    UNION ALL
    SELECT rank, 2, count(*)
    FROM nvtx
    WHERE regexp_matches(text, '^(fwd|bwd|coll):|^ProfilerStep#|^aten::|^autograd::')
    GROUP BY rank
    UNION ALL
    SELECT p.rank, 3, count(*)
    FROM processes AS p
    SEMI JOIN kernels AS k
        ON k.rank = p.rank
        AND k.pid = p.pid
    WHERE regexp_matches(p.name, '^(python[0-9.]*|torchrun|pt_main_thread)$')
    GROUP BY p.rank
    UNION ALL
    SELECT rank, 4, count(*)
    FROM kernels
    WHERE name LIKE 'nccl%'
    GROUP BY rank
    UNION ALL
    SELECT rank, 5, count(*)
    FROM nvtx
    WHERE text LIKE 'nccl%'
    GROUP BY rank
    UNION ALL
    SELECT rank, 6, count(*)
    FROM nvtx
    WHERE text LIKE '%DistributedDataParallel%'
    GROUP BY rank
    UNION ALL
    SELECT rank, 7, count(*)
    FROM nvtx
    WHERE text LIKE '%FullyShardedDataParallel%'
        OR text LIKE '%FSDP%'
    GROUP BY rank
)
SELECT
    s.rank,
    g.framework,
    g.seen_in,
    coalesce(h.n, 0)::BIGINT AS matches
FROM session AS s
CROSS JOIN signs AS g
LEFT JOIN hits AS h
    ON h.rank = s.rank
    AND h.sign = g.sign
ORDER BY s.rank, g.sign
