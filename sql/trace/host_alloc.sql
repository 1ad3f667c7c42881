-- One row per (rank, process, pinned host memory API): how often the program allocated
-- or registered pinned host memory (cudaHostAlloc, cudaMallocHost, cudaHostRegister and
-- their driver calls), version suffixes (_v3020) dropped.
-- @scope report
-- @reads api_calls
-- @column rank INTEGER   Rank of the process (of the report when it holds one rank).
-- @column pid BIGINT     Process that made the calls.
-- @column api VARCHAR    API name without its version suffix, e.g. cudaHostAlloc.
-- @column calls BIGINT   Number of calls.
-- @order rank, pid, api
SELECT
    rank,
    pid,
    regexp_replace(api, '_v[0-9]+$', '') AS api,
    count(*) AS calls
FROM api_calls
WHERE regexp_matches(api, '^(cudaHostAlloc|cudaMallocHost|cudaHostRegister|cuMemHostAlloc|cuMemAllocHost|cuMemHostRegister)')
GROUP BY ALL
ORDER BY rank, pid, api
