-- One row per (rank, sign of a framework): how many rows of the report show PyTorch,
-- NCCL, DDP, FSDP or torch.compile's Inductor in kernel names, NVTX ranges or the names
-- of processes with GPU work. Inductor's sign is its generated Triton kernels' names,
-- triton_poi_ / triton_red_ / triton_per_ / triton_tem_ / triton_for_ (a program already
-- compiled: advice to compile it would not fit). Advice names a framework only when some
-- rank shows it (the report's trace section); every sign has a row per rank, in the
-- order listed here.
-- @scope report
-- @reads session, kernels, nvtx, processes
-- @column rank INTEGER        Rank of the report.
-- @column framework VARCHAR   pytorch, nccl, ddp, fsdp or inductor.
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
        (7, 'fsdp', 'NVTX ranges'),
        (8, 'inductor', 'kernel names')
),
by_kernel AS (
    SELECT
        rank,
        'kernel names' AS seen_in,
        count(*) FILTER (
            name LIKE '%at::native%'
            OR demangled LIKE '%at::native%'
            OR name LIKE '%at_cuda_detail%'
            OR demangled LIKE '%c10::%'
        ) AS pytorch,
        count(*) FILTER (name LIKE 'nccl%') AS nccl,
        count(*) FILTER (regexp_matches(name, '^triton_(poi|red|per|tem|for)_')) AS inductor
    FROM kernels
    GROUP BY rank
),
by_nvtx AS (
    SELECT
        rank,
        'NVTX ranges' AS seen_in,
        count(*) FILTER (
            regexp_matches(text, '^(fwd|bwd|coll):|^ProfilerStep#|^aten::|^autograd::')
        ) AS pytorch,
        count(*) FILTER (text LIKE 'nccl%') AS nccl,
        count(*) FILTER (text LIKE '%DistributedDataParallel%') AS ddp,
        count(*) FILTER (text LIKE '%FullyShardedDataParallel%' OR text LIKE '%FSDP%') AS fsdp
    FROM nvtx
    GROUP BY rank
),
by_process AS (
    SELECT p.rank, 'names of processes with GPU work' AS seen_in, count(*) AS pytorch
    FROM processes AS p
    SEMI JOIN kernels AS k
        ON k.rank = p.rank
        AND k.pid = p.pid
    WHERE regexp_matches(p.name, '^(python[0-9.]*|torchrun|pt_main_thread)$')
    GROUP BY p.rank
),
hits AS (
    UNPIVOT (
        SELECT * FROM by_kernel
        UNION ALL BY NAME
        SELECT * FROM by_nvtx
        UNION ALL BY NAME
        SELECT * FROM by_process
    )
    ON pytorch, nccl, ddp, fsdp, inductor
    INTO NAME framework VALUE n
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
    AND h.framework = g.framework
    AND h.seen_in = g.seen_in
ORDER BY s.rank, g.sign
