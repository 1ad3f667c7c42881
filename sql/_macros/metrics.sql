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

-- The device timeline as consecutive segments [start_ns, end_ns) of constant state:
-- how many compute, comm and copy activities run (all streams of the device), how
-- many host syncs are in progress, and how many zero-length activities sit at its start.
-- Cut at every activity edge, sync edge, window edge and step edge; each segment says
-- whether it lies in the window and in which step.
CREATE OR REPLACE MACRO gpu_timeline(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
WITH work AS (
    SELECT rank, device, start_ns, end_ns, activity
    FROM gpu_work()
    WHERE end_ns > start_ns
),
instants AS (
    SELECT rank, device, start_ns
    FROM gpu_work()
    WHERE end_ns = start_ns
),
win AS (
    SELECT * FROM analysis_window(window_nvtx, step_pattern, step_from, step_to)
),
steps AS (
    SELECT * FROM device_steps(step_pattern)
),
sync AS (
    SELECT * FROM device_syncs() WHERE end_ns > start_ns
),
deltas AS (
    SELECT
        rank,
        device,
        unnest([start_ns, end_ns]) AS t,
        unnest([1, -1]) AS sign,
        activity
    FROM work
    UNION ALL
    SELECT rank, device, unnest([start_ns, end_ns]), unnest([1, -1]), 'sync'
    FROM sync
    UNION ALL
    SELECT rank, device, start_ns, 0, 'instant'
    FROM instants
    UNION ALL
    SELECT rank, device, unnest([window_start_ns, window_end_ns]), 0, 'cut'
    FROM win
    UNION ALL
    SELECT rank, device, unnest([start_ns, end_ns]), 0, 'cut'
    FROM steps
),
points AS (
    SELECT
        rank,
        device,
        t,
        sum(sign) FILTER (WHERE activity = 'compute') AS d_compute,
        sum(sign) FILTER (WHERE activity = 'comm') AS d_comm,
        sum(sign) FILTER (WHERE activity = 'copy') AS d_copy,
        sum(sign) FILTER (WHERE activity = 'sync') AS d_sync,
        count(*) FILTER (WHERE activity = 'instant') AS instants
    FROM deltas
    GROUP BY rank, device, t
),
levels AS (
    SELECT
        rank,
        device,
        t AS start_ns,
        lead(t) OVER (PARTITION BY rank, device ORDER BY t) AS end_ns,
        coalesce(sum(d_compute) OVER running, 0)::BIGINT AS n_compute,
        coalesce(sum(d_comm) OVER running, 0)::BIGINT AS n_comm,
        coalesce(sum(d_copy) OVER running, 0)::BIGINT AS n_copy,
        coalesce(sum(d_sync) OVER running, 0)::BIGINT AS n_sync,
        instants
    FROM points
    WINDOW running AS (PARTITION BY rank, device ORDER BY t ROWS UNBOUNDED PRECEDING)
)
SELECT
    l.rank,
    l.device,
    l.start_ns,
    l.end_ns,
    l.end_ns - l.start_ns AS dur_ns,
    l.n_compute,
    l.n_comm,
    l.n_copy,
    l.n_sync,
    l.instants,
    coalesce(l.start_ns >= w.window_start_ns AND l.end_ns <= w.window_end_ns, FALSE)
        AS in_window,
    CASE WHEN l.end_ns <= s.end_ns THEN s.step END AS step
FROM levels AS l
LEFT JOIN win AS w
    ON w.rank = l.rank
    AND w.device = l.device
ASOF LEFT JOIN steps AS s
    ON s.rank = l.rank
    AND s.device = l.device
    AND l.start_ns >= s.start_ns
WHERE l.end_ns IS NOT NULL;

-- Every NCCL kernel starting inside the window with the time compute ran beside it
-- on the same device: B(t) = compute-busy time before t, overlap = B(end) - B(start).
CREATE OR REPLACE MACRO collective_exposure(window_nvtx, step_pattern, step_from, step_to)
AS TABLE
WITH busy AS (
    SELECT
        rank,
        device,
        start_ns,
        n_compute > 0 AS computing,
        coalesce(sum(CASE WHEN n_compute > 0 THEN dur_ns ELSE 0 END) OVER (
            PARTITION BY rank, device
            ORDER BY start_ns
            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING
        ), 0) AS busy_before_ns
    FROM gpu_timeline(window_nvtx, step_pattern, step_from, step_to)
),
win AS (
    SELECT * FROM analysis_window(window_nvtx, step_pattern, step_from, step_to)
),
comm AS (
    SELECT k.*
    FROM gpu_work() AS k
    JOIN win AS w
        ON w.rank = k.rank
        AND w.device = k.device
    WHERE k.kind = 'nccl'
        AND k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns
),
at_start AS (
    SELECT
        c.*,
        coalesce(b.busy_before_ns
            + CASE WHEN b.computing THEN c.start_ns - b.start_ns ELSE 0 END, 0) AS busy_at_start
    FROM comm AS c
    ASOF LEFT JOIN busy AS b
        ON b.rank = c.rank
        AND b.device = c.device
        AND c.start_ns >= b.start_ns
),
at_end AS (
    SELECT
        c.*,
        coalesce(b.busy_before_ns
            + CASE WHEN b.computing THEN c.end_ns - b.start_ns ELSE 0 END, 0) AS busy_at_end
    FROM at_start AS c
    ASOF LEFT JOIN busy AS b
        ON b.rank = c.rank
        AND b.device = c.device
        AND c.end_ns >= b.start_ns
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
    (busy_at_end - busy_at_start)::BIGINT AS overlap_ns,
    (dur_ns - (busy_at_end - busy_at_start))::BIGINT AS exposed_ns,
    CASE
        WHEN dur_ns = busy_at_end - busy_at_start THEN 'hidden'
        WHEN busy_at_end = busy_at_start THEN 'exposed'
        ELSE 'partly_hidden'
    END AS exposure
FROM at_end;

-- Idle gaps per (rank, device) inside the window: maximal runs of segments where no
-- activity runs on any stream (a zero-length activity splits a gap), with the host
-- sync time inside and the launch call of the work that ends the gap. cause: other
-- (that work was launched before the GPU went idle), else sync (host syncs cover at
-- least half the gap), host_bound (launched after the GPU went idle) or unknown (no
-- launch record).
CREATE OR REPLACE MACRO idle_gaps(window_nvtx, step_pattern, step_from, step_to) AS TABLE
WITH seg AS (
    SELECT
        *,
        n_compute + n_comm + n_copy = 0 AS idle,
        sum((n_compute + n_comm + n_copy > 0 OR instants > 0)::INTEGER) OVER (
            PARTITION BY rank, device
            ORDER BY start_ns
            ROWS UNBOUNDED PRECEDING
        ) AS island
    FROM gpu_timeline(window_nvtx, step_pattern, step_from, step_to)
    WHERE in_window
),
gaps AS (
    SELECT
        rank,
        device,
        min(start_ns) AS start_ns,
        max(end_ns) AS end_ns,
        arg_min(step, start_ns) AS step,
        sum(CASE WHEN n_sync > 0 THEN dur_ns ELSE 0 END)::BIGINT AS sync_ns
    FROM seg
    WHERE idle
    GROUP BY rank, device, island
),
next_work AS (
    SELECT
        k.rank,
        k.device,
        k.start_ns,
        min(l.start_ns) AS launch_ns,
        coalesce(arg_min(k.name, l.start_ns), min(k.name)) AS name
    FROM gpu_work() AS k
    LEFT JOIN launches AS l
        ON l.rank = k.rank
        AND l.pid = k.pid
        AND l.correlation_id = k.correlation_id
    GROUP BY k.rank, k.device, k.start_ns
)
SELECT
    g.rank,
    g.device,
    g.step,
    g.start_ns,
    g.end_ns,
    g.end_ns - g.start_ns AS dur_ns,
    g.sync_ns,
    n.name AS next_name,
    n.launch_ns AS next_launch_ns,
    CASE
        WHEN n.launch_ns < g.start_ns THEN 'other'
        WHEN 2 * g.sync_ns >= g.end_ns - g.start_ns THEN 'sync'
        WHEN n.launch_ns IS NOT NULL THEN 'host_bound'
        ELSE 'unknown'
    END AS cause
FROM gaps AS g
LEFT JOIN next_work AS n
    ON n.rank = g.rank
    AND n.device = g.device
    AND n.start_ns = g.end_ns;

-- GPU time of the work launched inside each NVTX range on the range's thread:
-- C(t) = running totals of launches before t per thread, range total = C(end) - C(start).
CREATE OR REPLACE MACRO nvtx_gpu_projection(text_like) AS TABLE
WITH per_time AS (
    SELECT
        rank,
        pid,
        tid,
        start_ns AS t,
        count(*) AS n,
        sum(kernel_end_ns - kernel_start_ns) AS gpu_ns,
        sum(kernel_end_ns - kernel_start_ns) FILTER (WHERE kind IN ('compute', 'other'))
            AS compute_ns,
        sum(kernel_end_ns - kernel_start_ns) FILTER (WHERE kind = 'nccl') AS nccl_ns,
        sum(kernel_end_ns - kernel_start_ns) FILTER (WHERE kind IN ('memcpy', 'memset'))
            AS copy_ns
    FROM launches
    GROUP BY rank, pid, tid, start_ns
),
running AS (
    SELECT
        rank,
        pid,
        tid,
        t,
        sum(n) OVER w AS n,
        sum(gpu_ns) OVER w AS gpu_ns,
        coalesce(sum(compute_ns) OVER w, 0) AS compute_ns,
        coalesce(sum(nccl_ns) OVER w, 0) AS nccl_ns,
        coalesce(sum(copy_ns) OVER w, 0) AS copy_ns
    FROM per_time
    WINDOW w AS (PARTITION BY rank, pid, tid ORDER BY t ROWS UNBOUNDED PRECEDING)
),
ranges AS (
    SELECT rank, pid, tid, start_ns, end_ns, dur_ns, text
    FROM nvtx
    WHERE event_type <> 'mark'
        AND text LIKE text_like
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
ASOF LEFT JOIN running AS s
    ON s.rank = r.rank
    AND s.pid = r.pid
    AND s.tid = r.tid
    AND r.start_ns > s.t
ASOF LEFT JOIN running AS e
    ON e.rank = r.rank
    AND e.pid = r.pid
    AND e.tid = r.tid
    AND r.end_ns > e.t;
