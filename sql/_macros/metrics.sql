-- Table macros shared by the metric modules (ledger, collectives, gaps, steps, nvtx).
-- `open_run` creates them after the views. Each is a sweep over sorted events
-- (running sums, ASOF joins); none joins two sets of intervals pairwise.
-- Window arguments everywhere: window_nvtx (LIKE pattern or NULL), step_pattern
-- (LIKE pattern of step ranges), step_from / step_to (half-open step numbers or NULL).

-- ASOF joins must stay sort-merge joins: with the default, DuckDB runs them as nested
-- loops when it guesses the left side is small, which costs left x right rows.
SET asof_loop_join_threshold = 0;

-- Every GPU activity as compute, comm (NCCL kernel or peer-to-peer copy) or copy
-- (any other memcpy or memset); unnamed kernels count as compute.
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

-- Steps per (rank, device): NVTX ranges matching step_pattern in the processes that
-- ran work on the device. The step number is the last integer of the text, else the
-- range's order; ranges with the same number (several threads) merge.
CREATE OR REPLACE MACRO device_steps(step_pattern) AS TABLE
WITH drivers AS (
    SELECT DISTINCT rank, pid, device FROM kernels
),
ranges AS (
    SELECT
        rank,
        pid,
        start_ns,
        end_ns,
        coalesce(
            TRY_CAST(nullif(regexp_extract(text, '(\d+)\D*$', 1), '') AS BIGINT),
            row_number() OVER (PARTITION BY rank, pid ORDER BY start_ns) - 1
        ) AS step
    FROM nvtx
    WHERE text LIKE step_pattern
        AND event_type <> 'mark'
)
SELECT
    d.rank,
    d.device,
    r.step,
    min(r.start_ns) AS start_ns,
    max(r.end_ns) AS end_ns
FROM ranges AS r
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
-- processes and contexts, and *Synchronize API calls of its processes.
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

-- The steps that overlap the window and lie in [step_from, step_to), with their regions.
CREATE OR REPLACE MACRO window_steps(window_nvtx, step_pattern, step_from, step_to) AS TABLE
SELECT r.*
FROM step_regions(step_pattern) AS r
JOIN analysis_window(window_nvtx, step_pattern, step_from, step_to) AS w
    ON w.rank = r.rank
    AND w.device = r.device
WHERE r.start_ns < w.window_end_ns
    AND r.end_ns > w.window_start_ns
    AND r.step >= coalesce(step_from, r.step)
    AND r.step < coalesce(step_to, r.step + 1);

