-- One row per NCCL kernel of the report (whatever the window): the time compute ran beside
-- it on its device, B(end) - B(start) with B = covered_c of device_timeline (a kernel
-- without end: B(end) counts as 0, so overlap = -B(start)). Computed once per report in
-- Python (nsyswrap.device_timeline); this body only types it. collective_exposure picks
-- the kernels of its window.
-- @reads kernels, device_timeline
-- @column pid                BIGINT   Process that launched the kernel.
-- @column device             BIGINT   CUDA device id.
-- @column stream             BIGINT   CUDA stream id.
-- @column correlation_id     BIGINT   CUPTI correlation id.
-- @column name               VARCHAR  Kernel name.
-- @column start_ns           BIGINT   Kernel start, ns on the report's session clock.
-- @column end_ns             BIGINT   Kernel end, ns.
-- @column dur_ns             BIGINT   Kernel duration (ns).
-- @column overlap_ns         BIGINT   Time compute ran on the device meanwhile (ns).
SELECT
    CAST(NULL AS BIGINT) AS pid,
    CAST(NULL AS BIGINT) AS device,
    CAST(NULL AS BIGINT) AS stream,
    CAST(NULL AS BIGINT) AS correlation_id,
    CAST(NULL AS VARCHAR) AS name,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS BIGINT) AS dur_ns,
    CAST(NULL AS BIGINT) AS overlap_ns
WHERE FALSE
