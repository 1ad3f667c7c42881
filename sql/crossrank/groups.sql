-- One row per process group found by the cross-rank solve (nsyswrap.crossrank.solve):
-- its members captured, its size when recorded, whether it spans hosts and how it was
-- found.
-- @scope run
-- @reads xr_groups
-- @column pg VARCHAR             Process group id.
-- @column found_by VARCHAR       How the group was found (see nsyswrap.crossrank.solve).
-- @column members VARCHAR        Ranks of the group captured, comma-separated.
-- @column captured BIGINT        Ranks of the group captured.
-- @column group_size BIGINT      Size of the group when recorded, else NULL.
-- @column status VARCHAR         matched, one rank only, or ambiguous (left out).
-- @column spans_hosts BOOLEAN    The group's members run on more than one host.
SELECT pg, found_by, members, captured, group_size, status, spans_hosts
FROM xr_groups
ORDER BY pg
