-- One row per NCCL kernel of one report with its launch call (its own launches row): when
-- the rank could have started it had its stream been free. ready_ns is the end of the
-- GPU work queued before it on its device: the latest end among the process's other
-- activities (compute, copies, sets) on the device whose launch call started before the
-- NCCL kernel's, at most the NCCL kernel's start (an NCCL stream waits on an event
-- recorded on the compute stream before the launch; work on other streams that was still
-- running when the kernel started did not hold it back). The replay
-- (nsyswrap.crossrank.replay) takes a collective's issue point as the later of launch_ns
-- and ready_ns: the kernel then starts there, or when the previous kernel of its stream
-- ends, whichever is later. Times are session ns.
-- @reads launches
-- @column pid BIGINT              Process that launched the kernel.
-- @column device BIGINT           CUDA device id.
-- @column stream BIGINT           CUDA stream id of the NCCL kernel.
-- @column start_ns BIGINT         Kernel start (ns).
-- @column end_ns BIGINT           Kernel end (ns).
-- @column launch_ns BIGINT        Launch call start (ns).
-- @column ready_ns BIGINT         End of the work queued before it on its device, at most
--                                 start_ns (ns); NULL when none was.
WITH nccl AS (
    SELECT
        pid,
        device,
        stream,
        kernel_start_ns AS start_ns,
        kernel_end_ns AS end_ns,
        min(start_ns) AS launch_ns
    FROM launches
    WHERE kind = 'nccl'
    GROUP BY pid, device, stream, kernel_start_ns, kernel_end_ns
),
queued AS (
    -- every other activity by launch call (a CUDA graph's kernels share one), with the
    -- latest end launched so far
    SELECT
        pid,
        device,
        launch_ns,
        max(end_ns) OVER (
            PARTITION BY pid, device ORDER BY launch_ns ROWS UNBOUNDED PRECEDING
        ) AS ready_ns
    FROM (
        SELECT pid, device, start_ns AS launch_ns, max(kernel_end_ns) AS end_ns
        FROM launches
        WHERE kind <> 'nccl'
        GROUP BY pid, device, start_ns
    )
)
SELECT
    n.pid,
    n.device,
    n.stream,
    n.start_ns,
    n.end_ns,
    n.launch_ns,
    least(q.ready_ns, n.start_ns) AS ready_ns
FROM nccl AS n
ASOF LEFT JOIN queued AS q
    ON q.pid = n.pid
    AND q.device = n.device
    AND q.launch_ns < n.launch_ns
