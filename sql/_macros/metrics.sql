-- Table macros shared by the metric modules (ledger, collectives, gaps, steps, nvtx).
-- Each is a sweep over sorted events
-- (running sums, ASOF joins); none joins two sets of intervals pairwise.
-- Window arguments everywhere: window_nvtx (LIKE pattern or NULL), step_pattern
-- (LIKE pattern of step ranges), step_from / step_to (half-open step numbers or NULL).
-- The sweeps they feed are per-report objects (sql/_reductions: device_sweep, ...).
-- @reads kernels, nvtx, syncs, api_calls

-- Every GPU activity as compute, comm (NCCL kernel or peer-to-peer copy) or copy
-- (any other memcpy or memset); a kernel without a name has the kind the kernels view
-- found for it.
CREATE OR REPLACE MACRO gpu_work() AS TABLE
SELECT
    rank,
    pid,
    device,
    context,
    stream,
    start_ns,
    end_ns,
    dur_ns,
    correlation_id,
    name,
    kind,
    CASE
        WHEN is_comm THEN 'comm'
        WHEN kind IN ('memcpy', 'memset') THEN 'copy'
        ELSE 'compute'
    END AS activity
FROM kernels;


-- Step ranges: NVTX ranges (not marks) LIKE step_pattern, with their step number: the
-- last integer of the text, else the range's order by start in its process (0, 1, ...:
-- a range named just `train_step` every iteration). With the default pattern `step:%`
-- a process without `step:` ranges takes PyTorch profiler's `ProfilerStep#<i>`. A range
-- holding the mark `<its text> unfinished` on its thread (nsyswrap's automatic steps: a
-- step opened after the last optimizer step) is no step. The one definition of a step,
-- for the single-rank metrics and the cross-rank objects alike. Two repairs, each
-- flagged (and counted by steps.repairs for the data-quality note):
-- * a number used again: a range whose number's earlier ranges on its thread have all
--   ended (an epoch restarting at step:0, or every iteration naming its range step:0)
--   is a later occurrence of that number; each later occurrence in its process is
--   numbered on after the process's highest number, in the order they start (epochs
--   0..9 then 0..9: steps 0..19), so two steps never merge into one (`renumbered`);
--   ranges of one number on several threads, or one inside another, stay one step;
-- * overlapping steps: a step (its ranges merged) that the next step of its process
--   (by start) starts inside and outlasts ends where that step begins; a range reaching
--   past that is cut there (`cut`), never counted in two steps (a range that starts
--   after it keeps no time). A step inside another, or starting with it, is not cut: the
--   time of nested steps goes by the regions of step_lookup (of steps starting together
--   the lowest number holds it).
-- Columns: rank, pid, tid, text, start_ns, end_ns, step, renumbered, cut.
CREATE OR REPLACE MACRO step_ranges(step_pattern) AS TABLE
WITH unfinished AS (
    SELECT rank, pid, tid, start_ns, text
    FROM nvtx
    WHERE event_type = 'mark'
        AND text LIKE '% unfinished'
),
matched AS (
    SELECT
        n.rank,
        n.pid,
        n.tid,
        n.text,
        n.start_ns,
        n.end_ns,
        NOT (n.text LIKE step_pattern) AS fallback
    FROM nvtx AS n
    ANTI JOIN unfinished AS u
        ON u.rank = n.rank
        AND u.pid = n.pid
        AND u.tid = n.tid
        AND u.text = n.text || ' unfinished'
        AND u.start_ns BETWEEN n.start_ns AND n.end_ns
    WHERE n.event_type <> 'mark'
        AND (n.text LIKE step_pattern
            OR (step_pattern = 'step:%' AND regexp_full_match(n.text, 'ProfilerStep#\d+')))
),
chosen AS (
    SELECT *
    FROM matched
    QUALIFY fallback = min(fallback) OVER (PARTITION BY rank, pid)
),
numbered AS (
    SELECT
        * EXCLUDE (fallback),
        coalesce(
            TRY_CAST(nullif(regexp_extract(text, '(\d+)\D*$', 1), '') AS BIGINT),
            row_number() OVER (PARTITION BY rank, pid ORDER BY start_ns, end_ns, tid, text) - 1
        ) AS number
    FROM chosen
),
occurrences AS (
    -- a range of a number whose earlier ranges on its thread have all ended is a new
    -- occurrence of that number: k counts them (0: the first)
    SELECT
        * EXCLUDE (new),
        sum(new) OVER (
            PARTITION BY rank, pid, tid, number ORDER BY start_ns, end_ns, text
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) - 1 AS k
    FROM (
        SELECT
            *,
            coalesce(start_ns >= max(end_ns) OVER (
                PARTITION BY rank, pid, tid, number ORDER BY start_ns, end_ns, text
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
            ), TRUE)::INTEGER AS new
        FROM numbered
    )
),
reused AS (
    -- each later occurrence (number, k) of a process, numbered on after its highest
    -- number in the order they start (the same occurrence on several threads: one step)
    SELECT
        o.rank,
        o.pid,
        o.number,
        o.k,
        m.highest + row_number() OVER (
            PARTITION BY o.rank, o.pid ORDER BY min(o.start_ns), o.number, o.k
        ) AS step
    FROM occurrences AS o
    JOIN (SELECT rank, pid, max(number) AS highest FROM numbered GROUP BY rank, pid) AS m
        ON m.rank = o.rank
        AND m.pid = o.pid
    WHERE o.k > 0
    GROUP BY o.rank, o.pid, o.number, o.k, m.highest
),
stepped AS (
    SELECT
        o.rank,
        o.pid,
        o.tid,
        o.text,
        o.start_ns,
        o.end_ns,
        coalesce(r.step, o.number) AS step,
        o.k > 0 AS renumbered
    FROM occurrences AS o
    LEFT JOIN reused AS r
        ON r.rank = o.rank
        AND r.pid = o.pid
        AND r.number = o.number
        AND r.k = o.k
),
spans AS (
    SELECT rank, pid, step, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM stepped
    GROUP BY rank, pid, step
),
following AS (
    -- the steps that start next in the process (several may start together: the longest)
    SELECT
        rank,
        pid,
        start_ns,
        lead(start_ns) OVER later AS next_start_ns,
        lead(end_ns) OVER later AS next_end_ns
    FROM (SELECT rank, pid, start_ns, max(end_ns) AS end_ns FROM spans GROUP BY ALL)
    WINDOW later AS (PARTITION BY rank, pid ORDER BY start_ns)
),
cuts AS (
    -- where a step crossing into the next one ends: the next starts inside it and ends
    -- after it (a step inside another, or starting with it, is not cut)
    SELECT
        s.rank,
        s.pid,
        s.step,
        CASE
            WHEN f.next_start_ns < s.end_ns AND f.next_end_ns > s.end_ns THEN f.next_start_ns
        END AS cut_ns
    FROM spans AS s
    JOIN following AS f
        ON f.rank = s.rank
        AND f.pid = s.pid
        AND f.start_ns = s.start_ns
)
SELECT
    s.rank,
    s.pid,
    s.tid,
    s.text,
    s.start_ns,
    CASE WHEN s.end_ns > c.cut_ns THEN greatest(s.start_ns, c.cut_ns) ELSE s.end_ns END AS end_ns,
    s.step,
    s.renumbered,
    coalesce(s.end_ns > c.cut_ns, FALSE) AS cut
