-- One row per NCCL kernel starting in the window: how much of it ran while compute ran
-- on the same device (any stream), and its NVTX context: the step containing its launch
-- call and the innermost range matching context_regex on the launching thread.
-- exposure: hidden (no exposed time, also zero-length), exposed (no overlap) or
-- partly_hidden. Longest exposed first.
-- @param window_nvtx VARCHAR = NULL           Limit the window to NVTX ranges LIKE this.
-- @param step_pattern VARCHAR = step:%         LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL              Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL                Limit the window to steps < this number.
-- @param context_regex VARCHAR = ^(fwd|bwd|coll):  Regex of the NVTX ranges that name
--                                             the context (module or collective).
-- @column rank INTEGER              Rank of the report.
-- @column pid BIGINT                Process that launched the kernel.
-- @column device BIGINT             CUDA device id.
-- @column stream BIGINT             CUDA stream id.
-- @column correlation_id BIGINT     CUPTI correlation id.
-- @column name VARCHAR              Kernel name.
-- @column start_ns BIGINT           Kernel start, ns on the report's session clock.
-- @column end_ns BIGINT             Kernel end, ns.
-- @column dur_ns BIGINT             Kernel duration (ns).
-- @column overlap_ns BIGINT         Time compute ran on the device meanwhile (ns).
-- @column exposed_ns BIGINT         dur_ns - overlap_ns (ns).
-- @column exposure VARCHAR          hidden, partly_hidden or exposed.
-- @column tid BIGINT                Thread of the launch call (NULL without launch record).
-- @column launch_ns BIGINT          Launch call start (ns).
-- @column step BIGINT               Step whose range contains the launch call.
-- @column context VARCHAR           Innermost context range containing the launch call.
-- @column compute_stream BOOLEAN    Compute kernels also run on this kernel's stream.
WITH exposure AS (
    SELECT * FROM collective_exposure($window_nvtx, $step_pattern, $step_from, $step_to)
),
launched AS (
    SELECT e.*, l.tid, l.start_ns AS launch_ns
    FROM exposure AS e
    LEFT JOIN launches AS l
        ON l.rank = e.rank
        AND l.pid = e.pid
        AND l.correlation_id = e.correlation_id
),
ranges AS (
    SELECT rank, pid, tid, start_ns, end_ns, text
    FROM nvtx
    WHERE event_type <> 'mark'
        AND end_ns > start_ns
        AND regexp_matches(text, $context_regex)
),
edges AS (
    SELECT rank, pid, tid, start_ns AS t, 1 AS sign, start_ns, end_ns, text
    FROM ranges
    UNION ALL
    SELECT rank, pid, tid, end_ns, -1, start_ns, end_ns, text
    FROM ranges
),
starts AS (
    -- nesting depth of each range: ends before starts at equal times, outer first
    SELECT rank, pid, tid, start_ns, end_ns, text, depth
    FROM (
        SELECT
            *,
            sum(sign) OVER (
                PARTITION BY rank, pid, tid
                ORDER BY t, sign, end_ns DESC
                ROWS UNBOUNDED PRECEDING
            ) AS depth
        FROM edges
    )
    WHERE sign = 1
),
open_after AS (
    -- ranges open on a thread just after time t (start <= t < end)
    SELECT
        rank,
        pid,
        tid,
        t,
        sum(sum(sign)) OVER (
            PARTITION BY rank, pid, tid
            ORDER BY t
            ROWS UNBOUNDED PRECEDING
        ) AS depth
    FROM edges
    GROUP BY rank, pid, tid, t
),
at_launch AS (
    SELECT c.*, o.depth
    FROM launched AS c
    ASOF LEFT JOIN open_after AS o
        ON o.rank = c.rank
        AND o.pid = c.pid
        AND o.tid = c.tid
        AND c.launch_ns >= o.t
),
compute_streams AS (
    SELECT DISTINCT rank, pid, device, stream
    FROM gpu_work()
    WHERE activity = 'compute'
),
innermost AS (
    -- the innermost open range is the last one started at the current depth
    SELECT
        c.*,
        CASE WHEN r.end_ns > c.launch_ns THEN r.text END AS context
    FROM at_launch AS c
    ASOF LEFT JOIN starts AS r
        ON r.rank = c.rank
        AND r.pid = c.pid
        AND r.tid = c.tid
        AND r.depth = c.depth
        AND c.launch_ns >= r.start_ns
)
SELECT
    c.rank,
    c.pid,
    c.device,
    c.stream,
    c.correlation_id,
    c.name,
    c.start_ns,
    c.end_ns,
    c.dur_ns,
    c.overlap_ns,
    c.exposed_ns,
    c.exposure,
    c.tid,
    c.launch_ns,
    CASE WHEN c.launch_ns < s.end_ns THEN s.step END AS step,
    c.context,
    cs.stream IS NOT NULL AS compute_stream
FROM innermost AS c
LEFT JOIN compute_streams AS cs
    ON cs.rank = c.rank
    AND cs.pid = c.pid
    AND cs.device = c.device
    AND cs.stream = c.stream
ASOF LEFT JOIN device_steps($step_pattern) AS s
    ON s.rank = c.rank
    AND s.device = c.device
    AND c.launch_ns >= s.start_ns
ORDER BY c.exposed_ns DESC, c.rank, c.device, c.start_ns, c.correlation_id
