-- One row per (step, rank): its time inside matched collectives split into waiting
-- for late peers (the part of each collective before its last member arrived) and
-- transfer (the rest), in aligned run time (see crossrank.collectives). On a fast
-- rank of a straggler run most of its communication time is waiting: the straggler,
-- not the network, is the cost. Rows per step; steps without matched collectives
-- have none.
-- @scope run
-- @reads xr_collectives
-- @column step BIGINT              Step the collectives were issued in.
-- @column rank INTEGER             Rank.
-- @column collectives BIGINT       Matched collectives it took part in.
-- @column comm_ns BIGINT           Summed time inside them (ns).
-- @column wait_ns BIGINT           Of which waiting for the last member (ns).
-- @column transfer_ns BIGINT       Of which after the last member arrived (ns).
-- @column wait_share DOUBLE        wait_ns / comm_ns (NULL when comm_ns is 0).
SELECT
    step,
    rank,
    count(*) AS collectives,
    sum(end_ns - start_ns)::BIGINT AS comm_ns,
    sum(wait_ns)::BIGINT AS wait_ns,
    sum(end_ns - start_ns - wait_ns)::BIGINT AS transfer_ns,
    sum(wait_ns) / nullif(sum(end_ns - start_ns), 0) AS wait_share
FROM xr_collectives
GROUP BY step, rank
ORDER BY step NULLS LAST, rank