FROM stepped AS s
JOIN cuts AS c
    ON c.rank = s.rank
    AND c.pid = s.pid
    AND c.step = s.step;

-- A rank's session time t (ns) on the run clock, by its clock (xr_clock: shift_ns,
-- drift_ppb per session ns, and a jump: readings from jump_at_ns on are jump_ns late),
-- the drift term rounded to the ns half to even: the rule of
-- nsyswrap.crossrank.solve.to_run_time, so every table places an instant alike.
CREATE OR REPLACE MACRO clock_ns(t, jump_at_ns, jump_ns) AS
    t - CASE WHEN t >= jump_at_ns THEN jump_ns ELSE 0 END;
CREATE OR REPLACE MACRO run_ns(t, shift_ns, drift_ppb, jump_at_ns, jump_ns) AS
    clock_ns(t, jump_at_ns, jump_ns) + shift_ns
    + round_even(clock_ns(t, jump_at_ns, jump_ns) * drift_ppb / 1e9, 0)::BIGINT;

-- Steps per (rank, device): the step ranges in the processes that ran work on the
-- device; ranges with the same number (several threads) merge.
CREATE OR REPLACE MACRO device_steps(step_pattern) AS TABLE
WITH drivers AS (
    SELECT DISTINCT rank, pid, device FROM kernels
)
SELECT
    d.rank,
    d.device,
    r.step,
    min(r.start_ns) AS start_ns,
    max(r.end_ns) AS end_ns
FROM step_ranges(step_pattern) AS r
JOIN drivers AS d
    ON d.rank = r.rank
    AND d.pid = r.pid
GROUP BY d.rank, d.device, r.step;

