-- One row per rank and window step: the run's steps as the replay times them with that
-- rank idealised (nsyswrap.crossrank.whatif, candidate kind rank: its work in each phase
-- no slower than the median other rank's), laid end to end in run time from the step
-- time's origin (the latest recorded start of the window's first step on any rank, see
-- crossrank.step_times), beside what idealising every rank would give. The ideal track
-- of `nsyswrap timeline`: where a rank's track ends sooner than the recorded steps, fixing
-- that rank alone saves the difference. A rank the replay has no fix for (its work is
-- nowhere slower than the median other rank's) keeps the replayed step times (saved_ns
-- 0). Only runs with step ranges and a replay (crossrank.whatif has rows).
-- @scope run
-- @include metrics
-- @reads xr_whatif, xr_member_steps, xr_clock_offsets
-- @column rank INTEGER             The rank idealised.
-- @column step BIGINT              Step.
-- @column start_ns BIGINT          Ideal start, ns of run time (as crossrank.trace_events).
-- @column ideal_ns BIGINT          The run's step time with this rank idealised (ns).
-- @column recorded_ns BIGINT       The run's step time as recorded (ns).
-- @column replayed_ns BIGINT       As replayed from the recorded durations (ns).
-- @column saved_ns BIGINT          replayed_ns - ideal_ns (ns).
-- @column all_ideal_ns BIGINT      The run's step time with every rank idealised (ns).
WITH win AS (
    SELECT *
    FROM xr_whatif
    WHERE step IS NOT NULL
        AND ($step_from IS NULL OR step >= $step_from)
        AND ($step_to IS NULL OR step < $step_to)
),
steps AS (
    SELECT DISTINCT step, recorded_ns, replayed_ns
    FROM win
),
everyone AS (
    SELECT step, whatif_ns AS all_ideal_ns
    FROM win
    WHERE kind = 'all'
),
aligned AS (
    SELECT DISTINCT s.rank
    FROM xr_member_steps AS s
    JOIN xr_clock_offsets AS o
        USING (rank)
    WHERE o.aligned AND s.step IN (SELECT step FROM steps)
),
origin AS (
    SELECT max(run_ns(s.start_ns, o.shift_ns, o.drift_ppb, o.jump_at_ns, o.jump_ns)) AS t0
    FROM xr_member_steps AS s
    JOIN xr_clock_offsets AS o
        USING (rank)
    WHERE o.aligned AND s.step = (SELECT min(step) FROM steps)
),
ideal AS (
    SELECT
        a.rank,
        s.step,
        coalesce(w.whatif_ns, s.replayed_ns) AS ideal_ns,
        s.recorded_ns,
        s.replayed_ns,
        e.all_ideal_ns
    FROM aligned AS a
    CROSS JOIN steps AS s
    LEFT JOIN win AS w
        ON w.kind = 'rank' AND w.rank = a.rank AND w.step = s.step
    LEFT JOIN everyone AS e
        ON e.step = s.step
)
SELECT
    i.rank,
    i.step,
    (o.t0 + coalesce(sum(i.ideal_ns) OVER (
        PARTITION BY i.rank ORDER BY i.step ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
    ), 0))::BIGINT AS start_ns,
    i.ideal_ns,
    i.recorded_ns,
    i.replayed_ns,
    i.replayed_ns - i.ideal_ns AS saved_ns,
    i.all_ideal_ns
FROM ideal AS i
CROSS JOIN origin AS o
ORDER BY i.rank, i.step
