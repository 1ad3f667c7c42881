-- One row per step, plus one for the whole run (step NULL): the straggler, i.e.
-- the rank whose lateness cost the others the most wait (the waits of every
-- matched collective are charged to its last rank), its lag behind the median
-- rank, the steps it affected (it may be late only in some), and the phase that
-- explains its lag (the phase with the largest positive excess over the median
-- rank, see crossrank.phase_lag). The first collective of each group is left
-- out (it holds the ranks' start-up skew): the group's first call any rank recorded
-- (xr_keys), so the first collective every rank captured, when one rank's capture
-- starts late, counts as any other. It is significant only when its lag
-- exceeds both the alignment threshold (twice the largest clock uncertainty of
-- the members) and 3 x the run's jitter (1.4826 x median absolute lag of all
-- arrivals), or, over the run, when at least half the wait it imposed falls in
-- steps where it is significant, or it imposed at least 3 x as much wait per step
-- in those steps as in the other steps it is the straggler of (a stall that stands
-- out of its usual lateness); otherwise there is no significant straggler.
-- Times are in aligned run time (see crossrank.collectives); steps without
-- matched collectives have no row, and with step_from / step_to the run row
-- covers only those steps.
-- @scope run
-- @reads xr_keys, xr_collectives, xr_collective_unions, xr_phase_lag
-- @column step BIGINT              Step index, NULL for the whole run.
-- @column rank INTEGER             The rank that imposed the most wait (ties:
--                                  most often last, then lowest rank).
-- @column last_count BIGINT        Collectives at which it arrived last.
-- @column collectives BIGINT       Matched collectives it took part in.
-- @column lag_ns BIGINT            Its lag behind the median rank (ns): the union,
--                                  per step, of the spans from the median arrival
--                                  to its own at the collectives it arrived last
--                                  at, each instant counted once (collectives
--                                  outstanding together, such as DDP's gradient
--                                  buckets, overlap); the run row sums the steps.
-- @column gap_ns BIGINT            The same from the first member's arrival: its
--                                  lag behind the earliest rank (of two ranks, the
--                                  gap to the other), each instant once (ns).
-- @column imposed_wait_ns BIGINT   Others' wait in those collectives (ns; each
--                                  other rank's instant of waiting counted once:
--                                  xr_collective_unions' wait_for).
-- @column total_wait_ns BIGINT     All ranks' wait in the scope's collectives.
-- @column significant BOOLEAN      Its mean lag when last (each collective's own
--                                  lag, averaged) exceeds the alignment
--                                  threshold and 3 x the run's jitter; the run
--                                  row also when at least half the wait it
--                                  imposed falls in steps where it is the
--                                  significant straggler, or it imposed at
--                                  least 3 x as much wait per step there as in
--                                  its other steps (late in some steps only:
--                                  its mean lag is diluted by the others).
-- @column jitter_ns BIGINT         1.4826 x median absolute deviation of the
--                                  lags from each rank's median lag (ns).
-- @column affected_steps VARCHAR   Steps where it is the significant straggler,
--                                  i.e. where others waited for it (run row
--                                  only), comma-separated.
-- @column phase VARCHAR            Phase with its largest excess over the
--                                  median rank (NULL if none is longer); of a
--                                  run row significant through its late steps
--                                  only, over those steps.
-- @column phase_excess_ns BIGINT   That excess summed over the scope's steps.
-- @column phase_steps BIGINT       Steps the phase excess is summed over.
-- @column slow_steps VARCHAR       Steps where that phase ran notably long on it
--                                  (excess > 3 x 1.4826 x the median absolute
--                                  excess of all ranks and steps in the phase,
--                                  and >= half its largest; run row only),
--                                  comma-separated: where
--                                  it was slow; affected_steps is where others
--                                  paid (lateness carries into the next step).
WITH firsts AS (
    -- A group's first collective absorbs the ranks' start-up skew: not lag.
    SELECT pg, min(seq) AS seq
    FROM xr_keys
    GROUP BY pg
),
arrivals AS (
    SELECT
        c.step,
        c.rank,
        c.rank = c.last_rank AS is_last,
        c.lag_ns,
        c.threshold_ns
    FROM xr_collectives AS c
    ANTI JOIN firsts AS f
        ON f.pg = c.pg
        AND f.seq = c.seq
),
lags AS (
    -- Its lateness per step and over the run, each instant once (xr_collective_unions'
    -- lag and gap; the run's, the steps' summed).
    SELECT
        step,
        rank,
        coalesce(sum(ns) FILTER (WHERE part = 'lag'), 0)::BIGINT AS lag_ns,
        coalesce(sum(ns) FILTER (WHERE part = 'gap'), 0)::BIGINT AS gap_ns
    FROM xr_collective_unions
    WHERE part IN ('lag', 'gap')
    GROUP BY GROUPING SETS ((step, rank), (rank))
    HAVING GROUPING(step) = 1
        OR step IS NOT NULL
),
jitter AS (
    -- How much arrivals vary around each rank's usual lag.
    SELECT round(1.4826 * median(abs(lag_ns - rank_lag_ns)))::BIGINT AS jitter_ns
    FROM (
        SELECT lag_ns, median(lag_ns) OVER (PARTITION BY rank) AS rank_lag_ns
        FROM arrivals
    )
),
imposed AS (
    -- The wait each rank imposed on the others, per step and over the run.
    SELECT step, last_rank AS rank, sum(ns)::BIGINT AS imposed_wait_ns
    FROM xr_collective_unions
    WHERE part = 'wait_for'
    GROUP BY GROUPING SETS ((step, last_rank), (last_rank))
    HAVING GROUPING(step) = 1
        OR step IS NOT NULL
),
scopes AS (
    SELECT
        a.step,
        a.rank,
        a.last_count,
        a.collectives,
        coalesce(l.lag_ns, 0)::BIGINT AS lag_ns,
        coalesce(l.gap_ns, 0)::BIGINT AS gap_ns,
        a.summed_lag_ns,
        coalesce(i.imposed_wait_ns, 0)::BIGINT AS imposed_wait_ns,
        a.threshold_ns
    FROM (
        SELECT
            step,
            rank,
            count(*) FILTER (WHERE is_last) AS last_count,
            count(*) AS collectives,
            coalesce(sum(lag_ns) FILTER (WHERE is_last), 0)::BIGINT AS summed_lag_ns,
            coalesce(max(threshold_ns) FILTER (WHERE is_last), 0) AS threshold_ns
        FROM arrivals
        GROUP BY GROUPING SETS ((step, rank), (rank))
        HAVING GROUPING(step) = 1
            OR step IS NOT NULL
    ) AS a
    LEFT JOIN lags AS l
        ON l.rank = a.rank
        AND l.step IS NOT DISTINCT FROM a.step
    LEFT JOIN imposed AS i
        ON i.rank = a.rank
        AND i.step IS NOT DISTINCT FROM a.step
),
picked AS (
    SELECT
        s.*,
        sum(s.imposed_wait_ns) OVER (PARTITION BY s.step)::BIGINT AS total_wait_ns,
        j.jitter_ns,
        s.last_count > 0
        AND s.summed_lag_ns / s.last_count > greatest(s.threshold_ns, 3 * j.jitter_ns)
            AS significant
    FROM scopes AS s
    CROSS JOIN jitter AS j
    QUALIFY row_number() OVER (
        PARTITION BY s.step
        ORDER BY s.imposed_wait_ns DESC, s.last_count DESC, s.rank
    ) = 1
),
affected AS (
    -- Per rank: the steps where it is the significant straggler, the wait it imposed there
    -- and, per step, there and in the other steps it is the straggler of.
    SELECT
        rank,
        string_agg(step::VARCHAR, ',' ORDER BY step) FILTER (WHERE significant)
            AS affected_steps,
        sum(imposed_wait_ns) FILTER (WHERE significant) AS affected_wait_ns,
        avg(imposed_wait_ns) FILTER (WHERE significant) AS affected_step_wait_ns,
        coalesce(avg(imposed_wait_ns) FILTER (WHERE NOT significant), 0) AS usual_step_wait_ns
    FROM picked
    WHERE step IS NOT NULL
    GROUP BY rank
    HAVING bool_or(significant)
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
),
slow AS (
    -- Steps where a rank's phase ran notably long: its excess over the median rank
    -- that step is above 3 robust deviations (1.4826 x median absolute excess of
    -- every rank and step in that phase) and at least half its largest excess.
    SELECT
        rank,
        phase,
        string_agg(step::VARCHAR, ',' ORDER BY step)
            FILTER (WHERE excess_ns > 3 * deviation_ns AND 2 * excess_ns >= largest_ns)
            AS slow_steps
    FROM (
        SELECT
            step,
            rank,
            phase,
            excess_ns,
            1.4826 * median(abs(excess_ns)) OVER (PARTITION BY phase) AS deviation_ns,
            max(excess_ns) OVER (PARTITION BY rank, phase) AS largest_ns
        FROM phase_excess
        WHERE step IS NOT NULL
    )
    GROUP BY rank, phase
),
intermittent AS (
    -- Run rows significant only through the steps where the rank is (late in some steps).
    SELECT p.rank
    FROM picked AS p
    JOIN affected AS a
        ON a.rank = p.rank
    WHERE p.step IS NULL
        AND NOT p.significant
        AND (
            2 * a.affected_wait_ns >= p.imposed_wait_ns
            OR a.affected_step_wait_ns >= 3 * a.usual_step_wait_ns
        )
),
late_phase AS (
    -- Such a rank's phase: its largest excess summed over the steps where it is late.
    SELECT e.rank, e.phase, sum(e.excess_ns)::BIGINT AS excess_ns, count(*) AS steps
    FROM phase_excess AS e
    JOIN picked AS p
        ON p.step = e.step
        AND p.rank = e.rank
        AND p.significant
    SEMI JOIN intermittent AS i
        ON i.rank = e.rank
    GROUP BY e.rank, e.phase
    HAVING sum(e.excess_ns) > 0
    QUALIFY row_number() OVER (PARTITION BY e.rank ORDER BY sum(e.excess_ns) DESC, e.phase) = 1
),
chosen AS (
    SELECT
        p.*,
        p.significant OR (p.step IS NULL AND i.rank IS NOT NULL) AS is_significant,
        CASE WHEN l.rank IS NULL THEN t.phase ELSE l.phase END AS phase,
        CASE WHEN l.rank IS NULL THEN t.excess_ns ELSE l.excess_ns END AS phase_excess_ns,
        CASE WHEN l.rank IS NULL THEN t.steps ELSE l.steps END AS phase_steps
    FROM picked AS p
    LEFT JOIN top_phase AS t
        ON t.rank = p.rank
        AND t.step IS NOT DISTINCT FROM p.step
    LEFT JOIN intermittent AS i
        ON i.rank = p.rank
    LEFT JOIN late_phase AS l
        ON l.rank = p.rank
        AND p.step IS NULL
)
SELECT
    c.step,
    c.rank,
    c.last_count,
    c.collectives,
    c.lag_ns,
    c.gap_ns,
    c.imposed_wait_ns,
    c.total_wait_ns,
    c.is_significant AS significant,
    c.jitter_ns,
    CASE WHEN c.step IS NULL THEN a.affected_steps END AS affected_steps,
    c.phase,
    c.phase_excess_ns,
    c.phase_steps,
    CASE WHEN c.step IS NULL THEN sl.slow_steps END AS slow_steps
FROM chosen AS c
LEFT JOIN affected AS a
    ON a.rank = c.rank
LEFT JOIN slow AS sl
    ON sl.rank = c.rank
    AND sl.phase = c.phase
ORDER BY c.step NULLS LAST
