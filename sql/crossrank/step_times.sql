-- One row per step: the run's step time as recorded and as replayed from the recorded
-- durations (nsyswrap.crossrank.whatif): from the previous step's end on its last rank to
-- its own end on its last rank (the window's first step: from its latest start), the step
-- time every what-if gain is a part of. The window's steps; a run without step ranges is
-- one step (NULL).
-- @scope run
-- @reads xr_whatif
-- @column step BIGINT              Step.
-- @column recorded_ns BIGINT       The run's step time as recorded (ns).
-- @column replayed_ns BIGINT       As replayed (ns).
SELECT DISTINCT step, recorded_ns, replayed_ns
FROM xr_whatif
WHERE ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
ORDER BY step NULLS LAST
