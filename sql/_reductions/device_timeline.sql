-- One row per GPU activity of a device (kernel, memcpy, memset), in start order, with the
-- sweep state after every activity starting at or before it: the one sorted timeline per
-- device behind the ledger, the step ledger, collective exposure, idle gaps and launch
-- latency. Computed once per report, in Python (nsyswrap.device_timeline.build_timeline:
-- one sort per device, running maxima and sums), right after the views; this body only
-- types it. The time a set X covers before an instant t is union_X - max(0, end_X - t),
-- read at the last row starting before t (compute: compute_ns and compute_end_ns; comm,
-- copies alike; compute or comm: compute_comm_ns with the later of the two ends; any:
-- busy_ns with the latest of the three). Sets: comm = NCCL kernels and peer-to-peer copies,
-- copy = other memcpy/memset, compute = every other kernel; a zero-length activity adds no
-- time but ends an idle stretch; one ending before it starts or never counts by its start.
-- @reads kernels, launches
-- @column device             BIGINT    CUDA device id.
-- @column start_ns           BIGINT    Activity start, ns on the report's session clock (rows in this order per device).
-- @column end_ns             BIGINT    Activity end (ns; as in the kernels view).
-- @column activity           UTINYINT  0 compute, 1 comm, 2 copy.
-- @column kernel             BOOLEAN   A kernel, not a memcpy or memset.
-- @column launch_ns          BIGINT    First launch call of its correlation id (ns; NULL: not traced).
-- @column compute_end_ns     BIGINT    Furthest end of compute and zero-length activities so far (ns).
-- @column comm_end_ns        BIGINT    Furthest end of communication so far (ns).
-- @column copy_end_ns        BIGINT    Furthest end of copies so far (ns).
-- @column compute_ns         BIGINT    Union of compute so far (ns).
-- @column comm_ns            BIGINT    Union of communication so far (ns).
-- @column copy_ns            BIGINT    Union of copies so far (ns).
-- @column compute_comm_ns    BIGINT    Union of compute and communication so far (ns).
-- @column busy_ns            BIGINT    Union of every activity so far (ns).
-- @column ends_idle          BOOLEAN   Nothing ran on the device just before this row starts (it ends an idle stretch, or is the device's first work).
-- @column idle_since_ns      BIGINT    Where that idle stretch started: the end of everything before (ns; NULL: first work).
-- @column next_name          VARCHAR   On rows ending an idle stretch, and on rows without a usable end (the only work that can start inside one, where a window may end): the name of the work starting here (of work starting together, the first launched of the named, else the least name).
-- @column next_launch_ns     BIGINT    On those rows: the first launch call of the work starting here (ns).
SELECT
    CAST(NULL AS BIGINT) AS device,
    CAST(NULL AS BIGINT) AS start_ns,
    CAST(NULL AS BIGINT) AS end_ns,
    CAST(NULL AS UTINYINT) AS activity,
    CAST(NULL AS BOOLEAN) AS kernel,
    CAST(NULL AS BIGINT) AS launch_ns,
    CAST(NULL AS BIGINT) AS compute_end_ns,
    CAST(NULL AS BIGINT) AS comm_end_ns,
    CAST(NULL AS BIGINT) AS copy_end_ns,
    CAST(NULL AS BIGINT) AS compute_ns,
    CAST(NULL AS BIGINT) AS comm_ns,
    CAST(NULL AS BIGINT) AS copy_ns,
    CAST(NULL AS BIGINT) AS compute_comm_ns,
    CAST(NULL AS BIGINT) AS busy_ns,
    CAST(NULL AS BOOLEAN) AS ends_idle,
    CAST(NULL AS BIGINT) AS idle_since_ns,
    CAST(NULL AS VARCHAR) AS next_name,
    CAST(NULL AS BIGINT) AS next_launch_ns
WHERE FALSE
