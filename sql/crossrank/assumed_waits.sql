-- One row per wait the replay assumed (what-if analysis, nsyswrap.crossrank.whatif): a
-- rank's host made no CUDA call and opened or closed no step or phase range for a while,
-- then resumed right after a completion of its own (a collective it took part in ended on
-- it, or its GPU's work drained), and no recorded call waited for it (an untraced wait, or
-- the host's own work ending just then: the trace cannot tell). The replay takes it as a
-- wait for that completion; every gain that depends on it is a range (crossrank.whatif:
-- gain_low_ns_per_step without these waits, gain_high_ns_per_step with them).
-- @scope run
-- @reads xr_assumed_waits
-- @column rank INTEGER             The rank whose host was silent.
-- @column step BIGINT              Step (NULL: between steps).
-- @column phase VARCHAR            Phase open on its host then (NULL: none).
-- @column waits_for VARCHAR        gpu (its GPU's work draining) or collective.
-- @column pg VARCHAR               Group of the collective it is taken to have waited for
--                                  (NULL: its GPU's work).
-- @column seq BIGINT               Its sequence number in the group.
-- @column op VARCHAR               The collective.
-- @column after_ns BIGINT          How long after the collective's end the host resumed (ns).
-- @column silent_ns BIGINT         How long the host had made no CUDA call (ns).
SELECT rank, step, phase, waits_for, pg, seq, op, after_ns, silent_ns
FROM xr_assumed_waits
WHERE ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
ORDER BY step NULLS LAST, rank, pg, seq
