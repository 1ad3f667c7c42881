-- One row per collective call of one rank, of four kinds (nsyswrap.crossrank.matching
-- takes the best kind every rank has and matches the calls across ranks):
-- `range` keys are the (pg, seq) of nsyswrap's `coll:` ranges; `nccl` rows are NCCL's
-- own ranges (domain NCCL: collectives and communicator set-up, pg 'nccl', seq their order
-- in the process) with their payload, keyed by nsyswrap.crossrank.nccl_payload; `mpi` keys the k-th
-- MPI collective (domain MPI: MPI_Allreduce, MPI_Bcast, ...) of a process (pg 'mpi');
-- `kernel` keys the k-th NCCL kernel on one CUDA stream of a process (pg
-- 'stream:<pid>:<device>:<stream>': PyTorch gives each process group its own NCCL
-- stream; which streams of different ranks form one group is inferred later).
-- kernel_*: the NCCL kernels launched inside the range on the same thread (for a
-- kernel key: that kernel). Times are session ns.
-- @reads nvtx, kernels, launches, collectives, nvtx_payloads
-- @column keyed VARCHAR           range, nccl, mpi or kernel: how the key was made.
-- @column pid BIGINT              Process that issued the call.
-- @column pg VARCHAR              Process group id (see above).
-- @column seq BIGINT              Sequence number in the group (or stream).
-- @column op VARCHAR              Collective, e.g. all_reduce (mpi: e.g. allreduce;
--                                 nccl: NCCL's name after `nccl`, e.g. all_reduce,
--                                 comm_init_rank).
-- @column bytes BIGINT            Payload bytes from the range (NULL otherwise).
-- @column group_size BIGINT       Ranks in the group from the range (NULL
--                                 otherwise).
-- @column cpu_start_ns BIGINT     Range start, or the kernel's launch call (ns).
-- @column cpu_end_ns BIGINT       Range end (NULL for kernel keys) (ns).
-- @column kernel_start_ns BIGINT  First NCCL kernel start (ns), NULL without kernels.
-- @column kernel_end_ns BIGINT    Last NCCL kernel end (ns), NULL without kernels.
-- @column payload BLOB            nccl rows: the range's binaryData (NULL when the
--                                 export has none); NULL for other kinds.
-- @column done_ns BIGINT          range rows: an asynchronous call's completion mark (ns;
--                                 gloo, MPI), NULL for other calls and kinds.
WITH nccl AS (
    -- NCCL kernels with their launch call (the launches view: the runtime call when
    -- a driver call repeats the correlation id). Only NCCL launches are read, not
    -- every API call.
    SELECT
        k.pid,
        k.device,
        k.stream,
        k.start_ns,
        k.end_ns,
        k.coll_op,
        min(l.start_ns) AS launch_ns,
        arg_min(l.tid, l.start_ns) AS tid
    FROM kernels AS k
    LEFT JOIN launches AS l
        ON l.pid = k.pid
        AND l.correlation_id = k.correlation_id
        AND l.kind = 'nccl'
    WHERE k.kind = 'nccl'
    GROUP BY k.pid, k.device, k.stream, k.correlation_id, k.start_ns, k.end_ns, k.coll_op
),
nccl_ranges AS (
    -- NCCL's own ranges of collectives and communicator set-up, in call order.
    SELECT
        r.pid,
        r.tid,
        'nccl' AS pg,
        row_number() OVER (PARTITION BY r.pid ORDER BY r.start_ns, r.end_ns, r.tid) - 1 AS seq,
        lower(regexp_replace(
            replace(substr(r.text, 5), 'AlltoAll', 'AllToAll'), '([a-z])([A-Z])', '\1_\2', 'g'
        )) AS op,
        r.start_ns,
        r.end_ns,
        p.payload
    FROM nvtx AS r
    LEFT JOIN nvtx_payloads AS p
        ON p.pid = r.pid
        AND p.tid = r.tid
        AND p.start_ns = r.start_ns
        AND p.text = r.text
    WHERE r.domain = 'NCCL'
        AND r.event_type <> 'mark'
        AND regexp_full_match(
            r.text,
            'nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|AlltoAll|Gather|Scatter|'
            || 'CommInitRank|CommInitRankConfig|CommInitRankScalable|CommSplit)'
        )
),
ranges AS (
    -- nsyswrap's `coll:` ranges and NCCL's ranges, each with its key.
    SELECT
        'range' AS keyed,
        pid,
        tid,
        pg,
        seq,
        op,
        bytes,
        group_size,
        start_ns,
        end_ns,
        CAST(NULL AS BLOB) AS payload,
        done_ns
    FROM collectives
    WHERE pg IS NOT NULL
        AND seq IS NOT NULL
    UNION ALL
    SELECT
        'nccl',
        pid,
        tid,
        pg,
        seq,
        op,
        CAST(NULL AS BIGINT),
        CAST(NULL AS BIGINT),
        start_ns,
        end_ns,
        payload,
        CAST(NULL AS BIGINT)
    FROM nccl_ranges
),
range_kernels AS (
    -- NCCL kernels launched inside a range on the same thread (each kind of range on
    -- its own: NCCL's ranges nest inside `coll:` ones).
    SELECT
        c.keyed,
        c.pid,
        c.pg,
        c.seq,
        min(n.start_ns) AS kernel_start_ns,
        max(n.end_ns) AS kernel_end_ns
    FROM (SELECT *, unnest(['range', 'nccl']) AS keyed FROM nccl) AS n
    ASOF JOIN ranges AS c
        ON c.keyed = n.keyed
        AND c.pid = n.pid
        AND c.tid = n.tid
        AND c.start_ns <= n.launch_ns
    WHERE n.launch_ns <= c.end_ns
    GROUP BY c.keyed, c.pid, c.pg, c.seq
),
keyed_by_range AS (
    SELECT
        r.keyed,
        r.pid,
        r.pg,
        r.seq,
        r.op,
        r.bytes,
        r.group_size,
        r.start_ns AS cpu_start_ns,
        r.end_ns AS cpu_end_ns,
        rk.kernel_start_ns,
        rk.kernel_end_ns,
        r.payload,
        r.done_ns
    FROM ranges AS r
    LEFT JOIN range_kernels AS rk
        USING (keyed, pid, pg, seq)
),
keyed_by_mpi AS (
    -- MPI collectives traced by nsys (--trace=mpi), in call order per process.
    SELECT
        'mpi' AS keyed,
        pid,
        'mpi' AS pg,
        row_number() OVER (PARTITION BY pid ORDER BY start_ns, end_ns) - 1 AS seq,
        lower(substr(text, 5)) AS op,
        CAST(NULL AS BIGINT) AS bytes,
        CAST(NULL AS BIGINT) AS group_size,
        start_ns AS cpu_start_ns,
        end_ns AS cpu_end_ns,
        CAST(NULL AS BIGINT) AS kernel_start_ns,
        CAST(NULL AS BIGINT) AS kernel_end_ns,
        CAST(NULL AS BLOB) AS payload,
        CAST(NULL AS BIGINT) AS done_ns
    FROM nvtx
    WHERE domain = 'MPI'
        AND event_type <> 'mark'
        AND regexp_full_match(
            text,
            'MPI_(Allreduce|Reduce|Bcast|Barrier|Allgather|Allgatherv|Gather|Gatherv|'
            || 'Scatter|Scatterv|Alltoall|Alltoallv|Reduce_scatter|Reduce_scatter_block|'
            || 'Scan|Exscan)'
        )
),
keyed_by_kernel AS (
    -- The k-th NCCL kernel on a stream of a process.
    SELECT
        'kernel' AS keyed,
        pid,
        'stream:' || pid || ':' || device || ':' || stream AS pg,
        row_number() OVER (
            PARTITION BY pid, device, stream ORDER BY start_ns, end_ns
        ) - 1 AS seq,
        coalesce(
            lower(regexp_replace(coll_op, '([a-z])([A-Z])', '\1_\2', 'g')), 'nccl'
        ) AS op,
        CAST(NULL AS BIGINT) AS bytes,
        CAST(NULL AS BIGINT) AS group_size,
        launch_ns AS cpu_start_ns,
        CAST(NULL AS BIGINT) AS cpu_end_ns,
        start_ns AS kernel_start_ns,
        end_ns AS kernel_end_ns,
        CAST(NULL AS BLOB) AS payload,
        CAST(NULL AS BIGINT) AS done_ns
    FROM nccl
)
SELECT * FROM keyed_by_range
UNION ALL
SELECT * FROM keyed_by_mpi
UNION ALL
SELECT * FROM keyed_by_kernel
