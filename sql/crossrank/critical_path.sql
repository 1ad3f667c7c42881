-- One row per step and charge of its critical path (nsyswrap.crossrank.whatif): walking
-- back from the step's end on its last rank through the events each one waited for (at a
-- collective, to its last arriver), the step's time is charged to the work of a (rank,
-- phase) or to the transfer of a (pg, op); the charges of a step add up exactly to its
-- replayed step time (see crossrank.whatif: from the previous step's end on its last rank
-- to this one's). Waiting is never on the path: the path goes to what was waited for.
-- Work is charged to the segment it belongs to (nsyswrap.crossrank.lanes): its rank, the
-- phase range open on the host when it was done or launched (phase NULL: outside every
-- phase) and its side: host (the host's own time, a launch's offset and latency, a
-- blocking call's return) or gpu (the GPU lane's work and its own gaps, an arrival's
-- latency). A transfer row has no rank (rank NULL, shown empty): the transfer of a
-- collective after its last member arrived is the collective's, every member moving data
-- at once, so it is charged to its (pg, op), never to one rank; what made its members
-- late is on the path before it, as work of the rank that arrived last. A run without
-- step ranges has one step (NULL).
-- @scope run
-- @reads xr_critical_path
-- @column step BIGINT              Step.
-- @column kind VARCHAR             work (of a rank in a phase) or transfer (of a
--                                  collective after its last member arrived).
-- @column rank INTEGER             The rank whose work it is (NULL for transfer: no
--                                  one rank's, see above).
-- @column phase VARCHAR            Its phase (NULL: outside every phase, or transfer).
-- @column side VARCHAR             host or gpu (NULL for transfer).
-- @column pg VARCHAR               The collective's group (NULL for work).
-- @column op VARCHAR               The collective (NULL for work).
-- @column ns BIGINT                Time charged (ns).
-- @column share DOUBLE             ns / the step's time.
SELECT
    step,
    kind,
    rank,
    phase,
    side,
    pg,
    op,
    ns,
    ns / sum(ns) OVER (PARTITION BY step) AS share
FROM xr_critical_path
WHERE ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
ORDER BY step NULLS LAST, ns DESC, kind, rank, phase, side, pg, op