-- The one sweep behind the ledger, the step ledger, collective exposure and idle gaps.
-- Every device with a window contributes its GPU activities (code 0 compute, 1 comm,
-- 2 copy, 3 zero-length, 6 ending before it starts or never: only its start counts), its
-- two window edges (code 4, zero-length) and probe times (code 5: step region edges, starts
-- and ends of NCCL kernels starting in the window; code 7: see origins). Everything is
-- clipped to [keep_from, keep_to], the span of edges and probes: nothing outside it
-- changes what is returned. One ORDER BY (device, s, e) and running aggregates over it
-- give each row:
--   prev_c / prev_m / prev_p: the furthest end of the compute (plus zero-length rows and
--     window edges) / comm / copy rows before it. A row adds
--     greatest(0, e - greatest(s, prev)) to the union of its set (union lengths by running
--     maximum); a compute or comm row adds greatest(0, e - greatest(s, prev_c, prev_m))
--     to |C u M|, any activity greatest(0, e - greatest(s, prev_c, prev_m, prev_p)) to
--     |all|.
--   the running sums of those additions. At a zero-length row at time t every row before
--     it starts at or before t, so set X covers covered_X(t) = running sum
--     - greatest(0, prev_X - t) of the time before t: X's time in [a, b) is
--     covered_X(b) - covered_X(a), for a and b probed or edges of one device.
-- Returned: the edge and probe rows (code 4, 5, 7) with covered_* at their time t, and
-- every activity row or edge that starts after everything before it ended: it ends the idle
-- gap [gap_start_ns, t] (ends_gap: one inside the window; tied: another row starts at t
-- too; name_hash: hash of its name).
-- All devices share the stream: each device's times are shifted onto its own stretch of
-- one axis, devices one after the other, so the ends of a device never reach the next
-- one's times; running sums are only subtracted within a device. The running aggregates
-- see the rows in sort order (DuckDB keeps a sorted subquery's order through windows
-- without ORDER BY, and runs them on one thread); the lag check fails the query if not.
CREATE OR REPLACE MACRO device_sweep(window_nvtx, step_pattern, step_from, step_to) AS TABLE
WITH windows AS (
    SELECT * FROM analysis_window(window_nvtx, step_pattern, step_from, step_to)
),
nccl AS (
    SELECT k.rank, k.device, k.start_ns, k.end_ns
    FROM kernels AS k
    JOIN windows AS w
        ON w.rank = k.rank
        AND w.device = k.device
    WHERE k.kind = 'nccl'
        AND k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns
),
probes AS (
    SELECT r.rank, r.device, unnest([r.start_ns, r.region_end_ns]) AS t
    FROM step_regions(step_pattern) AS r
    JOIN windows AS w
        ON w.rank = r.rank
        AND w.device = r.device
    WHERE r.start_ns < w.window_end_ns
        AND r.end_ns > w.window_start_ns
        AND r.step >= coalesce(step_from, r.step)
        AND r.step < coalesce(step_to, r.step + 1)
    UNION
    SELECT rank, device, unnest([start_ns, end_ns])
    FROM nccl
),
origins AS (
    -- a device with an NCCL kernel without end: its first activity start (probe code 7),
    -- from where collective_exposure counts compute time absolutely
    SELECT k.rank, k.device, min(k.start_ns) AS t
    FROM kernels AS k
    SEMI JOIN (SELECT rank, device FROM nccl WHERE end_ns IS NULL) AS n
        ON n.rank = k.rank
        AND n.device = k.device
    GROUP BY k.rank, k.device
),
extent AS (
    SELECT
        w.rank,
        w.device,
        w.window_start_ns,
        w.window_end_ns,
        -- what lies before every edge and probe, or after all of them, changes nothing
        -- returned: activities are clipped to [keep_from, keep_to]
        least(w.window_start_ns, min(p.t)) AS keep_from,
        greatest(w.window_end_ns, max(p.t)) AS keep_to
    FROM windows AS w
    LEFT JOIN (SELECT * FROM probes UNION ALL SELECT * FROM origins) AS p
        ON p.rank = w.rank
        AND p.device = w.device
    GROUP BY w.rank, w.device, w.window_start_ns, w.window_end_ns
),
devices AS (
    SELECT
        *,
        row_number() OVER (ORDER BY rank, device)::UINTEGER AS pno,
        -- the device's times [keep_from, keep_to] move to [offset, offset + keep_to - keep_from]
        coalesce(sum(keep_to - keep_from + 1) OVER (
            ORDER BY rank, device ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0)::BIGINT - keep_from AS shift
    FROM extent
),
stream AS (
    SELECT
        d.pno,
        greatest(k.start_ns, d.keep_from) + d.shift AS s,
        -- (a row ending before it starts, or never, only marks its start)
        least(CASE WHEN k.end_ns >= k.start_ns THEN k.end_ns ELSE k.start_ns END, d.keep_to)
            + d.shift AS e,
        CASE WHEN k.name IS NOT NULL THEN hash(k.name) END AS name_hash,
        CASE
            WHEN k.end_ns IS NULL OR k.end_ns < k.start_ns THEN 6
            WHEN k.end_ns = k.start_ns THEN 3
            WHEN k.is_comm THEN 1
            WHEN k.kind IN ('memcpy', 'memset') THEN 2
            ELSE 0
        END::UTINYINT AS code
    FROM kernels AS k
    JOIN devices AS d
        ON d.rank = k.rank
        AND d.device = k.device
    WHERE greatest(k.start_ns, k.end_ns) >= d.keep_from
        AND k.start_ns <= d.keep_to
    UNION ALL
    SELECT
        pno,
        unnest([window_start_ns, window_end_ns]) + shift,
        unnest([window_start_ns, window_end_ns]) + shift,
        NULL,
        4
    FROM devices
    UNION ALL
    SELECT d.pno, p.t + d.shift, p.t + d.shift, NULL, 5
    FROM probes AS p
    JOIN devices AS d
        ON d.rank = p.rank
        AND d.device = p.device
    WHERE p.t IS NOT NULL
    UNION ALL
    SELECT d.pno, o.t + d.shift, o.t + d.shift, NULL, 7
    FROM origins AS o
    JOIN devices AS d
        ON d.rank = o.rank
        AND d.device = o.device
),
maxima AS (
    SELECT
        *,
        max(e) FILTER (WHERE code IN (0, 3, 4)) OVER running AS max_c,
        max(e) FILTER (WHERE code = 1) OVER running AS max_m,
        max(e) FILTER (WHERE code = 2) OVER running AS max_p
    FROM (SELECT * FROM stream ORDER BY s, e)
    WINDOW running AS (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
previous AS (
    SELECT
        pno,
        s,
        e,
        code,
        name_hash,
        coalesce(lag(s) OVER () = s, FALSE) OR coalesce(lead(s) OVER () = s, FALSE) AS tied,
        CASE
            WHEN lag(s) OVER () > s OR (lag(s) OVER () = s AND lag(e) OVER () > e)
                THEN error('device_sweep: rows reached the running aggregates out of order')
            ELSE lag(max_c) OVER ()
        END AS prev_c,
        lag(max_m) OVER () AS prev_m,
        lag(max_p) OVER () AS prev_p
    FROM maxima
),
added AS (
    SELECT
        pno,
        s,
        code,
        name_hash,
        tied,
        prev_c,
        prev_m,
        prev_p,
        greatest(0, e - greatest(s, prev_c)) AS add_c,
        greatest(0, e - greatest(s, prev_m)) AS add_m,
        greatest(0, e - greatest(s, prev_p)) AS add_p,
        greatest(0, e - greatest(s, prev_c, prev_m)) AS add_cm,
        greatest(0, e - greatest(s, prev_c, prev_m, prev_p)) AS add_a
    FROM previous
),
sums AS (
    SELECT
        *,
        sum(add_c) FILTER (WHERE code = 0) OVER running AS sum_c,
        sum(add_m) FILTER (WHERE code = 1) OVER running AS sum_m,
        sum(add_p) FILTER (WHERE code = 2) OVER running AS sum_p,
        sum(add_cm) FILTER (WHERE code IN (0, 1)) OVER running AS sum_cm,
        sum(add_a) FILTER (WHERE code IN (0, 1, 2)) OVER running AS sum_a
    FROM added
    WINDOW running AS (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
picked AS (
    SELECT *, greatest(prev_c, prev_m, prev_p) AS prev_a
    FROM sums
    WHERE code >= 4
        OR s > greatest(prev_c, prev_m, prev_p)
)
SELECT
    d.rank,
    d.device,
    x.code,
    x.s - d.shift AS t,
    x.prev_a - d.shift AS gap_start_ns,
    coalesce(x.code <= 4 AND x.s > x.prev_a AND x.prev_a - d.shift >= d.window_start_ns
        AND x.s - d.shift <= d.window_end_ns, FALSE) AS ends_gap,
    x.tied,
    x.name_hash,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_c, 0) - greatest(0, x.prev_c - x.s) END::BIGINT
        AS covered_c,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_m, 0) - greatest(0, x.prev_m - x.s) END::BIGINT
        AS covered_m,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_p, 0) - greatest(0, x.prev_p - x.s) END::BIGINT
        AS covered_p,
    CASE WHEN x.code >= 4
        THEN coalesce(x.sum_cm, 0) - greatest(0, greatest(x.prev_c, x.prev_m) - x.s) END::BIGINT
        AS covered_cm,
    CASE WHEN x.code >= 4 THEN coalesce(x.sum_a, 0) - greatest(0, x.prev_a - x.s) END::BIGINT
        AS covered_a
FROM picked AS x
JOIN devices AS d
    ON d.pno = x.pno
WHERE x.code <> 6;


-- Union lengths per (rank, device) over the window: compute (c), comm (m), copy (p),
-- compute or comm (cm), any activity (a), read off device_sweep's window edges.
CREATE OR REPLACE MACRO window_unions(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
SELECT
    rank,
    device,
    (arg_max(covered_c, t) - arg_min(covered_c, t))::BIGINT AS c_ns,
    (arg_max(covered_m, t) - arg_min(covered_m, t))::BIGINT AS m_ns,
    (arg_max(covered_p, t) - arg_min(covered_p, t))::BIGINT AS p_ns,
    (arg_max(covered_cm, t) - arg_min(covered_cm, t))::BIGINT AS cm_ns,
    (arg_max(covered_a, t) - arg_min(covered_a, t))::BIGINT AS a_ns
FROM device_sweep(window_nvtx, step_pattern, step_from, step_to)
WHERE code = 4
GROUP BY rank, device;

-- Union lengths per (rank, device, step) over the region of each step that overlaps the
-- window and is in [step_from, step_to) (the whole region, not only its part in the
-- window): covered_X(region end) - covered_X(region start).
CREATE OR REPLACE MACRO step_unions(window_nvtx, step_pattern, step_from, step_to) AS TABLE
WITH probes AS (
    SELECT *
    FROM device_sweep(window_nvtx, step_pattern, step_from, step_to)
    WHERE code = 5
),
regions AS (
    SELECT
        *,
        coalesce(region_end_ns > start_ns, FALSE) AS holds_time
    FROM window_steps(window_nvtx, step_pattern, step_from, step_to)
)
SELECT
    r.rank,
    r.device,
    r.step,
    r.start_ns,
    r.end_ns,
    CASE WHEN r.holds_time THEN r.region_end_ns - r.start_ns ELSE 0 END AS region_ns,
    CASE WHEN r.holds_time THEN b.covered_c - a.covered_c ELSE 0 END::BIGINT AS c_ns,
    CASE WHEN r.holds_time THEN b.covered_m - a.covered_m ELSE 0 END::BIGINT AS m_ns,
    CASE WHEN r.holds_time THEN b.covered_p - a.covered_p ELSE 0 END::BIGINT AS p_ns,
    CASE WHEN r.holds_time THEN b.covered_cm - a.covered_cm ELSE 0 END::BIGINT AS cm_ns,
    CASE WHEN r.holds_time THEN b.covered_a - a.covered_a ELSE 0 END::BIGINT AS a_ns
FROM regions AS r
LEFT JOIN probes AS a
    ON a.rank = r.rank
    AND a.device = r.device
    AND a.t = r.start_ns
LEFT JOIN probes AS b
    ON b.rank = r.rank
    AND b.device = r.device
    AND b.t = r.region_end_ns;

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

-- Every kernel (not copy) starting inside the window with its launch call, if traced.
CREATE OR REPLACE MACRO window_launch_latency(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
SELECT
    k.rank,
    k.device,
    k.stream,
    k.pid,
    l.tid,
    k.correlation_id,
    k.kind,
    k.name,
    l.start_ns AS launch_ns,
    k.start_ns,
    k.dur_ns,
    k.start_ns - l.start_ns AS latency_ns
FROM window_kernels(window_nvtx, step_pattern, step_from, step_to) AS k
LEFT JOIN launches AS l
    ON l.rank = k.rank
    AND l.pid = k.pid
    AND l.correlation_id = k.correlation_id
WHERE k.kind NOT IN ('memcpy', 'memset');

-- Every NCCL kernel starting inside the window with the time compute ran beside it
-- on the same device: B(t) = compute-busy time before t, overlap = B(end) - B(start).
-- B is device_sweep's covered_c at its probes of the NCCL kernels' starts and ends
-- (code 5) and, for a kernel without end, at the device's first activity (code 7): B(end)
-- then counts as 0, so overlap = -B(start).
CREATE OR REPLACE MACRO collective_exposure(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
WITH sweep AS (
    SELECT rank, device, code, t, covered_c
    FROM device_sweep(window_nvtx, step_pattern, step_from, step_to)
    WHERE code IN (5, 7)
),
probes AS (
    SELECT * FROM sweep WHERE code = 5
),
comm AS (
    SELECT rank, pid, device, stream, correlation_id, name, start_ns, end_ns, dur_ns
    FROM window_kernels(window_nvtx, step_pattern, step_from, step_to)
    WHERE kind = 'nccl'
),
measured AS (
    -- (a kernel without end: B(end) counts as 0, so overlap = -B(start))
    SELECT
        c.*,
        CASE WHEN c.end_ns IS NULL THEN o.covered_c - a.covered_c
            ELSE b.covered_c - a.covered_c END AS overlap
    FROM comm AS c
    JOIN probes AS a
        ON a.rank = c.rank
        AND a.device = c.device
        AND a.t = c.start_ns
    LEFT JOIN probes AS b
        ON b.rank = c.rank
        AND b.device = c.device
        AND b.t = c.end_ns
    LEFT JOIN (SELECT * FROM sweep WHERE code = 7) AS o
        ON o.rank = c.rank
        AND o.device = c.device
)
SELECT
    rank,
    pid,
    device,
    stream,
    correlation_id,
    name,
    start_ns,
    end_ns,
    dur_ns,
    overlap::BIGINT AS overlap_ns,
    (dur_ns - overlap)::BIGINT AS exposed_ns,
    exposure_class(dur_ns, overlap) AS exposure
FROM measured;

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

-- Idle gaps per (rank, device) inside the window: maximal stretches where no activity
-- runs on any stream (a zero-length activity splits a gap), with the host sync time
-- inside and the launch call of the work that ends the gap. cause: other (that work was
-- launched before the GPU went idle), else sync (host syncs cover at least half the
-- gap), host_bound (launched after the GPU went idle) or unknown (no launch record).
-- step: the step region holding the gap start, else the first one starting inside the
-- gap.
CREATE OR REPLACE MACRO idle_gap_rows(window_nvtx, step_pattern, step_from, step_to) AS TABLE
WITH raw_gaps AS (
    SELECT
        rank,
        device,
        gap_start_ns AS start_ns,
        t AS end_ns,
        tied,
        code,
        name_hash
    FROM device_sweep(window_nvtx, step_pattern, step_from, step_to)
    WHERE ends_gap
),
regions AS (
    -- every step region with the next one that holds any time (of steps starting
    -- together, the one holding the time)
    SELECT
        rank,
        device,
        arg_min(step, step) AS step,
        start_ns,
        arg_min(end_ns, step) AS end_ns,
        arg_min(next_start_ns, step) AS next_start_ns,
        arg_min(next_step, step) AS next_step
    FROM (
        SELECT
            *,
            first_value(CASE WHEN region_end_ns > start_ns THEN start_ns END IGNORE NULLS)
                OVER w AS next_start_ns,
            first_value(CASE WHEN region_end_ns > start_ns THEN step END IGNORE NULLS)
                OVER w AS next_step
        FROM step_regions(step_pattern)
        WINDOW w AS (
            PARTITION BY rank, device
            ORDER BY start_ns, step DESC
            ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING
        )
    )
    GROUP BY rank, device, start_ns
),
islands AS (
    SELECT * FROM sync_islands()
),
marks AS (
    -- per device, the start times of regions and sync islands, each with the latest
    -- region and sync island started by then
    SELECT
        rank,
        device,
        t,
        last_value(region IGNORE NULLS) OVER w AS region,
        last_value(island IGNORE NULLS) OVER w AS island
    FROM (
        SELECT
            rank,
            device,
            t,
            arg_min(region, region.step) AS region,
            any_value(island) AS island
        FROM (
            SELECT
                rank,
                device,
                start_ns AS t,
                {'step': step, 'start_ns': start_ns, 'end_ns': end_ns} AS region,
                NULL::STRUCT(start_ns BIGINT, end_ns BIGINT, before_ns HUGEINT) AS island
            FROM regions
            UNION ALL
            SELECT
                rank,
                device,
                start_ns,
                NULL,
                {'start_ns': start_ns, 'end_ns': end_ns, 'before_ns': before_ns}
            FROM islands
        )
        GROUP BY rank, device, t
    )
    WINDOW w AS (PARTITION BY rank, device ORDER BY t ROWS UNBOUNDED PRECEDING)
),
looked AS (
    -- the latest region and sync island starting at or before the gap end
    SELECT
        g.*,
        m.region,
        m.island,
        coalesce(m.region.start_ns > g.start_ns OR m.island.start_ns > g.start_ns, FALSE)
            AS inside
    FROM raw_gaps AS g
    ASOF LEFT JOIN marks AS m
        ON m.rank = g.rank
        AND m.device = g.device
        AND g.end_ns >= m.t
),
gaps AS (
    -- neither starts inside the gap: they are also the latest at its start, and settle
    -- the step (the region holding the start) and the sync time
    SELECT
        rank,
        device,
        start_ns,
        end_ns,
        tied,
        code,
        name_hash,
        CASE WHEN start_ns < region.end_ns THEN region.step END AS step,
        CASE
            WHEN island IS NULL THEN 0
            -- (least() skips NULLs: only with an island)
            ELSE least(end_ns, island.end_ns) - least(start_ns, island.end_ns)
        END AS sync_ns
    FROM looked
    WHERE NOT inside
    UNION ALL
    -- a region or sync island starts inside: look both up at the gap start
    SELECT
        g.rank,
        g.device,
        g.start_ns,
        g.end_ns,
        g.tied,
        g.code,
        g.name_hash,
        CASE
            WHEN r.start_ns IS NULL AND f.first_start_ns < g.end_ns THEN f.first_step
            WHEN g.start_ns < r.end_ns THEN r.step
            WHEN r.next_start_ns < g.end_ns THEN r.next_step
        END,
        (coalesce(g.island.before_ns + least(g.end_ns, g.island.end_ns) - g.island.start_ns, 0)
            - coalesce(s.before_ns + least(g.start_ns, s.end_ns) - s.start_ns, 0))::BIGINT
    FROM (SELECT * FROM looked WHERE inside) AS g
    LEFT JOIN (
        SELECT
            rank,
            device,
            arg_min(start_ns, (start_ns, step)) AS first_start_ns,
            arg_min(step, (start_ns, step)) AS first_step
        FROM step_regions(step_pattern)
        WHERE region_end_ns > start_ns
        GROUP BY rank, device
    ) AS f
        ON f.rank = g.rank
        AND f.device = g.device
    ASOF LEFT JOIN regions AS r
        ON r.rank = g.rank
        AND r.device = g.device
        AND g.start_ns >= r.start_ns
    ASOF LEFT JOIN islands AS s
        ON s.rank = g.rank
        AND s.device = g.device
        AND g.start_ns >= s.start_ns
),
untied AS (
    -- no other row starts at the gap end: the kernel ending the gap (if any) is the only
    -- one starting there, and a launches row for that start is its own
    SELECT g.*, l.start_ns AS next_launch_ns
    FROM (SELECT * FROM gaps WHERE NOT tied) AS g
    LEFT JOIN launches AS l
        ON l.rank = g.rank
        AND l.device = g.device
        AND l.kernel_start_ns = g.end_ns
),
next_work AS (
    SELECT rank, device, start_ns, end_ns, step, sync_ns, name_hash, next_launch_ns
    FROM untied
    WHERE next_launch_ns IS NOT NULL
        OR code = 4
    UNION ALL
    -- no launches row of its own: the launch call of its correlation id, if any
    SELECT
        g.rank,
        g.device,
        g.start_ns,
        g.end_ns,
        g.step,
        g.sync_ns,
        g.name_hash,
        c.launch_ns
    FROM (SELECT * FROM untied WHERE next_launch_ns IS NULL AND code <> 4) AS g
    LEFT JOIN (
        SELECT k.rank, k.device, k.start_ns, min(l.start_ns) AS launch_ns
        FROM kernels AS k
        SEMI JOIN untied AS u
            ON u.rank = k.rank
            AND u.device = k.device
            AND u.end_ns = k.start_ns
            AND u.next_launch_ns IS NULL
        JOIN launches AS l
            ON l.rank = k.rank
            AND l.pid = k.pid
            AND l.correlation_id = k.correlation_id
        GROUP BY k.rank, k.device, k.start_ns
    ) AS c
        ON c.rank = g.rank
        AND c.device = g.device
        AND c.start_ns = g.end_ns
),
named AS (
    SELECT *, NULL AS next_name
    FROM next_work
    UNION ALL
    -- several rows start at the gap end: every kernel starting there, the name of the
    -- first launched (else the least name)
    SELECT
        g.rank,
        g.device,
        g.start_ns,
        g.end_ns,
        g.step,
        g.sync_ns,
        NULL,
        n.launch_ns,
        n.name
    FROM (SELECT * FROM gaps WHERE tied) AS g
    LEFT JOIN (
        SELECT
            k.rank,
            k.device,
            k.start_ns,
            min(l.start_ns) AS launch_ns,
            coalesce(arg_min(k.name, l.start_ns), min(k.name)) AS name
        FROM kernels AS k
        SEMI JOIN gaps AS t
            ON t.rank = k.rank
            AND t.device = k.device
            AND t.end_ns = k.start_ns
            AND t.tied
        LEFT JOIN launches AS l
            ON l.rank = k.rank
            AND l.pid = k.pid
            AND l.correlation_id = k.correlation_id
        GROUP BY k.rank, k.device, k.start_ns
    ) AS n
        ON n.rank = g.rank
        AND n.device = g.device
        AND n.start_ns = g.end_ns
)
SELECT
    rank,
    device,
    step,
    start_ns,
    end_ns,
    end_ns - start_ns AS dur_ns,
    sync_ns::BIGINT AS sync_ns,
    name_hash AS next_name_hash,
    next_name,
    next_launch_ns,
    CASE
        WHEN next_launch_ns < start_ns THEN 'other'
        WHEN 2 * sync_ns >= end_ns - start_ns THEN 'sync'
        WHEN next_launch_ns IS NOT NULL THEN 'host_bound'
        ELSE 'unknown'
    END AS cause
FROM named;

-- idle_gap_rows with the names of the work ending the gaps (the rows carry the name's hash
-- where one kernel ends the gap).
CREATE OR REPLACE MACRO idle_gaps(window_nvtx, step_pattern, step_from, step_to) AS TABLE
WITH names AS (
    -- kernel names by the hash the sweep carries (two names with one hash: fail)
    SELECT
        hash(name) AS name_hash,
        CASE WHEN min(name) = max(name) THEN min(name)
            ELSE error('idle_gaps: two kernel names share a hash') END AS name
    FROM (SELECT DISTINCT name FROM kernels WHERE name IS NOT NULL)
    GROUP BY hash(name)
)
SELECT
    g.rank,
    g.device,
    g.step,
    g.start_ns,
    g.end_ns,
    g.dur_ns,
    g.sync_ns,
    coalesce(g.next_name, n.name) AS next_name,
    g.next_launch_ns,
    g.cause
FROM idle_gap_rows(window_nvtx, step_pattern, step_from, step_to) AS g
LEFT JOIN names AS n
    ON n.name_hash = g.next_name_hash;

-- GPU time of the work launched inside each NVTX range on the range's thread:
-- C(t) = running totals of the thread's launches before t, range total = C(end) - C(start).
-- The range edges ride in one sorted stream with the launches (thread by thread, edges
-- before launches at the same time), so C at every edge is a running sum read off the
-- stream, minus the sum at the thread's first row. Two totals share one HUGEINT sum (high
-- and low 64 bits, each a signed sum below 2^63 in magnitude).
CREATE OR REPLACE MACRO nvtx_gpu_projection(text_like) AS TABLE
WITH ranges AS (
    SELECT rank, pid, tid, start_ns, end_ns, dur_ns, text
    FROM nvtx
    WHERE event_type <> 'mark'
        AND text LIKE text_like
),
threads AS (
    SELECT rank, pid, tid, row_number() OVER (ORDER BY rank, pid, tid)::UINTEGER AS tno
    FROM (SELECT DISTINCT rank, pid, tid FROM ranges)
),
stream AS (
    -- code 0: the thread's first row; 1: a range edge; 2: a launch (kind: 0 compute or
    -- other, 1 nccl, 2 memcpy or memset, 3 else)
    SELECT tno, -9223372036854775808 AS t, 0::UTINYINT AS code, 0 AS gpu, 3::UTINYINT AS kind
    FROM threads
    UNION ALL
    SELECT h.tno, e.t, 1, 0, 3
    FROM (SELECT DISTINCT rank, pid, tid, unnest([start_ns, end_ns]) AS t FROM ranges) AS e
    JOIN threads AS h
        ON h.rank = e.rank
        AND h.pid = e.pid
        AND h.tid = e.tid
    UNION ALL
    SELECT
        h.tno,
        l.start_ns,
        2,
        coalesce(l.kernel_end_ns - l.kernel_start_ns, 0),
        CASE
            WHEN l.kind IN ('compute', 'other') THEN 0
            WHEN l.kind = 'nccl' THEN 1
            WHEN l.kind IN ('memcpy', 'memset') THEN 2
            ELSE 3
        END
    FROM launches AS l
    JOIN threads AS h
        ON h.rank = l.rank
        AND h.pid = l.pid
        AND h.tid = l.tid
    WHERE l.start_ns IS NOT NULL
),
running AS (
    SELECT
        tno,
        t,
        code,
        sum(CASE WHEN code = 2 THEN 18446744073709551616::HUGEINT + gpu END) OVER w AS n_gpu,
        sum(CASE
            WHEN kind = 0 THEN gpu::HUGEINT * 18446744073709551616
            WHEN kind = 1 THEN gpu::HUGEINT
        END) OVER w AS compute_nccl,
        sum(gpu) FILTER (WHERE kind = 2) OVER w AS copy,
        lag(tno) OVER () AS lag_tno,
        lag(t) OVER () AS lag_t,
        lag(code) OVER () AS lag_code
    FROM (SELECT * FROM stream ORDER BY tno, t, code)
    WINDOW w AS (ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)
),
marks AS (
    SELECT
        tno,
        t,
        code,
        CASE
            WHEN lag_tno > tno OR (lag_tno = tno AND (lag_t > t OR (lag_t = t AND lag_code > code)))
                THEN error('nvtx_gpu_projection: rows reached the running sums out of order')
            ELSE coalesce(n_gpu, 0)
        END AS n_gpu,
        coalesce(compute_nccl, 0) AS compute_nccl,
        coalesce(copy, 0) AS copy
    FROM running
    WHERE code <= 1
        OR lag_tno > tno
        OR (lag_tno = tno AND (lag_t > t OR (lag_t = t AND lag_code > code)))
),
at_edges AS (
    -- C(t) of the thread, unpacked: high = floor((v + 2^63) / 2^64), low = v - high * 2^64
    SELECT
        h.rank,
        h.pid,
        h.tid,
        e.t,
        (e.n_gpu - b.n_gpu + 9223372036854775808) >> 64 AS n,
        e.n_gpu - b.n_gpu
            - ((e.n_gpu - b.n_gpu + 9223372036854775808) >> 64) * 18446744073709551616
            AS gpu_ns,
        (e.compute_nccl - b.compute_nccl + 9223372036854775808) >> 64 AS compute_ns,
        e.compute_nccl - b.compute_nccl
            - ((e.compute_nccl - b.compute_nccl + 9223372036854775808) >> 64)
                * 18446744073709551616
            AS nccl_ns,
        e.copy - b.copy AS copy_ns
    FROM marks AS e
    JOIN marks AS b
        ON b.tno = e.tno
        AND b.code = 0
    JOIN threads AS h
        ON h.tno = e.tno
    WHERE e.code = 1
)
SELECT
    r.rank,
    r.pid,
    r.tid,
    r.text,
    r.start_ns,
    r.end_ns,
    r.dur_ns,
    (coalesce(e.n, 0) - coalesce(s.n, 0))::BIGINT AS kernels,
    (coalesce(e.gpu_ns, 0) - coalesce(s.gpu_ns, 0))::BIGINT AS gpu_ns,
    (coalesce(e.compute_ns, 0) - coalesce(s.compute_ns, 0))::BIGINT AS compute_ns,
    (coalesce(e.nccl_ns, 0) - coalesce(s.nccl_ns, 0))::BIGINT AS nccl_ns,
    (coalesce(e.copy_ns, 0) - coalesce(s.copy_ns, 0))::BIGINT AS copy_ns
FROM ranges AS r
LEFT JOIN at_edges AS s
    ON s.rank = r.rank
    AND s.pid = r.pid
    AND s.tid = r.tid
    AND s.t = r.start_ns
LEFT JOIN at_edges AS e
    ON e.rank = r.rank
    AND e.pid = r.pid
    AND e.tid = r.tid
    AND e.t = r.end_ns;
