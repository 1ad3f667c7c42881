-- One row per process group found by the cross-rank solve (nsyswrap.crossrank.solve):
-- its members captured, its size when recorded, whether it spans hosts, how it was
-- found (the key its calls carry, or how streams were grouped from NCCL kernels alone:
-- nsyswrap.crossrank.streams), its collective calls and how many were left out of
-- every cross-rank figure, and its status: matched, one rank only, ambiguous or left
-- out (with the reason).
-- @scope run
-- @reads xr_groups
-- @column pg VARCHAR             Process group id.
-- @column found_by VARCHAR       How the group was found (see nsyswrap.crossrank.solve).
-- @column members VARCHAR        Ranks of the group captured, comma-separated.
-- @column captured BIGINT        Ranks of the group captured.
-- @column group_size BIGINT      Size of the group when recorded, else NULL.
-- @column status VARCHAR         matched, one rank only, ambiguous or left out,
--                                with the reason.
-- @column spans_hosts BOOLEAN    The group's members run on more than one host.
-- @column calls BIGINT           Collective calls in it (one per rank and
--                                collective).
-- @column left_out BIGINT        Of which left out of every cross-rank figure
--                                (not on every member, after a divergence, or
--                                the whole group when it is not matched).
SELECT pg, found_by, members, captured, group_size, status, spans_hosts, calls, left_out
FROM xr_groups
ORDER BY pg
