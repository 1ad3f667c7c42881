-- One row per (op, payload size, group size) of matched collectives whose bytes
-- are known (from the `coll:` ranges): transfer time and NCCL's algorithm and
-- bus bandwidth. Transfer time of a collective is its shortest duration across
-- ranks (the last rank to arrive does not wait). Bus bandwidth = algorithm
-- bandwidth x NCCL's factor: all_reduce 2(n-1)/n; all_gather, reduce_scatter
-- and all_to_all (n-1)/n; broadcast, reduce and others 1. `bytes` is taken as
-- nccl-tests' size (for all_gather the gathered size). Groups inside one host
-- (NVLink/PCIe) and across hosts (network) are kept apart (spans_hosts).
-- @scope run
-- @include bus_factor
-- @reads xr_collectives, xr_groups
-- @column op VARCHAR               Collective, e.g. all_reduce.
-- @column bytes BIGINT             Payload bytes.
-- @column ranks BIGINT             Group size n (range's size=, else matched).
-- @column collectives BIGINT       Matched collectives of this op and size.
-- @column transfer_ns BIGINT       Median transfer time (ns).
-- @column min_transfer_ns BIGINT   Shortest transfer time (ns).
-- @column algbw_gb_per_s DOUBLE    bytes / median transfer time (GB/s).
-- @column bus_factor DOUBLE        NCCL's bus bandwidth factor for op and n.
-- @column busbw_gb_per_s DOUBLE    algbw_gb_per_s x bus_factor (GB/s).
-- @column spans_hosts BOOLEAN      The groups' members are on several hosts.
WITH transfers AS (
    SELECT
        pg,
        seq,
        any_value(op) AS op,
        any_value(bytes) AS bytes,
        coalesce(any_value(group_size), count(*)) AS ranks,
        any_value(transfer_ns) AS transfer_ns
    FROM xr_collectives
    GROUP BY pg, seq
),
placed AS (
    SELECT t.*, coalesce(g.spans_hosts, FALSE) AS spans_hosts
    FROM transfers AS t
    LEFT JOIN xr_groups AS g
        USING (pg)
),
sizes AS (
    SELECT
        op,
        bytes,
        ranks,
        count(*) AS collectives,
        round(median(transfer_ns))::BIGINT AS transfer_ns,
        min(transfer_ns) AS min_transfer_ns,
        bus_factor(op, ranks) AS bus_factor,
        spans_hosts
    FROM placed
    WHERE bytes > 0
        AND transfer_ns > 0
    GROUP BY op, bytes, ranks, spans_hosts
)
SELECT
    op,
    bytes,
    ranks,
    collectives,
    transfer_ns,
    min_transfer_ns,
    bytes / transfer_ns AS algbw_gb_per_s,
    bus_factor,
    bytes / transfer_ns * bus_factor AS busbw_gb_per_s,
    spans_hosts
FROM sizes
ORDER BY op, bytes, ranks, spans_hosts
