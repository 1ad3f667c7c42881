-- One row per (rank, step, NVTX range text): the GPU work launched inside the ranges of
-- that text (as nvtx.range_gpu_time counts it) that start in the step, by the steps of
-- their process (step_lookup: the one rule that places an instant in a step). Step
-- ranges themselves are left out; per-call counters are cut from the text as in
-- nvtx.gpu_time_by_text.
-- @scope report
-- @include metrics, launch_metrics
-- @reads step_lookup
-- @column rank INTEGER       Rank of the process (a report may hold several).
-- @column pid BIGINT         Process id.
-- @column step BIGINT        Step whose region holds the ranges' starts.
-- @column text VARCHAR       Range text without per-call counters.
-- @column ranges BIGINT      Ranges of this text starting in the step.
-- @column gpu_ns BIGINT      GPU time launched inside them (ns).
-- @order rank, step, text, pid
WITH ranges AS (
    SELECT p.*
    FROM nvtx_gpu_projection('%') AS p
    ANTI JOIN step_ranges($step_pattern) AS r
        ON r.rank = p.rank
        AND r.pid = p.pid
        AND r.tid = p.tid
        AND r.start_ns = p.start_ns
        AND r.text = p.text
)
SELECT
    g.rank,
    g.pid,
    s.step,
    regexp_replace(g.text, '(,\s*|\s+)(seq|op_id)\s*=\s*\d+', '', 'g') AS text,
    count(*) AS ranges,
    sum(g.gpu_ns)::BIGINT AS gpu_ns
FROM ranges AS g
ASOF JOIN (SELECT * FROM step_lookup WHERE region_end_ns > start_ns) AS s
    ON s.rank = g.rank
    AND s.pid = g.pid
    AND g.start_ns >= s.start_ns
WHERE g.start_ns < s.region_end_ns
GROUP BY ALL
ORDER BY g.rank, s.step, text, g.pid
