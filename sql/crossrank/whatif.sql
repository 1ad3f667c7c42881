-- One row per candidate fix: the step time it would save, replayed (what-if analysis; the
-- model and its assumptions: nsyswrap.crossrank.whatif). The window's steps are replayed,
-- each rank from its recorded start of the first, from its ranks' work between their
-- events (step starts and ends, the issue of each matched collective, waits for
-- collectives) and its collectives (each ends at its last member's arrival plus that
-- member's transfer time), then again with the fix:
--   rank        rank R idealised: its work in each phase, by each of its events, no slower
--               than the median other rank's by the same event (the issue of, or the wait
--               for, the same collective; the step's start or end);
--   rank_phase  the same for phase P of rank R only (rank NULL: P on every rank);
--   collective  every collective of op in group pg hidden: each member ends at its own
--               arrival (no transfer, no waiting); it saves at most that op's exposed time;
--   all         every rank idealised: gain_ns_per_step is the recorded step time less the
--               ideal one, slowdown = recorded / ideal.
-- Where the trace does not settle a dependency (a host that resumed right after a
-- collective ended, with no recorded call that waited: crossrank.assumed_waits), the replay
-- assumes the wait (gain_ns_per_step) and states the range: the gain replayed without
-- those waits and with them (gain_low_ns_per_step, gain_high_ns_per_step; `assumed`: they
-- differ). Idealising a rank takes off, at each event, all its lateness behind the median
-- other rank: its steady excess and its step-to-step noise; a fix of what is slow in it
-- leaves its noise. gain_steady_ns_per_step is the gain of removing only its steady excess
-- (at each event its excess, at most its median over the window's steps at the same place
-- in the step: the n-th event of the step; whole where it exceeds that median by more than
-- 3 x the median deviation from it: a stall; with fewer than 3 steps, all of it): where it
-- is below gain_ns_per_step, the saving lies between the two.
-- A step's time: from the previous step's end on its last rank to its own end on its last
-- rank (the first step: from its latest start). A step is affected by a fix when the fix
-- saves more there than the step's replay residual and the run's step-to-step noise
-- (noise_ns: how much a rank's own work varies from one step to the next, measured on the
-- run: per rank 1.4826 x the median absolute deviation of its own work per step over the
-- window's steps, xr_own_work, then the median over the ranks), and more than 3 x that
-- noise (the straggler rule's 3 x jitter) where the fix's median gain over the steps is
-- not above the noise: a fix that saves nothing in a usual step is affected where a stall
-- stands out, not where a rank's jitter puts it a little behind the others; a chronic
-- straggler's fix, in every step where it saves more than the noise. A fix that saves
-- time in at least half the steps is persistent, in fewer intermittent. Rows of candidates that change
-- nothing are left out; a run without step ranges is one step per rank (step NULL: from
-- its first collective to its last end).
-- @scope run
-- @reads xr_whatif, xr_own_work
-- @column kind VARCHAR             rank, rank_phase, stage, collective or all.
-- @column rank INTEGER             The rank idealised (NULL: every rank, or none).
-- @column phase VARCHAR            The phase idealised (NULL: every phase, or none).
-- @column stage INTEGER            The pipeline stage idealised (NULL: none).
-- @column pg VARCHAR               The group of the collective hidden (NULL: none).
-- @column op VARCHAR               The collective hidden (NULL: none).
-- @column steps VARCHAR            Steps affected (see above), comma-separated.
-- @column affected_steps BIGINT    How many.
-- @column steps_in_window BIGINT      Steps in the window.
-- @column gain_ns_per_step DOUBLE  Step time saved, mean over the window's steps (ns).
-- @column gain_pct DOUBLE          That, in % of the mean replayed step time.
-- @column gain_ns_per_affected_step DOUBLE  Mean over the affected steps (ns; NULL: none).
-- @column pattern VARCHAR          persistent, intermittent or none (see above).
-- @column residual_ns BIGINT       Largest replay residual of a window step (ns): the
--                                  replayed step time minus the recorded one, in size.
-- @column noise_ns BIGINT          The run's step-to-step noise (see above) (ns).
-- @column share DOUBLE             kind rank: its gain / the gain of idealising all.
-- @column slowdown DOUBLE          kind all: recorded / ideal step time.
-- @column gain_low_ns_per_step DOUBLE   The least of the gains with and without the waits
--                                  the replay assumed, mean over the window's steps (ns).
-- @column gain_high_ns_per_step DOUBLE  The greatest of the two (ns).
-- @column assumed BOOLEAN          The gain depends on a wait the replay assumed (the two
--                                  differ in some step).
-- @column gain_steady_ns_per_step DOUBLE  kind rank, rank_phase, all: the gain of
--                                  removing only the ranks' steady excess (see above), mean
--                                  over the window's steps, at most gain_ns_per_step (ns);
--                                  else gain_ns_per_step.
WITH win AS (
    SELECT *
    FROM xr_whatif
    WHERE ($step_from IS NULL OR step >= $step_from)
        AND ($step_to IS NULL OR step < $step_to)
),
work AS (
    SELECT rank, step, sum(work_ns) AS work_ns
    FROM xr_own_work
    WHERE ($step_from IS NULL OR step >= $step_from)
        AND ($step_to IS NULL OR step < $step_to)
    GROUP BY rank, step
),
spread AS (
    SELECT rank, 1.4826 * median(abs(work_ns - typical_ns)) AS noise_ns
    FROM (SELECT *, median(work_ns) OVER (PARTITION BY rank) AS typical_ns FROM work)
    GROUP BY rank
),
noise AS (
    SELECT coalesce(round(median(noise_ns))::BIGINT, 0) AS noise_ns
    FROM spread
),
typical AS (
    SELECT *, median(gain_ns) OVER (PARTITION BY kind, rank, phase, stage, pg, op) AS typical_ns
    FROM win
),
marked AS (
    SELECT
        w.* EXCLUDE (typical_ns),
        n.noise_ns,
        w.gain_ns > greatest(
            w.residual_ns, CASE WHEN w.typical_ns > n.noise_ns THEN 1 ELSE 3 END * n.noise_ns
        ) AS affected
    FROM typical AS w
    CROSS JOIN noise AS n
),
per_fix AS (
    SELECT
        kind,
        rank,
        phase,
        stage,
        pg,
        op,
        string_agg(step::VARCHAR, ',' ORDER BY step) FILTER (WHERE affected) AS steps,
        count(*) FILTER (WHERE affected) AS affected_steps,
        count(*) AS steps_in_window,
        avg(gain_ns) AS gain_ns_per_step,
        100 * sum(gain_ns) / nullif(sum(replayed_ns), 0) AS gain_pct,
        avg(gain_ns) FILTER (WHERE affected) AS gain_ns_per_affected_step,
        CASE
            WHEN affected_steps = 0 THEN 'none'
            WHEN 2 * affected_steps >= steps_in_window THEN 'persistent'
            ELSE 'intermittent'
        END AS pattern,
        max(residual_ns) AS residual_ns,
        any_value(noise_ns) AS noise_ns,
        sum(recorded_ns) / nullif(sum(whatif_ns), 0) AS slowdown,
        avg(gain_low_ns) AS gain_low_ns_per_step,
        avg(gain_high_ns) AS gain_high_ns_per_step,
        bool_or(gain_low_ns <> gain_high_ns) AS assumed,
        least(avg(gain_steady_ns), avg(gain_ns)) AS gain_steady_ns_per_step
    FROM marked
    GROUP BY kind, rank, phase, stage, pg, op
)
SELECT
    * EXCLUDE (slowdown, gain_low_ns_per_step, gain_high_ns_per_step, assumed, gain_steady_ns_per_step),
    CASE WHEN kind = 'rank' THEN gain_ns_per_step / nullif(
        max(gain_ns_per_step) FILTER (WHERE kind = 'all') OVER (), 0) END AS share,
    CASE WHEN kind = 'all' THEN slowdown END AS slowdown,
    gain_low_ns_per_step,
    gain_high_ns_per_step,
    assumed,
    gain_steady_ns_per_step
FROM per_fix
ORDER BY gain_ns_per_step DESC, kind, rank NULLS FIRST, phase NULLS FIRST, stage, pg, op
