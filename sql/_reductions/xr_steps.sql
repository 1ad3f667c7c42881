-- One row per step range of one rank (see step_ranges in sql/_macros/metrics.sql: with
-- the default pattern a process without `step:` ranges takes `ProfilerStep#<i>`): its
-- process, step number and span (session ns). Read by the cross-rank objects.
-- @include metrics
-- @column pid BIGINT              Process that holds the range.
-- @column step BIGINT             Step number.
-- @column start_ns BIGINT         Range start, ns on the report's session clock.
-- @column end_ns BIGINT           Range end, ns on the report's session clock.
SELECT pid, step, start_ns, end_ns
FROM step_ranges($step_pattern)
