-- One row per NCCL kernel of the report (whatever the window) and launches row of its
-- own: its NVTX context, the step whose region holds its launch call (step_regions: the
-- one rule that places an instant in a step, as steps.ledger counts time) and the
-- innermost range matching context_regex on the launching thread, and whether compute
-- kernels run on its stream. Computed once per report, step pattern and context_regex;
-- collectives.exposure picks the kernels of its window. A kernel is named by (pid,
-- device, stream, correlation_id, start_ns): kernels alike share their rows.
-- @include metrics
-- @reads kernels, launches, nvtx, device_step_regions
-- @param context_regex VARCHAR = ^(fwd|bwd|coll):  Regex of the NVTX ranges that name
--                                             the context (module or collective); NULL:
--                                             that default where the report has such
--                                             ranges, else any range.
-- @column pid                BIGINT   Process that launched the kernel.
-- @column device             BIGINT   CUDA device id.
-- @column stream             BIGINT   CUDA stream id.
-- @column correlation_id     BIGINT   CUPTI correlation id.
-- @column start_ns           BIGINT   Kernel start, ns on the report's session clock.
-- @column tid                BIGINT   Thread of the launch call (NULL without launch record).
-- @column launch_ns          BIGINT   Launch call start (ns).
-- @column step               BIGINT   Step whose region holds the launch call (step_regions).
-- @column context            VARCHAR  Innermost context range containing the launch call.
-- @column compute_stream     BOOLEAN  Compute kernels also run on this kernel's stream.
WITH nccl AS (
    SELECT DISTINCT rank, pid, device, stream, correlation_id, start_ns
    FROM kernels
    WHERE kind = 'nccl'
),
launched AS (
    -- the launches row of this very kernel: one call can launch many (a CUDA graph)
    SELECT e.*, l.tid, l.start_ns AS launch_ns
    FROM nccl AS e
    LEFT JOIN launches AS l
        ON l.rank = e.rank
        AND l.pid = e.pid
        AND l.correlation_id = e.correlation_id
        AND l.device = e.device
        AND l.stream = e.stream
        AND l.kernel_start_ns = e.start_ns
),
nsyswrap_ranges AS (
    -- per rank: whether the report has nsyswrap's module or collective ranges
    SELECT rank, bool_or(regexp_matches(text, '^(fwd|bwd|coll):')) AS present
    FROM nvtx
    WHERE event_type <> 'mark'
    GROUP BY rank
),
ranges AS MATERIALIZED (
    SELECT
        row_number() OVER (ORDER BY n.rank, pid, tid, start_ns, end_ns DESC, text) AS range_id,
        n.rank,
        n.pid,
        n.tid,
        n.start_ns,
        n.end_ns,
        n.text
    FROM nvtx AS n
    JOIN nsyswrap_ranges AS o
        ON o.rank = n.rank
    WHERE n.event_type <> 'mark'
        AND n.end_ns > n.start_ns
        AND CASE
            WHEN $context_regex IS NOT NULL THEN regexp_matches(n.text, $context_regex)
            WHEN o.present THEN regexp_matches(n.text, '^(fwd|bwd|coll):')
            ELSE regexp_matches(n.text, '.')
        END
),
edges AS (
    -- per thread in time order, ends before starts at equal times (outer first, equal
    -- ranges by text), then the launch calls: the running sum of +1 (start) and -1 (end)
    -- is the nesting depth.
    SELECT
        *,
        sum(delta) OVER (
            PARTITION BY rank, pid, tid
            ORDER BY t, ord, end_ns DESC, range_id
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS depth
    FROM (
        SELECT rank, pid, tid, start_ns AS t, 1 AS ord, 1 AS delta, end_ns, range_id
        FROM ranges
        UNION ALL
        SELECT rank, pid, tid, end_ns, -1, -1, end_ns, range_id
        FROM ranges
        UNION ALL
        SELECT DISTINCT rank, pid, tid, launch_ns, 2, 0, NULL, NULL
        FROM launched
        WHERE launch_ns IS NOT NULL
    )
),
depths AS (
    SELECT rank, pid, tid, t, ord, end_ns, range_id, depth
    FROM edges
    WHERE ord <> -1
),
starts AS (
    -- a range and its nesting depth
    SELECT rank, pid, tid, t AS start_ns, end_ns, range_id, depth
    FROM depths
    WHERE ord = 1
),
at_launch AS (
    -- ranges open on the thread just after the launch call started (start <= t < end)
    SELECT rank, pid, tid, t AS launch_ns, depth
    FROM depths
    WHERE ord = 2
),
compute_streams AS (
    SELECT DISTINCT rank, pid, device, stream
    FROM gpu_work()
    WHERE activity = 'compute'
),
innermost AS (
    -- the innermost open range is the last one started at the current depth
    SELECT
        a.rank,
        a.pid,
        a.tid,
        a.launch_ns,
        CASE WHEN r.end_ns > a.launch_ns THEN r.range_id END AS range_id
    FROM at_launch AS a
    ASOF LEFT JOIN starts AS r
        ON r.rank = a.rank
        AND r.pid = a.pid
        AND r.tid = a.tid
        AND r.depth = a.depth
        AND a.launch_ns >= r.start_ns
)

SELECT
    c.rank,
    c.pid,
    c.device,
    c.stream,
    c.correlation_id,
    c.start_ns,
    c.tid,
    c.launch_ns,
    CASE WHEN c.launch_ns < s.region_end_ns THEN s.step END AS step,
    x.text AS context,
    cs.stream IS NOT NULL AS compute_stream
FROM launched AS c
LEFT JOIN innermost AS i
    ON i.rank = c.rank
    AND i.pid = c.pid
    AND i.tid = c.tid
    AND i.launch_ns = c.launch_ns
LEFT JOIN ranges AS x
    ON x.range_id = i.range_id
LEFT JOIN compute_streams AS cs
    ON cs.rank = c.rank
    AND cs.pid = c.pid
    AND cs.device = c.device
    AND cs.stream = c.stream
ASOF LEFT JOIN (
    -- the regions that hold time: at most one starts at any time, so the latest one
    -- starting at or before the launch call is settled (of steps starting together,
    -- step_regions gives the time to one)
    SELECT rank, device, step, start_ns, region_end_ns
    FROM device_step_regions
    WHERE region_end_ns > start_ns
) AS s
    ON s.rank = c.rank
    AND s.device = c.device
    AND c.launch_ns >= s.start_ns
