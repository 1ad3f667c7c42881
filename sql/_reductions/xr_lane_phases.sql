-- One row per stretch of a device's time in one report that belongs to one phase, from
-- the device's first GPU activity (not NCCL) to its last, without gaps, in two states:
-- gpu, the phase whose work the GPU was doing (each activity belongs to the phase that
-- launched it: the latest phase range, see xr_phases, started in its process by its
-- launch call and not yet ended; with several streams busy, to the activity started
-- last) or, idle with the next activity already launched (waiting for something else),
-- the phase of that activity; host, idle before the host launched the next activity (the
-- replay takes the host's phase open then: data loading that launches nothing).
-- Consecutive stretches of one phase range and state are one row (a phase's kernels
-- and the short waits between them are one stretch, not one row per kernel). The replay
-- (nsyswrap.crossrank.whatif) splits a rank's work between two of its events by these
-- stretches. Times are session ns.
-- @reads launches, xr_phases
-- @column pid BIGINT              Process whose activities these are.
-- @column device BIGINT           CUDA device id.
-- @column start_ns BIGINT         Stretch start (ns).
-- @column end_ns BIGINT           Stretch end (ns).
-- @column phase VARCHAR           Phase text; NULL outside every phase.
-- @column phase_start_ns BIGINT  Start of that phase's range (which of its ranges; ns).
-- @column state VARCHAR           gpu (busy, or idle with the next work launched) or host
--                                  (idle, the next work not yet launched).
-- @column busy_ns BIGINT          Time within the stretch with an activity running (ns): the
--                                  phase's own GPU work, without the waits between.
WITH phases AS (
    SELECT pid, start_ns, end_ns, phase
    FROM xr_phases
),
work AS (
    -- each activity (one row per distinct start and end) with the phase that launched it
    SELECT
        a.pid,
        a.device,
        a.start_ns,
        a.end_ns,
        a.launch_ns,
        CASE WHEN a.launch_ns < p.end_ns THEN p.phase END AS phase,
        CASE WHEN a.launch_ns < p.end_ns THEN p.start_ns END AS phase_start_ns
    FROM (
        SELECT pid, device, kernel_start_ns AS start_ns, kernel_end_ns AS end_ns,
               min(start_ns) AS launch_ns
        FROM launches
        WHERE kind <> 'nccl'
        GROUP BY pid, device, kernel_start_ns, kernel_end_ns
    ) AS a
    ASOF LEFT JOIN phases AS p
        ON p.pid = a.pid
        AND p.start_ns <= a.launch_ns
),
swept AS (
    SELECT
        *,
        max(end_ns) OVER w AS busy_until_ns,
        lead(start_ns) OVER w AS next_start_ns,
        lead(launch_ns) OVER w AS next_launch_ns,
        lead(phase) OVER w AS next_phase,
        lead(phase_start_ns) OVER w AS next_phase_start_ns
    FROM work
    WINDOW w AS (PARTITION BY pid, device ORDER BY start_ns, end_ns ROWS UNBOUNDED PRECEDING)
),
pieces AS (
    -- busy from the activity's start to the next start (or the running end); then idle
    -- until the next start: waiting for the host until it launched that activity, then
    -- queued (both gpu: the GPU has the phase's work)
    SELECT pid, device, start_ns, least(coalesce(next_start_ns, busy_until_ns), busy_until_ns) AS end_ns,
           phase, phase_start_ns, 'gpu' AS state, true AS busy
    FROM swept
    UNION ALL
    SELECT pid, device, busy_until_ns, least(greatest(next_launch_ns, busy_until_ns), next_start_ns),
           next_phase, next_phase_start_ns, 'host', false
    FROM swept
    WHERE next_start_ns > busy_until_ns
    UNION ALL
    SELECT pid, device, greatest(next_launch_ns, busy_until_ns), next_start_ns, next_phase,
           next_phase_start_ns, 'gpu', false
    FROM swept
    WHERE next_start_ns > greatest(next_launch_ns, busy_until_ns)
),
firsts AS (
    -- the pieces that start a stretch: a phase range or state other than the piece's
    -- before (the pieces of a device follow each other without a gap, so a stretch ends
    -- where the next begins, the last where the device's last piece ends), with the busy
    -- time of the device's pieces before it
    SELECT pid, device, start_ns, phase, phase_start_ns, state, busy_before_ns
    FROM (
        SELECT
            *,
            lag(phase_start_ns) OVER w AS before,
            lag(state) OVER w AS was,
            sum(CASE WHEN busy THEN end_ns - start_ns ELSE 0 END) OVER w
                - CASE WHEN busy THEN end_ns - start_ns ELSE 0 END AS busy_before_ns
        FROM pieces
        WHERE end_ns > start_ns
        WINDOW w AS (PARTITION BY pid, device ORDER BY start_ns ROWS UNBOUNDED PRECEDING)
    )
    WHERE NOT coalesce(phase_start_ns IS NOT DISTINCT FROM before AND state = was, false)
),
totals AS (
    SELECT pid, device, max(end_ns) AS end_ns,
           sum(CASE WHEN busy THEN end_ns - start_ns ELSE 0 END) AS busy_ns
    FROM pieces
    WHERE end_ns > start_ns
    GROUP BY pid, device
)
SELECT
    f.pid,
    f.device,
    f.start_ns,
    coalesce(lead(f.start_ns) OVER w, e.end_ns) AS end_ns,
    f.phase,
    f.phase_start_ns,
    f.state,
    (coalesce(lead(f.busy_before_ns) OVER w, e.busy_ns) - f.busy_before_ns)::BIGINT AS busy_ns
FROM firsts AS f
JOIN totals AS e USING (pid, device)
WINDOW w AS (PARTITION BY f.pid, f.device ORDER BY f.start_ns)
