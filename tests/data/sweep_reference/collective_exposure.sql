-- Every NCCL kernel starting inside the window with the time compute ran beside it
-- on the same device: B(t) = compute-busy time before t, overlap = B(end) - B(start).
-- B is device_sweep's covered_c at its probes of the NCCL kernels' starts and ends
-- (code 5) and, for a kernel without end, at the device's first activity (code 7): B(end)
-- then counts as 0, so overlap = -B(start).
-- @include metrics
-- @reads device_sweep, device_windows, kernels
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @column pid                BIGINT   Process that launched the kernel.
-- @column device             BIGINT   CUDA device id.
-- @column stream             BIGINT   CUDA stream id.
-- @column correlation_id     BIGINT   CUPTI correlation id.
-- @column name               VARCHAR  Kernel name.
-- @column start_ns           BIGINT   Kernel start, ns on the report's session clock.
-- @column end_ns             BIGINT   Kernel end, ns.
-- @column dur_ns             BIGINT   Kernel duration (ns).
-- @column overlap_ns         BIGINT   Time compute ran on the device meanwhile (ns).
-- @column exposed_ns         BIGINT   dur_ns - overlap_ns (ns).
-- @column exposure           VARCHAR  hidden, partly_hidden or exposed.
WITH sweep AS (
    SELECT rank, device, code, t, covered_c
    FROM device_sweep
    WHERE code IN (5, 7)
),
probes AS (
    SELECT * FROM sweep WHERE code = 5
),
comm AS (
    SELECT
        k.rank, k.pid, k.device, k.stream, k.correlation_id, k.name, k.start_ns, k.end_ns,
        k.dur_ns
    FROM kernels AS k
    JOIN device_windows AS w
        ON w.rank = k.rank
        AND w.device = k.device
    WHERE k.kind = 'nccl'
        AND k.start_ns BETWEEN w.window_start_ns AND w.window_end_ns
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
FROM measured
