-- Table macros shared by the metric modules (ledger, collectives, gaps, steps, nvtx).
-- Each is a sweep over sorted events
-- (running sums, ASOF joins); none joins two sets of intervals pairwise.
-- Window arguments everywhere: window_nvtx (LIKE pattern or NULL), step_pattern
-- (LIKE pattern of step ranges), step_from / step_to (half-open step numbers or NULL).
-- The sweeps they feed are per-report objects (sql/_reductions: device_sweep, ...).
-- @reads kernels, nvtx, syncs, api_calls, launches

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


-- Step ranges: NVTX ranges (not marks) LIKE step_pattern, with their step number: the
-- last integer of the text, else the range's order by start in its process (0, 1, ...:
-- a range named just `train_step` every iteration). With the default pattern `step:%`
-- a process without `step:` ranges takes PyTorch profiler's `ProfilerStep#<i>`. A range
-- holding the mark `<its text> unfinished` on its thread (nsyswrap's automatic steps: a
-- step opened after the last optimizer step) is no step. The one definition of a step,
-- for the single-rank metrics and the cross-rank objects alike.
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
)
SELECT
    * EXCLUDE (fallback),
    coalesce(
        TRY_CAST(nullif(regexp_extract(text, '(\d+)\D*$', 1), '') AS BIGINT),
        row_number() OVER (PARTITION BY rank, pid ORDER BY start_ns, end_ns, tid, text) - 1
    ) AS step
FROM chosen;

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


-- Every kernel (not copy) starting inside the window with its launch call, if traced:
-- the launches row of this very kernel (process, correlation id, device, stream and
-- start), since one call can launch many kernels (a CUDA graph's nodes all carry the
-- correlation id of its cudaGraphLaunch).
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
    AND l.device = k.device
    AND l.stream = k.stream
    AND l.kernel_start_ns = k.start_ns
WHERE k.kind NOT IN ('memcpy', 'memset');


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


-- GPU time of the work launched inside each NVTX range on the range's thread:
-- C(t) = running totals of the thread's launches before t, range total = C(end) - C(start).
-- The range edges ride in one sorted stream with the launches (thread by thread, edges
-- before launches at the same time), so C at every edge is a running sum read off the
-- stream, minus the sum at the thread's first row. Each edge starts a stretch of the
-- stream: the launches are summed per stretch (a hash aggregate) and only the stretches'
-- sums run (an edge's row count), not every launch row's. Two totals share one HUGEINT
-- sum (high and low 64 bits, each a signed sum below 2^63 in magnitude).
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
stretched AS (
    -- each range edge (and the thread's first row) starts a stretch of the thread's rows
    SELECT
        *,
        sum(CASE WHEN code <= 1 THEN 1 ELSE 0 END) OVER (
            PARTITION BY tno ORDER BY t, code ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS stretch
    FROM stream
),
stretches AS (
    -- per stretch: its edge (first, smallest t and code), what its launches add up to
    SELECT
        tno,
        stretch,
        min(t) AS t,
        min(code) AS code,
        sum(CASE WHEN code = 2 THEN 18446744073709551616::HUGEINT + gpu END) AS n_gpu,
        sum(CASE
            WHEN kind = 0 THEN gpu::HUGEINT * 18446744073709551616
            WHEN kind = 1 THEN gpu::HUGEINT
        END) AS compute_nccl,
        sum(gpu) FILTER (WHERE kind = 2) AS copy
    FROM stretched
    GROUP BY tno, stretch
),
marks AS (
    -- at each edge: what the thread's launches before it add up to (the stretches before)
    SELECT
        tno,
        t,
        code,
        coalesce(sum(n_gpu) OVER w, 0) AS n_gpu,
        coalesce(sum(compute_nccl) OVER w, 0) AS compute_nccl,
        coalesce(sum(copy) OVER w, 0) AS copy
    FROM stretches
    WINDOW w AS (PARTITION BY tno ORDER BY stretch ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
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
