-- One row per step range: what --step-pattern matched (the step definition, step_ranges
-- in sql/_macros/metrics.sql: NVTX ranges LIKE the pattern, numbered by the text's last
-- integer, else by their order in the process; with the default pattern a process
-- without such ranges takes PyTorch's ProfilerStep#<i>).
-- @scope report
-- @include metrics
-- @column rank INTEGER       Rank of the process (a report may hold several).
-- @column pid BIGINT         Process id.
-- @column tid BIGINT         Thread of the range.
-- @column text VARCHAR       Range text.
-- @column step BIGINT        Step number.
-- @column start_ns BIGINT    Range start, ns on the report's session clock.
-- @column end_ns BIGINT      Range end (ns).
-- @order rank, pid, start_ns, tid, text
SELECT rank, pid, tid, text, step, start_ns, end_ns
FROM step_ranges($step_pattern)
ORDER BY rank, pid, start_ns, tid, text
