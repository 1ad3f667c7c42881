-- One row per collective key (pg, seq) of one rank, of both kinds: `range` keys are
-- the (pg, seq) of its `coll:` ranges, `kernel` keys the k-th NCCL kernel of an op on
-- a device (pg 'nccl:<Op>'). xr_collective_keys() takes one kind for the whole run
-- (ranges when every report has some) and matches the keys across ranks.
-- kernel_*: the NCCL kernels launched inside the range on the same thread (for a
-- kernel key: its kernels on all devices). Times are session ns.
-- @reads kernels, launches, collectives
-- @column keyed VARCHAR           range or kernel: how the key was made.
-- @column pg VARCHAR              Process group id ('nccl:<Op>' for kernel keys).
-- @column seq BIGINT              Sequence number in the group.
-- @column op VARCHAR              Collective, e.g. all_reduce.
-- @column bytes BIGINT            Payload bytes from the range (NULL for kernel keys).
-- @column group_size BIGINT       Ranks in the group from the range (NULL for kernel
--                                 keys).
-- @column cpu_start_ns BIGINT     Range start, or the first kernel's launch call (ns).
-- @column cpu_end_ns BIGINT       Range end (NULL for kernel keys) (ns).
-- @column kernel_start_ns BIGINT  First NCCL kernel start (ns), NULL without kernels.
-- @column kernel_end_ns BIGINT    Last NCCL kernel end (ns), NULL without kernels.
WITH nccl AS (
    -- NCCL kernels with their launch call (the launches view: the runtime call when
    -- a driver call repeats the correlation id). Only NCCL launches are read, not
    -- every API call.
    SELECT
        k.device,
        k.start_ns,
        k.end_ns,
        k.coll_op,
        min(l.start_ns) AS launch_ns,
        arg_min(l.tid, l.start_ns) AS tid,
        any_value(k.pid) AS pid
    FROM kernels AS k
    LEFT JOIN launches AS l
        ON l.pid = k.pid
        AND l.correlation_id = k.correlation_id
        AND l.kind = 'nccl'
    WHERE k.kind = 'nccl'
    GROUP BY k.pid, k.device, k.correlation_id, k.start_ns, k.end_ns, k.coll_op
),
range_kernels AS (
    -- NCCL kernels launched inside a collective range on the same thread.
    SELECT
        c.pg,
        c.seq,
        min(n.start_ns) AS kernel_start_ns,
        max(n.end_ns) AS kernel_end_ns
    FROM nccl AS n
    ASOF JOIN collectives AS c
        ON c.pid = n.pid
        AND c.tid = n.tid
        AND c.start_ns <= n.launch_ns
    WHERE n.launch_ns <= c.end_ns
    GROUP BY c.pg, c.seq
),
keyed_by_range AS (
    SELECT
        'range' AS keyed,
        c.pg,
        c.seq,
        c.op,
        c.bytes,
        c.group_size,
        c.start_ns AS cpu_start_ns,
        c.end_ns AS cpu_end_ns,
        rk.kernel_start_ns,
        rk.kernel_end_ns
    FROM collectives AS c
    LEFT JOIN range_kernels AS rk
        USING (pg, seq)
    WHERE c.pg IS NOT NULL
        AND c.seq IS NOT NULL
),
device_kernels AS (
    -- The k-th NCCL kernel of an op on a device.
    SELECT
        *,
        row_number() OVER (
            PARTITION BY device, coll_op ORDER BY start_ns, end_ns
        ) - 1 AS seq
    FROM nccl
    WHERE coll_op IS NOT NULL
),
keyed_by_kernel AS (
    SELECT
        'kernel' AS keyed,
        'nccl:' || coll_op AS pg,
        seq,
        lower(regexp_replace(coll_op, '([a-z])([A-Z])', '\1_\2', 'g')) AS op,
        CAST(NULL AS BIGINT) AS bytes,
        CAST(NULL AS BIGINT) AS group_size,
        min(launch_ns) AS cpu_start_ns,
        CAST(NULL AS BIGINT) AS cpu_end_ns,
        min(start_ns) AS kernel_start_ns,
        max(end_ns) AS kernel_end_ns
    FROM device_kernels
    GROUP BY coll_op, seq
)
SELECT * FROM keyed_by_range
UNION ALL
SELECT * FROM keyed_by_kernel
