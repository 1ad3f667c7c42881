-- One row per (rank, step, kernel name, kind): the GPU time of the activities (kernels,
-- copies, sets) that start in the step, by the steps of the process that launched them
-- (step_lookup: the one rule that places an instant in a step). Activities starting
-- outside every step are left out.
-- @scope report
-- @reads kernels, step_lookup
-- @column rank INTEGER       Rank of the process (a report may hold several).
-- @column pid BIGINT         Process that launched them.
-- @column step BIGINT        Step whose region holds their start.
-- @column name VARCHAR       Kernel name (memcpy and memset rows: their kind).
-- @column kind VARCHAR       compute, nccl, memcpy, memset or other.
-- @column gpu_ns BIGINT      Their summed duration (ns).
-- @order rank, step, name, kind, pid
SELECT
    k.rank,
    k.pid,
    s.step,
    k.name,
    k.kind,
    sum(k.dur_ns)::BIGINT AS gpu_ns
FROM kernels AS k
ASOF JOIN (SELECT * FROM step_lookup WHERE region_end_ns > start_ns) AS s
    ON s.rank = k.rank
    AND s.pid = k.pid
    AND k.start_ns >= s.start_ns
WHERE k.start_ns < s.region_end_ns
GROUP BY k.rank, k.pid, s.step, k.name, k.kind
ORDER BY k.rank, s.step, k.name, k.kind, k.pid
