-- One row per rank and step: its step time (its step range) as recorded and as replayed
-- from the recorded durations (nsyswrap.crossrank.whatif; the window's steps, each rank
-- from its recorded start of the first). They differ only where a
-- duration the model needs would be negative (an end before the collective's last
-- arrival: clock error beyond the alignment, or a wait the model does not see), taken as
-- 0: the residual. A what-if figure is only as good as this check; the report gives none
-- where a window step's residual exceeds 2 % of its time. A run without step ranges has
-- one step per rank (NULL: from its first collective to its last end).
-- @scope run
-- @reads xr_replay_check
-- @column rank INTEGER             Rank.
-- @column step BIGINT              Step.
-- @column recorded_ns BIGINT       Step range duration as recorded (ns).
-- @column replayed_ns BIGINT       As replayed (ns).
-- @column residual_ns BIGINT       |replayed - recorded| (ns).
-- @column residual_pct DOUBLE      residual_ns in % of recorded_ns.
SELECT
    rank,
    step,
    recorded_ns,
    replayed_ns,
    residual_ns,
    100 * residual_ns / nullif(recorded_ns, 0) AS residual_pct
FROM xr_replay_check
WHERE ($step_from IS NULL OR step >= $step_from)
    AND ($step_to IS NULL OR step < $step_to)
ORDER BY step NULLS LAST, rank
