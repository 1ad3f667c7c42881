-- One row per collective key (pg, seq) that is not matched across ranks:
-- missing on some rank of its group (a rank issued more collectives than
-- another, or was captured longer), issued twice by one rank, with different
-- ops, payload sizes or group sizes on different ranks, or after such a
-- divergence in its group (a rank that issued an extra collective shifts all
-- its later keys, so they are not joined). A group's ranks are those that issued any collective in
-- it; groups seen on one rank only are not checked. Keys as in
-- crossrank.collectives.
-- @scope run
-- @reads xr_collective_keys
-- @column pg VARCHAR               Process group id.
-- @column seq BIGINT               Sequence number in the group.
-- @column ops VARCHAR              Ops seen under this key, comma-separated.
-- @column bytes VARCHAR            Payload sizes seen, comma-separated.
-- @column ranks BIGINT             Ranks that have the key.
-- @column group_ranks BIGINT       Ranks in the group.
-- @column present_ranks VARCHAR    Ranks that have it, comma-separated.
-- @column missing_ranks VARCHAR    Ranks of the group that lack it.
-- @column reason VARCHAR           op differs, bytes differ, group size differs,
--                                  duplicate, missing or after divergence.
WITH keys AS (
    SELECT * FROM xr_collective_keys
),
group_members AS (
    SELECT pg, list(DISTINCT rank ORDER BY rank) AS members
    FROM keys
    GROUP BY pg
),
unmatched AS (
    SELECT
        pg,
        seq,
        ranks,
        group_ranks,
        string_agg(DISTINCT op, ',' ORDER BY op) AS ops,
        array_to_string(list(DISTINCT bytes ORDER BY bytes), ',') AS bytes,
        list(DISTINCT rank ORDER BY rank) AS present,
        CASE
            WHEN op_differs THEN 'op differs'
            WHEN bytes_differ THEN 'bytes differ'
            WHEN size_differs THEN 'group size differs'
            WHEN duplicate THEN 'duplicate'
            WHEN ranks < group_ranks THEN 'missing'
            ELSE 'after divergence'
        END AS reason
    FROM keys
    WHERE NOT matches
    GROUP BY pg, seq, ranks, group_ranks, op_differs, bytes_differ, size_differs, duplicate
)
SELECT
    u.pg,
    u.seq,
    u.ops,
    u.bytes,
    u.ranks,
    u.group_ranks,
    array_to_string(u.present, ',') AS present_ranks,
    array_to_string(
        list_filter(g.members, lambda r: NOT list_contains(u.present, r)), ','
    ) AS missing_ranks,
    u.reason
FROM unmatched AS u
JOIN group_members AS g
    USING (pg)
ORDER BY TRY_CAST(u.pg AS BIGINT), u.pg, u.seq
