-- One row per (rank, device, host work) of the idle time in long gaps the host caused:
-- the gaps of cause host_bound at least long_gap_ns long (gaps.idle), each put on what
-- the host did while the GPU waited: of the NVTX ranges (nsys --trace=mpi traces MPI
-- calls as ranges of domain MPI) and CUDA API calls of the processes with work on the
-- device that cover at least half of the gap, the shortest (the innermost); the step
-- ranges and the capture range are not host work. A gap none of them covers by half is
-- put on the OS runtime call (nsys --trace=osrt) covering half of it on a thread of those
-- processes that calls CUDA (where a blocking call holds back the next launch; waits on
-- helper threads do not), the shortest; else on none. Shorter host-caused gaps are launch
-- overhead (what fusion and CUDA graphs remove); long ones are host work the GPU waits for.
-- @scope report
-- @include metrics
-- @reads idle_gap_rows, nvtx, api_calls, osrt_calls, kernels
-- @param long_gap_ns BIGINT = 100000   A host-caused gap at least this long is host work (ns).
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column source VARCHAR               nvtx (an NVTX range), mpi (an NVTX range of domain
--                                      MPI), cuda (a CUDA API call), osrt (an OS runtime
--                                      call on a CUDA thread) or none.
-- @column name VARCHAR                 The range's text or the call's API (NULL for none).
-- @column gaps BIGINT                  Long host-caused gaps put on it.
-- @column idle_ns BIGINT               Their summed duration (ns).
-- @column longest_ns BIGINT            The longest of them (ns).
-- @order rank, device, idle_ns DESC, source, name
WITH gaps AS (
    SELECT rank, device, start_ns, end_ns, dur_ns
    FROM idle_gap_rows
    WHERE cause = 'host_bound'
        AND dur_ns >= $long_gap_ns
),
drivers AS (
    SELECT DISTINCT rank, pid, device FROM kernels
),
steps AS (
    SELECT DISTINCT rank, pid, tid, start_ns, end_ns, text FROM step_ranges($step_pattern)
),
cuda_threads AS (
    SELECT DISTINCT rank, pid, tid FROM api_calls
),
work AS (
    -- only what is long enough to cover half of the shortest long gap; an OS runtime call
    -- (on a thread that launches) is the fallback, named where nothing else covers
    SELECT n.rank, n.pid, n.start_ns, n.end_ns, n.text AS name,
        CASE WHEN n.domain = 'MPI' THEN 'mpi' ELSE 'nvtx' END AS source, 0 AS fallback
    FROM nvtx AS n
    ANTI JOIN steps AS s  -- (by start: step_ranges may have cut a step's end)
        ON s.rank = n.rank
        AND s.pid = n.pid
        AND s.tid = n.tid
        AND s.start_ns = n.start_ns
        AND s.text = n.text
    WHERE n.event_type <> 'mark'
        AND 2 * n.dur_ns >= $long_gap_ns
        AND n.text IS NOT NULL
        AND n.text <> 'capture'
    UNION ALL
    SELECT rank, pid, start_ns, end_ns, regexp_replace(api, '_v[0-9]+$', ''), 'cuda', 0
    FROM api_calls
    WHERE 2 * dur_ns >= $long_gap_ns
    UNION ALL
    SELECT o.rank, o.pid, o.start_ns, o.end_ns, o.api, 'osrt', 1
    FROM osrt_calls AS o
    SEMI JOIN cuda_threads AS t
        ON t.rank = o.rank
        AND t.pid = o.pid
        AND t.tid = o.tid
    WHERE 2 * o.dur_ns >= $long_gap_ns
),
covered AS (
    -- per gap, the shortest range or call covering half of it (OS runtime calls last)
    SELECT
        g.rank,
        g.device,
        g.start_ns,
        arg_min(w.source, (w.fallback, w.end_ns - w.start_ns, w.source, w.name)) AS source,
        arg_min(w.name, (w.fallback, w.end_ns - w.start_ns, w.source, w.name)) AS name
    FROM gaps AS g
    JOIN drivers AS d
        ON d.rank = g.rank
        AND d.device = g.device
    JOIN work AS w
        ON w.rank = d.rank
        AND w.pid = d.pid
        AND w.start_ns < g.end_ns
        AND w.end_ns > g.start_ns
    WHERE 2 * (least(w.end_ns, g.end_ns) - greatest(w.start_ns, g.start_ns)) >= g.dur_ns
    GROUP BY g.rank, g.device, g.start_ns
),
placed AS (
    SELECT g.rank, g.device, g.dur_ns, coalesce(c.source, 'none') AS source, c.name
    FROM gaps AS g
    LEFT JOIN covered AS c
        ON c.rank = g.rank
        AND c.device = g.device
        AND c.start_ns = g.start_ns
)
SELECT
    rank,
    device,
    source,
    name,
    count(*) AS gaps,
    sum(dur_ns)::BIGINT AS idle_ns,
    max(dur_ns) AS longest_ns
FROM placed
GROUP BY rank, device, source, name
ORDER BY rank, device, idle_ns DESC, source, name
