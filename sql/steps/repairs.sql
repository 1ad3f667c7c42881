-- One row per rank with step ranges: how many the step definition (step_ranges in
-- sql/_macros/metrics.sql) repaired. A step number used again on a thread after its
-- earlier ranges ended (an epoch restarting at step:0) is numbered on after the highest;
-- a step that the next one starts inside and outlasts is cut where that one begins. The
-- report's data-quality note says each.
-- @scope report
-- @include metrics
-- @column rank INTEGER        Rank of the process (a report may hold several).
-- @column ranges BIGINT       Step ranges (what --step-pattern matched).
-- @column renumbered BIGINT   Of those, ranges using a number again, numbered on after the highest.
-- @column cut BIGINT          Of those, ranges cut where the next step of their process begins.
-- @order rank
SELECT
    rank,
    count(*) AS ranges,
    count(*) FILTER (WHERE renumbered) AS renumbered,
    count(*) FILTER (WHERE cut) AS cut
FROM step_ranges($step_pattern)
GROUP BY rank
ORDER BY rank