-- The analysed window per (rank, device): first GPU activity start to last end, or
-- the envelope of the device processes' NVTX ranges matching window_nvtx, and/or of
-- steps [step_from, step_to); both given: their intersection. No match: no row.
CREATE OR REPLACE MACRO analysis_window(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
WITH activity AS (
    SELECT rank, device, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM kernels
    GROUP BY rank, device
),
drivers AS (
    SELECT DISTINCT rank, pid, device FROM kernels
),
by_nvtx AS (
    SELECT d.rank, d.device, min(n.start_ns) AS start_ns, max(n.end_ns) AS end_ns
    FROM nvtx AS n
    JOIN drivers AS d
        ON d.rank = n.rank
        AND d.pid = n.pid
    WHERE n.text LIKE window_nvtx
        AND n.event_type <> 'mark'
    GROUP BY d.rank, d.device
),
by_steps AS (
    SELECT rank, device, min(start_ns) AS start_ns, max(end_ns) AS end_ns
    FROM device_steps(step_pattern)
    WHERE (step_from IS NOT NULL OR step_to IS NOT NULL)
        AND step >= coalesce(step_from, step)
        AND step < coalesce(step_to, step + 1)
    GROUP BY rank, device
),
chosen AS (
    SELECT
        a.rank,
        a.device,
        CASE
            WHEN window_nvtx IS NULL AND step_from IS NULL AND step_to IS NULL
                THEN 'activity'
            WHEN window_nvtx IS NULL THEN 'steps'
            WHEN step_from IS NULL AND step_to IS NULL THEN 'nvtx'
            ELSE 'nvtx+steps'
        END AS window_source,
        coalesce(greatest(n.start_ns, s.start_ns), a.start_ns) AS window_start_ns,
        coalesce(least(n.end_ns, s.end_ns), a.end_ns) AS window_end_ns,
        n.start_ns IS NOT NULL AS has_nvtx,
        s.start_ns IS NOT NULL AS has_steps
    FROM activity AS a
    LEFT JOIN by_nvtx AS n
        ON n.rank = a.rank
        AND n.device = a.device
    LEFT JOIN by_steps AS s
        ON s.rank = a.rank
        AND s.device = a.device
)
SELECT rank, device, window_source, window_start_ns, window_end_ns
FROM chosen
WHERE (window_nvtx IS NULL OR has_nvtx)
    AND ((step_from IS NULL AND step_to IS NULL) OR has_steps)
    AND window_start_ns <= window_end_ns;


-- Host-side synchronization per (rank, device): CUPTI sync records of the device's
-- processes and contexts, and *Synchronize API calls of its processes. A stream wait
-- (cudaStreamWaitEvent: one stream waits for an event on the GPU, the host goes on) is
-- not one: the host time around it is the host's own.
CREATE OR REPLACE MACRO device_syncs() AS TABLE
WITH contexts AS (
    SELECT DISTINCT rank, pid, context, device FROM kernels
),
drivers AS (
    SELECT DISTINCT rank, pid, device FROM kernels
)
SELECT c.rank, c.device, s.start_ns, s.end_ns
FROM syncs AS s
JOIN contexts AS c
    ON c.rank = s.rank
    AND c.pid = s.pid
    AND c.context = s.context
WHERE s.sync_type <> 'stream_wait'
UNION ALL
SELECT d.rank, d.device, a.start_ns, a.end_ns
FROM api_calls AS a
JOIN drivers AS d
    ON d.rank = a.rank
    AND d.pid = a.pid
WHERE a.api ILIKE '%synchronize%';


-- Step regions per (rank, device): each step of device_steps from its start to its end,
-- cut at the next step's start. A point t belongs to the step whose region holds it.
-- A step without an end (or with end <= start) holds no time: region_end_ns is NULL or
-- <= start_ns. Of steps starting together the lowest number holds the time.
CREATE OR REPLACE MACRO step_regions(step_pattern) AS TABLE
SELECT
    rank,
    device,
    step,
    start_ns,
    end_ns,
    CASE WHEN end_ns IS NOT NULL THEN least(end_ns, lead(start_ns) OVER (
        PARTITION BY rank, device ORDER BY start_ns, step DESC
    )) END AS region_end_ns
FROM device_steps(step_pattern)
WHERE start_ns IS NOT NULL;


-- Every GPU activity (any kind) of a device that starts inside its analysis window.
CREATE OR REPLACE MACRO window_kernels(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
SELECT k.*
FROM kernels AS k
JOIN analysis_window(window_nvtx, step_pattern, step_from, step_to) AS w
    ON w.rank = k.rank
    AND w.device = k.device
WHERE k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns;


-- hidden (all of an NCCL kernel overlapped compute), exposed (none of it) or partly_hidden.
CREATE OR REPLACE MACRO exposure_class(dur_ns, overlap_ns) AS CASE
    WHEN dur_ns = overlap_ns THEN 'hidden'
    WHEN overlap_ns = 0 THEN 'exposed'
    ELSE 'partly_hidden'
END;


-- Merged host-sync intervals per (rank, device) with the sync time before each:
-- covered(t) = before_ns + least(t, end_ns) - start_ns for the last island starting at or
-- before t (0 before the first).
CREATE OR REPLACE MACRO sync_islands() AS TABLE
WITH sweep AS (
    SELECT
        rank,
        device,
        start_ns,
        end_ns,
        max(end_ns) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev_end,
        max(end_ns) OVER (w ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
            AS last_end
    FROM device_syncs()
    WHERE end_ns > start_ns
    WINDOW w AS (PARTITION BY rank, device ORDER BY start_ns, end_ns)
)
SELECT
    rank,
    device,
    start_ns,
    coalesce(lead(prev_end) OVER w, last_end) AS end_ns,
    start_ns - first_value(start_ns) OVER w
        - sum(start_ns - coalesce(prev_end, start_ns)) OVER (w ROWS UNBOUNDED PRECEDING)
        AS before_ns
FROM sweep
WHERE prev_end IS NULL
    OR start_ns > prev_end
WINDOW w AS (PARTITION BY rank, device ORDER BY start_ns);
