-- Every NCCL kernel starting inside the window with the time compute ran beside it
-- on the same device (nccl_overlap: looked up in the device timeline once per report).
-- @include metrics
-- @reads nccl_overlap, device_windows
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
SELECT
    o.rank,
    o.pid,
    o.device,
    o.stream,
    o.correlation_id,
    o.name,
    o.start_ns,
    o.end_ns,
    o.dur_ns,
    o.overlap_ns,
    (o.dur_ns - o.overlap_ns)::BIGINT AS exposed_ns,
    exposure_class(o.dur_ns, o.overlap_ns) AS exposure
FROM nccl_overlap AS o
JOIN device_windows AS w
    ON w.rank = o.rank
    AND w.device = o.device
WHERE o.start_ns BETWEEN w.window_start_ns AND w.window_end_ns
