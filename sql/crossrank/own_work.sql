-- One row per rank, step and phase: the rank's own work there as the replay holds it
-- (nsyswrap.crossrank.own_work): the time of its segments, the work between two of its
-- events, waits left out (the replay re-creates them from the collectives). A rank that
-- waits less for a peer does not do less work; `nsyswrap diff` attributes a change to the
-- rank and phase whose own work changed. The window's steps; a run without step ranges
-- has one step per rank (NULL).
-- @scope run
-- @reads xr_own_work
-- @column rank INTEGER             Rank.
-- @column step BIGINT              Step.
-- @column phase VARCHAR            Phase (NULL: outside every phase range).
-- @column work_ns BIGINT           Its own work in that phase and step (ns).
-- @column stage INTEGER            The rank's pipeline stage (crossrank.whatif's `stage`;
--                                  NULL: no pipeline).
SELECT rank, step, phase, work_ns, stage
FROM xr_own_work
WHERE ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
ORDER BY step NULLS LAST, rank, phase NULLS FIRST
