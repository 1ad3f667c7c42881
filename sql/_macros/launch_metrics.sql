-- Table macros over the launch calls (the `launches` view, built where first needed: see
-- nsyswrap.engine.lazy_views): each kernel of a window with its launch latency, and the GPU
-- time of the work launched inside each NVTX range. Loaded after `metrics`, whose
-- window_kernels the first reads.
-- @include metrics
-- @reads launches, nvtx

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
    -- code 0: the thread's first row; 1: a range edge; 2: a launch (kind: 0 compute,
    -- 1 nccl, 2 memcpy or memset, 3 else)
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
            WHEN l.kind = 'compute' THEN 0
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
