-- One row per (rank, device) with GPU memory events (nsys --cuda-memory-usage=true): the
-- most device memory allocated at once in the analysed window, against the device's
-- memory, and the allocation churn per step. Device memory is the kinds Device, Device
-- Static and Array (not managed or host memory), summed over the device's processes and
-- counted from the start of the capture: a block freed but allocated before the capture
-- began is left out (freed_unseen_bytes says how much). With PyTorch's caching allocator
-- this is its reserved memory (segments), not the tensors in them; in a steady training
-- loop it allocates nothing per step, so churn there means cudaMalloc / cudaFree calls
-- (slow, and a free synchronizes the device) inside the loop. Churn is that of the median
-- step: allocations in each step's region (the steps of the window, window_steps), so
-- warm-up steps do not set it; NULL without steps.
-- @scope report
-- @reads gpu_memory, device_windows, window_steps, devices
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column peak_bytes BIGINT            Most device memory allocated at once in the window
--                                      (bytes; counted from the capture's start).
-- @column peak_ns BIGINT               When it was first reached (session clock ns).
-- @column total_memory_bytes BIGINT    The device's memory (devices view; NULL if absent).
-- @column peak_share DOUBLE            peak_bytes / total_memory_bytes.
-- @column allocations BIGINT           Allocations in the window.
-- @column allocated_bytes BIGINT       Their bytes.
-- @column frees BIGINT                 Releases in the window.
-- @column freed_unseen_bytes BIGINT    Bytes released whose allocation the capture did not
--                                      record (allocated before it began), whole capture.
-- @column steps BIGINT                 Steps in the window.
-- @column allocations_per_step DOUBLE  Allocations in the median step.
-- @column allocated_bytes_per_step DOUBLE  Bytes allocated in the median step.
-- @column frees_per_step DOUBLE        Releases in the median step.
-- @order rank, device
WITH events AS (
    SELECT
        rank,
        pid,
        device,
        start_ns,
        operation,
        bytes,
        CASE
            WHEN operation = 'alloc' THEN bytes
            -- a release counts when the capture saw its block allocated
            WHEN lag(operation) OVER (
                PARTITION BY rank, pid, device, address ORDER BY start_ns, operation
            ) = 'alloc' THEN -bytes
            ELSE 0
        END AS delta
    FROM gpu_memory
    WHERE mem_kind IN ('Device', 'Device Static', 'Array')
),
live AS (
    SELECT
        *,
        sum(delta) OVER (
            PARTITION BY rank, device ORDER BY start_ns, delta, pid
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS live_bytes
    FROM events
),
windowed AS (
    SELECT
        l.*,
        w.window_start_ns IS NULL
            OR l.start_ns BETWEEN w.window_start_ns AND w.window_end_ns AS inside,
        l.start_ns < w.window_start_ns AS before
    FROM live AS l
    LEFT JOIN device_windows AS w
        ON w.rank = l.rank
        AND w.device = l.device
),
per_device AS (
    SELECT
        rank,
        device,
        greatest(
            coalesce(max(live_bytes) FILTER (WHERE inside), 0),
            coalesce(arg_max(live_bytes, (start_ns, delta, pid)) FILTER (WHERE before), 0)
        )::BIGINT AS peak_bytes,
        count(*) FILTER (WHERE inside AND operation = 'alloc') AS allocations,
        coalesce(sum(bytes) FILTER (WHERE inside AND operation = 'alloc'), 0)::BIGINT
            AS allocated_bytes,
        count(*) FILTER (WHERE inside AND operation = 'free') AS frees,
        coalesce(sum(bytes) FILTER (WHERE operation = 'free' AND delta = 0), 0)::BIGINT
            AS freed_unseen_bytes
    FROM windowed
    GROUP BY rank, device
),
reached AS (
    -- when the peak was first reached: the first event in the window at that level, else
    -- the window's start (the level held from before it)
    SELECT
        x.rank,
        x.device,
        coalesce(
            min(x.start_ns) FILTER (WHERE x.inside AND x.live_bytes = p.peak_bytes),
            any_value(w.window_start_ns)
        ) AS peak_ns
    FROM windowed AS x
    JOIN per_device AS p
        ON p.rank = x.rank
        AND p.device = x.device
    LEFT JOIN device_windows AS w
        ON w.rank = x.rank
        AND w.device = x.device
    GROUP BY x.rank, x.device
),
steps AS (
    SELECT rank, device, step, start_ns, region_end_ns FROM window_steps
),
in_steps AS (
    SELECT
        e.rank,
        e.device,
        s.step,
        count(*) FILTER (WHERE e.operation = 'alloc') AS allocations,
        coalesce(sum(e.bytes) FILTER (WHERE e.operation = 'alloc'), 0) AS allocated_bytes,
        count(*) FILTER (WHERE e.operation = 'free') AS frees
    FROM events AS e
    ASOF JOIN steps AS s
        ON s.rank = e.rank
        AND s.device = e.device
        AND e.start_ns >= s.start_ns
    WHERE e.start_ns < s.region_end_ns
    GROUP BY e.rank, e.device, s.step
),
churn AS (
    -- per device, the median step (steps without events count 0)
    SELECT
        s.rank,
        s.device,
        count(*) AS steps,
        median(coalesce(i.allocations, 0)) AS allocations,
        median(coalesce(i.allocated_bytes, 0)) AS allocated_bytes,
        median(coalesce(i.frees, 0)) AS frees
    FROM steps AS s
    LEFT JOIN in_steps AS i
        ON i.rank = s.rank
        AND i.device = s.device
        AND i.step = s.step
    GROUP BY s.rank, s.device
)
SELECT
    p.rank,
    p.device,
    p.peak_bytes,
    r.peak_ns,
    d.total_memory_bytes,
    p.peak_bytes / nullif(d.total_memory_bytes, 0) AS peak_share,
    p.allocations,
    p.allocated_bytes,
    p.frees,
    p.freed_unseen_bytes,
    coalesce(c.steps, 0) AS steps,
    c.allocations::DOUBLE AS allocations_per_step,
    c.allocated_bytes::DOUBLE AS allocated_bytes_per_step,
    c.frees::DOUBLE AS frees_per_step
FROM per_device AS p
LEFT JOIN reached AS r
    ON r.rank = p.rank
    AND r.device = p.device
LEFT JOIN devices AS d
    ON d.rank = p.rank
    AND d.device = p.device
LEFT JOIN churn AS c
    ON c.rank = p.rank
    AND c.device = p.device
ORDER BY p.rank, p.device
