-- One row per GPU activity of one report that its stream held back until an NCCL kernel
-- of its process ended: the stream waited for a collective (cudaStreamWaitEvent on an
-- event recorded after the NCCL kernel: the optimizer waiting for the gradient
-- all-reduces, a layer waiting for its tensor-parallel all_reduce or FSDP's all_gather,
-- DDP's comm-hook future waited on). Such an activity (not itself an NCCL kernel) is
-- taken to wait for the latest-ending NCCL kernel of its process and device that ended
-- at or before it started (nccl_end_ns) when: its stream had gone idle before that end
-- (idle_from_ns, the previous activity's end on the stream, is earlier), it was launched
-- before that end (the host had queued it: not held back by the host), it started within
-- JOIN_SLACK_NS = 20 us of that end, and a cudaStreamWaitEvent on its stream was called
-- after the previous activity's launch and before its own. The replay
-- (nsyswrap.crossrank.replay) makes the rank's work wait there for that collective.
-- Times are session ns.
-- @reads launches, syncs
-- @column pid BIGINT              Process.
-- @column device BIGINT           CUDA device id.
-- @column stream BIGINT           Stream that waited.
-- @column start_ns BIGINT         Start of the activity that waited (ns).
-- @column idle_from_ns BIGINT     End of the previous activity on its stream (ns).
-- @column launch_ns BIGINT        Launch call start of the activity (ns).
-- @column nccl_start_ns BIGINT    Start of the NCCL kernel it waited for (ns).
-- @column nccl_end_ns BIGINT      End of that NCCL kernel (ns).
WITH work AS (
    -- each stream's activities in order, with the previous one's end and launch
    SELECT
        pid,
        device,
        stream,
        kernel_start_ns AS start_ns,
        start_ns AS launch_ns,
        lag(kernel_end_ns) OVER w AS idle_from_ns,
        lag(start_ns) OVER w AS previous_launch_ns
    FROM (
        SELECT DISTINCT pid, device, stream, start_ns, kernel_start_ns, kernel_end_ns
        FROM launches
        WHERE kind <> 'nccl'
    )
    WINDOW w AS (PARTITION BY pid, device, stream ORDER BY kernel_start_ns, kernel_end_ns, start_ns)
),
nccl AS (
    SELECT DISTINCT pid, device, kernel_start_ns AS nccl_start_ns, kernel_end_ns AS nccl_end_ns
    FROM launches
    WHERE kind = 'nccl'
),
waited AS (
    SELECT w.*, n.nccl_start_ns, n.nccl_end_ns
    FROM work AS w
    ASOF JOIN nccl AS n
        ON n.pid = w.pid
        AND n.device = w.device
        AND n.nccl_end_ns <= w.start_ns
    WHERE w.idle_from_ns < n.nccl_end_ns
        AND w.launch_ns < n.nccl_end_ns
        AND w.start_ns - n.nccl_end_ns <= 20000
),
stream_waits AS (
    SELECT pid, stream, start_ns AS wait_call_ns
    FROM syncs
    WHERE sync_type = 'stream_wait'
)
SELECT
    w.pid,
    w.device,
    w.stream,
    w.start_ns,
    w.idle_from_ns,
    w.launch_ns,
    w.nccl_start_ns,
    w.nccl_end_ns
FROM waited AS w
ASOF JOIN stream_waits AS s
    ON s.pid = w.pid
    AND s.stream = w.stream
    AND s.wait_call_ns <= w.launch_ns
WHERE s.wait_call_ns > w.previous_launch_ns
