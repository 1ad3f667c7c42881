-- One row per rank and collective key (pg, seq) it issued, with the key's verdict.
-- Keys are the `range` keys of xr_rank_keys (pg, seq of the `coll:` ranges) when
-- every report has collective ranges, else its `kernel` keys (the k-th NCCL kernel of
-- an op on a device, pg 'nccl:<Op>'). The verdict columns (ranks .. matches) are
-- NULL for groups seen on one rank only (not checked); matches: every rank of the
-- group has the key and no key of the group differs at or before it.
-- @reads collectives, session, xr_rank_keys
-- @column rank               INTEGER  Rank of the report.
-- @column pg                 VARCHAR  Process group id ('nccl:<Op>' for kernel keys).
-- @column seq                BIGINT   Sequence number in the group.
-- @column op                 VARCHAR  Collective, e.g. all_reduce.
-- @column bytes              BIGINT   Payload bytes from the range.
-- @column group_size         BIGINT   Ranks in the group from the range.
-- @column cpu_start_ns       BIGINT   Range start, or the first kernel's launch call (session ns).
-- @column cpu_end_ns         BIGINT   Range end (session ns).
-- @column kernel_start_ns    BIGINT   First NCCL kernel start (session ns).
-- @column kernel_end_ns      BIGINT   Last NCCL kernel end (session ns).
-- @column group_ranks        BIGINT   Ranks that issued any key of the group.
-- @column ranks              BIGINT   Ranks that issued this key.
-- @column duplicate          BOOLEAN  A rank issued the key twice.
-- @column op_differs         BOOLEAN  The ranks disagree on the op.
-- @column bytes_differ       BOOLEAN  The ranks disagree on the payload size.
-- @column matches            BOOLEAN  Matched across the ranks of its group.
WITH keyed_by AS (
    -- Ranges give the keys when every report has some.
    SELECT
        (SELECT count(DISTINCT rank) FROM collectives)
        = (SELECT count(*) FROM session) AS ranges
),
per_rank AS (
    SELECT
        rank,
        pg,
        seq,
        op,
        bytes,
        group_size,
        cpu_start_ns,
        cpu_end_ns,
        kernel_start_ns,
        kernel_end_ns
    FROM xr_rank_keys
    WHERE keyed = CASE WHEN (SELECT ranges FROM keyed_by) THEN 'range' ELSE 'kernel' END
),
members AS (
    SELECT pg, count(DISTINCT rank) AS group_ranks
    FROM per_rank
    GROUP BY pg
),
keys AS (
    -- A key differs when a rank has it twice, or the ranks disagree on its op
    -- (send and recv pair up) or payload size (all_to_all sizes may differ).
    SELECT
        p.pg,
        p.seq,
        m.group_ranks,
        count(DISTINCT p.rank) AS ranks,
        count(*) > count(DISTINCT p.rank) AS duplicate,
        count(DISTINCT CASE
            WHEN p.op IN ('send', 'recv', 'isend', 'irecv') THEN 'p2p'
            ELSE p.op
        END) > 1 AS op_differs,
        count(DISTINCT CASE
            WHEN p.op NOT LIKE 'all_to_all%' THEN p.bytes
        END) > 1 AS bytes_differ
    FROM per_rank AS p
    JOIN members AS m
        USING (pg)
    WHERE m.group_ranks >= 2
    GROUP BY p.pg, p.seq, m.group_ranks
),
verdicts AS (
    -- A key matches when every rank of its group has it and no key of the
    -- group differs at or before it: past a divergence the sequences disagree.
    SELECT
        *,
        seq < coalesce(min(seq) FILTER (
            WHERE duplicate OR op_differs OR bytes_differ
        ) OVER (PARTITION BY pg), seq + 1)
        AND ranks = group_ranks AS matches
    FROM keys
)
SELECT
    p.*,
    v.group_ranks,
    v.ranks,
    v.duplicate,
    v.op_differs,
    v.bytes_differ,
    v.matches
FROM per_rank AS p
LEFT JOIN verdicts AS v
    ON v.pg = p.pg
    AND v.seq = p.seq
