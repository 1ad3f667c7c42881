-- One row per NCCL kernel starting in the window: how much of it ran while compute ran
-- on the same device (any stream), and its NVTX context: the step containing its launch
-- call and the innermost range matching context_regex on the launching thread.
-- exposure: hidden (no exposed time, also zero-length), exposed (no overlap) or
-- partly_hidden. Longest exposed first.
-- @reads collective_exposure, nccl_context
-- @param context_regex VARCHAR = ^(fwd|bwd|coll):  Regex of the NVTX ranges that name
--                                             the context (module or collective); NULL:
--                                             that default where the report has such
--                                             ranges, else any range.
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
-- @scope report
-- @order exposed_ns DESC, rank, device, start_ns, correlation_id
SELECT
    e.rank,
    e.pid,
    e.device,
    e.stream,
    e.correlation_id,
    e.name,
    e.start_ns,
    e.end_ns,
    e.dur_ns,
    e.overlap_ns,
    e.exposed_ns,
    e.exposure,
    c.tid,
    c.launch_ns,
    c.step,
    c.context,
    c.compute_stream
FROM collective_exposure AS e
LEFT JOIN nccl_context AS c
    ON c.rank = e.rank
    AND c.pid IS NOT DISTINCT FROM e.pid
    AND c.device = e.device
    AND c.stream IS NOT DISTINCT FROM e.stream
    AND c.correlation_id IS NOT DISTINCT FROM e.correlation_id
    AND c.start_ns = e.start_ns
ORDER BY e.exposed_ns DESC, e.rank, e.device, e.start_ns, e.correlation_id
