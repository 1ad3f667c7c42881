-- One row per (rank, process group, group size) of nsyswrap's collective ranges (`coll:`,
-- see docs): the groups a rank called collectives in, and how many calls.
-- @scope report
-- @reads collectives
-- @column rank INTEGER       Rank of the process (a report may hold several).
-- @column pid BIGINT         Process that called them.
-- @column pg VARCHAR         Process group id (pg= of the range).
-- @column group_size BIGINT  Ranks in the group (size= of the range).
-- @column calls BIGINT       Collective calls on it.
-- @order rank, pg, group_size, pid
SELECT rank, pid, pg, group_size, count(*) AS calls
FROM collectives
GROUP BY rank, pid, pg, group_size
ORDER BY rank, pg, group_size, pid
