-- One row per (rank, process) that launches CUDA graphs: how many graph launches
-- (cudaGraphLaunch, cuGraphLaunch) and how many GPU activities they ran. A program that
-- replays graphs is never told to use them (the report's launch-overhead advice).
-- @scope report
-- @reads launches
-- @column rank INTEGER        Rank of the report.
-- @column pid BIGINT          Process id.
-- @column graph_launches BIGINT  Graph launch calls with work traced.
-- @column activities BIGINT   GPU activities (kernels, copies, sets) those launches ran.
-- @order rank, pid
SELECT
    rank,
    pid,
    count(DISTINCT correlation_id) AS graph_launches,
    count(*) AS activities
FROM launches
WHERE regexp_matches(api, '^(cudaGraphLaunch|cuGraphLaunch)')
GROUP BY rank, pid
ORDER BY rank, pid
