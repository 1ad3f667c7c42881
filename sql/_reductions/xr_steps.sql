-- One row per step range of one rank (`step:<i>` of nsyswrap.step, or PyTorch
-- profiler's `ProfilerStep#<i>`): its step number and span (session
-- ns). Read by the cross-rank macros and modules as the view xr_steps.
-- @column pid BIGINT              Process that holds the range.
-- @column step BIGINT             Step index from `step:<i>` (or `ProfilerStep#<i>`).
-- @column start_ns BIGINT         Range start, ns on the report's session clock.
-- @column end_ns BIGINT           Range end, ns on the report's session clock.
SELECT
    pid,
    CAST(regexp_extract(text, '^(step:|ProfilerStep#)(\d+)$', 2) AS BIGINT) AS step,
    start_ns,
    end_ns
FROM nvtx
WHERE regexp_full_match(text, '(step:|ProfilerStep#)\d+')
    AND event_type <> 'mark'
