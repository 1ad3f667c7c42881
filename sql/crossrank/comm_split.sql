-- One row per (step, rank): its time inside matched collectives split into waiting
-- for late peers (the part of each collective before its last member arrived) and
-- transfer (the rest), in aligned run time (see crossrank.collectives). Each is
-- counted once: collectives outstanding together (DDP's asynchronous buckets, two
-- groups at once) overlap in time, so comm_ns is the length of the union of the
-- rank's collectives of the step and wait_ns that of the union of their waits
-- (xr_collective_unions), never a sum over collectives (which can exceed the step). On a fast rank of a
-- straggler run most of its communication time is waiting: the straggler, not the
-- network, is the cost. Rows per step; steps without matched collectives have none.
-- @scope run
-- @reads xr_collectives, xr_collective_unions
-- @column step BIGINT              Step the collectives were issued in.
-- @column rank INTEGER             Rank.
-- @column collectives BIGINT       Matched collectives it took part in.
-- @column comm_ns BIGINT           Time inside at least one of them (ns, the union).
-- @column wait_ns BIGINT           Time waiting for the last member of at least one of
--                                  them (ns, the union).
-- @column transfer_ns BIGINT       comm_ns - wait_ns: inside them, waiting for none (ns).
-- @column wait_share DOUBLE        wait_ns / comm_ns (NULL when comm_ns is 0).
WITH counts AS (
    SELECT step, rank, count(*) AS collectives
    FROM xr_collectives
    GROUP BY step, rank
)
SELECT
    c.step,
    c.rank,
    c.collectives,
    coalesce(comm.ns, 0)::BIGINT AS comm_ns,
    coalesce(wait.ns, 0)::BIGINT AS wait_ns,
    (coalesce(comm.ns, 0) - coalesce(wait.ns, 0))::BIGINT AS transfer_ns,
    coalesce(wait.ns, 0) / nullif(comm.ns, 0) AS wait_share
FROM counts AS c
LEFT JOIN xr_collective_unions AS comm
    ON comm.step IS NOT DISTINCT FROM c.step
    AND comm.rank = c.rank
    AND comm.part = 'comm'
LEFT JOIN xr_collective_unions AS wait
    ON wait.step IS NOT DISTINCT FROM c.step
    AND wait.rank = c.rank
    AND wait.part = 'wait'
ORDER BY c.step NULLS LAST, c.rank
