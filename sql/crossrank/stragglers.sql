-- One row per step, plus one for the whole run (step NULL): the straggler, i.e.
-- the rank that arrived last at the most matched collectives, by how much, the
-- wait it imposed on the others, and the phase that explains its lag against
-- the median rank (the phase with the largest positive excess, see
-- crossrank.phase_lag). Times are in aligned run time (see
-- crossrank.collectives); steps without matched collectives have no row, and
-- with step_from / step_to the run row covers only those steps.
-- @scope run
-- @reads xr_collectives, xr_phase_lag
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL  Only steps >= this (NULL: from the first).
-- @param step_to BIGINT = NULL    Only steps < this (NULL: to the last).
-- @column step BIGINT              Step index, NULL for the whole run.
-- @column rank INTEGER             The straggler: most often last (ties: most
--                                  wait imposed, then lowest rank).
-- @column last_count BIGINT        Collectives at which it arrived last.
-- @column collectives BIGINT       Matched collectives it took part in.
-- @column lag_ns BIGINT            Its arrival minus the median arrival, summed
--                                  over the collectives it arrived last at
--                                  (ns).
-- @column imposed_wait_ns BIGINT   Others' wait in those collectives (ns).
-- @column total_wait_ns BIGINT     All ranks' wait in the scope's collectives.
-- @column phase VARCHAR            Phase with its largest excess over the
--                                  median rank (NULL if none is longer).
-- @column phase_excess_ns BIGINT   That excess summed over the scope's steps.
-- @column phase_steps BIGINT       Steps the phase excess is summed over.
WITH arrivals AS (
    SELECT
        step,
        rank,
        rank = last_rank AS is_last,
        lag_ns,
        sum(wait_ns) OVER (PARTITION BY pg, seq) AS collective_wait_ns
    FROM xr_collectives
),
scopes AS (
    SELECT
        step,
        rank,
        count(*) FILTER (WHERE is_last) AS last_count,
        count(*) AS collectives,
        coalesce(sum(lag_ns) FILTER (WHERE is_last), 0)::BIGINT AS lag_ns,
        coalesce(sum(collective_wait_ns) FILTER (WHERE is_last), 0)::BIGINT
            AS imposed_wait_ns
    FROM arrivals
    GROUP BY GROUPING SETS ((step, rank), (rank))
    HAVING GROUPING(step) = 1
        OR step IS NOT NULL
),
picked AS (
    SELECT
        *,
        sum(imposed_wait_ns) OVER (PARTITION BY step)::BIGINT AS total_wait_ns
    FROM scopes
    QUALIFY row_number() OVER (
        PARTITION BY step
        ORDER BY last_count DESC, imposed_wait_ns DESC, rank
    ) = 1
),
phase_excess AS (
    SELECT
        step,
        rank,
        phase,
        sum(greatest(host_ns - host_median_ns, gpu_ns - gpu_median_ns))::BIGINT
            AS excess_ns,
        count(*) AS steps
    FROM xr_phase_lag
    GROUP BY GROUPING SETS ((step, rank, phase), (rank, phase))
),
top_phase AS (
    SELECT *
    FROM phase_excess
    WHERE excess_ns > 0
    QUALIFY row_number() OVER (
        PARTITION BY step, rank ORDER BY excess_ns DESC, phase
    ) = 1
)
SELECT
    p.step,
    p.rank,
    p.last_count,
    p.collectives,
    p.lag_ns,
    p.imposed_wait_ns,
    p.total_wait_ns,
    t.phase,
    t.excess_ns AS phase_excess_ns,
    t.steps AS phase_steps
FROM picked AS p
LEFT JOIN top_phase AS t
    ON t.rank = p.rank
    AND t.step IS NOT DISTINCT FROM p.step
ORDER BY p.step NULLS LAST
