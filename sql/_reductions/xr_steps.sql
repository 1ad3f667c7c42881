-- One row per `step:<i>` NVTX range of one rank: its step number and span (session
-- ns). Read by the cross-rank macros and modules as the view xr_steps.
-- @column pid BIGINT              Process that holds the range.
-- @column step BIGINT             Step index from `step:<i>`.
-- @column start_ns BIGINT         Range start, ns on the report's session clock.
-- @column end_ns BIGINT           Range end, ns on the report's session clock.
SELECT
    pid,
    CAST(regexp_extract(text, '^step:(\d+)$', 1) AS BIGINT) AS step,
    start_ns,
    end_ns
FROM nvtx
WHERE regexp_full_match(text, 'step:\d+')
    AND event_type <> 'mark'
