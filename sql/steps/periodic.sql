-- One row per process whose long steps recur with a period: steps that last longer than
-- the process's median step by more than stall_sigmas x its step-to-step noise (1.4826 x
-- the median absolute deviation of its step times, robust to stalls in a minority of
-- steps), at least min_stalls of them, every period-th step of the window (an equal gap
-- between each two, at least 2, none missing after the last up to the window's end, and
-- at most one before the first: `if step % 5 == 0 and step > 0`; e.g. steps 5, 10 and
-- 15 of steps 0-17, a logging or checkpoint stall every 5 steps).
-- The phase holding the extra time is the phase range (crossrank.step_phases' phases:
-- ranges directly inside the step on its thread) whose host time, waits left out, in the
-- long steps exceeds its median in the other steps by the most, named when that is at
-- least half the steps' extra time (else NULL: no phase holds it, e.g. a rank waiting in
-- a collective for another rank's stall, or time outside every phase range).
-- @scope report
-- @reads xr_steps, xr_phases
-- @param stall_sigmas DOUBLE = 3   A long step exceeds the median step by this many
--                                  robust standard deviations.
-- @param min_stalls BIGINT = 3     Long steps needed to call them periodic.
-- @column rank INTEGER             Rank of the process.
-- @column pid BIGINT               Process.
-- @column period BIGINT            Steps from one long step to the next.
-- @column steps VARCHAR            The long steps, comma-separated.
-- @column stalls BIGINT            How many.
-- @column median_step_ns BIGINT    The process's median step time in the window (ns).
-- @column noise_ns BIGINT          1.4826 x the median absolute deviation of its step
--                                  times (ns).
-- @column extra_ns BIGINT          Mean over the long steps of their time above the
--                                  median step (ns).
-- @column phase VARCHAR            The phase holding the extra time (see above; NULL:
--                                  none holds half of it).
-- @column phase_extra_ns BIGINT    Mean over the long steps of that phase's host time
--                                  above its median in the other steps (ns; NULL: none).
-- @order rank, pid
WITH spans AS (
    SELECT rank, pid, step, max(end_ns) - min(start_ns) AS duration_ns
    FROM xr_steps
    WHERE ($step_from IS NULL OR step >= $step_from)
        AND ($step_to IS NULL OR step < $step_to)
    GROUP BY rank, pid, step
),
middle AS (
    SELECT pid, median(duration_ns) AS median_ns, min(step) AS first_step, max(step) AS last_step
    FROM spans
    GROUP BY pid
),
spread AS (
    SELECT s.pid, m.median_ns, m.first_step, m.last_step,
        1.4826 * median(abs(s.duration_ns - m.median_ns)) AS noise_ns
    FROM spans AS s
    JOIN middle AS m USING (pid)
    GROUP BY ALL
),
long_steps AS (
    SELECT s.pid, s.step, s.duration_ns - p.median_ns AS extra_ns,
        s.step - lag(s.step) OVER (PARTITION BY s.pid ORDER BY s.step) AS gap
    FROM spans AS s
    JOIN spread AS p USING (pid)
    WHERE s.duration_ns - p.median_ns > $stall_sigmas * p.noise_ns
        AND s.duration_ns > p.median_ns
),
periodic AS (
    SELECT
        l.pid,
        min(l.gap) AS period,
        string_agg(l.step::VARCHAR, ',' ORDER BY l.step) AS steps,
        count(*) AS stalls,
        any_value(s.rank) AS rank,
        any_value(p.median_ns) AS median_ns,
        any_value(p.noise_ns) AS noise_ns,
        avg(l.extra_ns) AS extra_ns
    FROM long_steps AS l
    JOIN spread AS p USING (pid)
    JOIN (SELECT DISTINCT rank, pid FROM spans) AS s USING (pid)
    GROUP BY l.pid
    HAVING count(*) >= $min_stalls
        AND min(l.gap) = max(l.gap)
        AND min(l.gap) >= 2
        AND min(l.step) - 2 * min(l.gap) < any_value(p.first_step)
        AND max(l.step) + min(l.gap) > any_value(p.last_step)
),
phase_steps AS (
    -- host time per (process, step, phase) of the periodic processes
    SELECT f.pid, f.step, f.phase, sum(f.host_ns) AS host_ns,
        list_contains(string_split(p.steps, ',')::BIGINT[], f.step) AS long_step
    FROM xr_phases AS f
    JOIN periodic AS p USING (pid)
    WHERE ($step_from IS NULL OR f.step >= $step_from)
        AND ($step_to IS NULL OR f.step < $step_to)
    GROUP BY f.pid, f.step, f.phase, p.steps
),
phase_extra AS (
    SELECT
        l.pid,
        l.phase,
        avg(l.host_ns - coalesce(o.median_ns, 0)) AS extra_ns
    FROM phase_steps AS l
    LEFT JOIN (
        SELECT pid, phase, median(host_ns) AS median_ns
        FROM phase_steps
        WHERE NOT long_step
        GROUP BY pid, phase
    ) AS o USING (pid, phase)
    WHERE l.long_step
    GROUP BY l.pid, l.phase
),
holder AS (
    SELECT pid, phase, extra_ns
    FROM phase_extra
    QUALIFY row_number() OVER (PARTITION BY pid ORDER BY extra_ns DESC, phase) = 1
)
SELECT
    p.rank,
    p.pid,
    p.period,
    p.steps,
    p.stalls,
    round(p.median_ns)::BIGINT AS median_step_ns,
    round(p.noise_ns)::BIGINT AS noise_ns,
    round(p.extra_ns)::BIGINT AS extra_ns,
    CASE WHEN 2 * h.extra_ns >= p.extra_ns THEN h.phase END AS phase,
    CASE WHEN 2 * h.extra_ns >= p.extra_ns THEN round(h.extra_ns)::BIGINT END AS phase_extra_ns
FROM periodic AS p
LEFT JOIN holder AS h USING (pid)
ORDER BY p.rank, p.pid
