-- One row per (step, rank, part, last_rank) of steps [step_from, step_to): how long the
-- rank spent in an interval of that part, each instant counted once, i.e. the length of
-- the union of its intervals: collectives outstanding together (DDP's asynchronous
-- buckets, two groups at once) overlap in time and are never summed. Parts: `comm`,
-- its time inside matched collectives (arrival to end; last_rank NULL); `wait`, its
-- wait in them for their last member (arrival to the last arrival; last_rank NULL);
-- `wait_for`, the same per last rank (the wait that rank imposed on it), without each
-- group's first collective (it holds the ranks' start-up skew: charged to nobody): the
-- first call of the group any rank recorded (xr_keys), so a capture that starts late on
-- one rank, or a window of later steps, leaves none of its collectives out; `lag` and
-- `gap`, on the last rank of those same collectives, from the median arrival (`lag`) or
-- the first one (`gap`) to its own: its lateness (last_rank NULL). The
-- union is a sweep over the intervals in order of start: one that starts past every
-- earlier end opens an island, and the islands' spans add up.
-- @reads xr_collectives, xr_keys
-- @column step               BIGINT   Step the collectives were issued in.
-- @column rank               INTEGER  The rank that spent the time.
-- @column part               VARCHAR  comm, wait, wait_for, lag or gap.
-- @column last_rank          INTEGER  For wait_for, the collectives' last rank (else NULL).
-- @column ns                 BIGINT   Length of the union (ns).
WITH firsts AS (
    SELECT pg, min(seq) AS seq
    FROM xr_keys
    GROUP BY pg
),
charged AS (
    -- The collectives waits are charged for: each group's first left out.
    SELECT c.*, min(c.start_ns) OVER (PARTITION BY c.pg, c.seq) AS first_ns
    FROM xr_collectives AS c
    ANTI JOIN firsts AS f
        ON f.pg = c.pg
        AND f.seq = c.seq
),
intervals AS (
    SELECT step, rank, 'comm' AS part, CAST(NULL AS INTEGER) AS last_rank, start_ns, end_ns
    FROM xr_collectives
    UNION ALL
    SELECT step, rank, 'wait', NULL, start_ns, start_ns + wait_ns
    FROM xr_collectives
    WHERE wait_ns > 0
    UNION ALL
    SELECT step, rank, 'wait_for', last_rank, start_ns, start_ns + wait_ns
    FROM charged
    WHERE wait_ns > 0
    UNION ALL
    SELECT step, rank, 'lag', NULL, start_ns - lag_ns, start_ns
    FROM charged
    WHERE rank = last_rank
        AND lag_ns > 0
    UNION ALL
    SELECT step, rank, 'gap', NULL, first_ns, start_ns
    FROM charged
    WHERE rank = last_rank
        AND start_ns > first_ns
),
reach AS (
    -- The furthest end of the intervals before each, in order of start.
    SELECT
        *,
        max(end_ns) OVER (
            PARTITION BY step, rank, part, last_rank
            ORDER BY start_ns, end_ns
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ) AS reach_ns
    FROM intervals
),
islands AS (
    SELECT
        *,
        sum(CASE WHEN reach_ns IS NULL OR start_ns > reach_ns THEN 1 ELSE 0 END) OVER (
            PARTITION BY step, rank, part, last_rank
            ORDER BY start_ns, end_ns
            ROWS UNBOUNDED PRECEDING
        ) AS island
    FROM reach
)
SELECT step, rank, part, last_rank, sum(island_ns)::BIGINT AS ns
FROM (
    SELECT step, rank, part, last_rank, island, max(end_ns) - min(start_ns) AS island_ns
    FROM islands
    GROUP BY step, rank, part, last_rank, island
)
GROUP BY step, rank, part, last_rank
ORDER BY step NULLS LAST, rank, part, last_rank NULLS FIRST
