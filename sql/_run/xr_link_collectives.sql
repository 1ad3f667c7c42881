-- One row per matched collective with its hosts and bus bandwidth: what the links'
-- bandwidth and the replay of a link at its healthy bandwidth read
-- (nsyswrap.crossrank.links). A collective crosses every pair of the hosts its members
-- are on; its bus bandwidth (NCCL's busBw: bytes / transfer time x bus_factor(op, n)) is
-- NULL where its bytes are not recorded.
-- @include bus_factor
-- @reads xr_aligned, xr_clock
-- @column pg                 VARCHAR  Process group.
-- @column seq                BIGINT   Sequence number of the call in its group.
-- @column op                 VARCHAR  Collective, e.g. all_reduce.
-- @column bytes              BIGINT   Payload bytes (NULL: not recorded).
-- @column ranks              BIGINT   Group size (recorded, else its members).
-- @column hosts              VARCHAR  The members' hosts (a report without one: its clock),
--                                     sorted, comma-separated.
-- @column transfer_ns        BIGINT   Its transfer time: the shortest member's time in it
--                                     (the last arrival waits for no one) (ns).
-- @column busbw_gb_per_s     DOUBLE   Bus bandwidth (GB/s; NULL: bytes not recorded).
WITH members AS (
    SELECT
        a.pg, a.seq, a.op, a.bytes, a.group_size, a.transfer_ns,
        coalesce(c.host, c.clock) AS host
    FROM xr_aligned AS a
    JOIN xr_clock AS c
        USING (rank)
)
SELECT
    pg,
    seq,
    any_value(op) AS op,
    max(bytes) AS bytes,
    coalesce(max(group_size), count(*)) AS ranks,
    string_agg(DISTINCT host, ',' ORDER BY host) AS hosts,
    any_value(transfer_ns) AS transfer_ns,
    CASE WHEN max(bytes) > 0 AND any_value(transfer_ns) > 0
        THEN max(bytes) / any_value(transfer_ns)
            * bus_factor(any_value(op), coalesce(max(group_size), count(*)))
    END AS busbw_gb_per_s
FROM members
GROUP BY pg, seq
ORDER BY pg, seq
