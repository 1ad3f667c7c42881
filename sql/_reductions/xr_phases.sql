-- One row per phase of one rank: an NVTX range directly inside a step range
-- (step_ranges in sql/_macros/metrics.sql) on the same thread (one level deeper, ending
-- inside it; zero-length and `coll:` ranges are not phases, nor ranges across a step's
-- edge, which are left out of the nesting), with its host time (duration less the CUDA synchronize calls and
-- collective ranges started in it: waiting for others is not lag) and the GPU time
-- of the compute kernels launched while it ran by ANY thread of its process (the
-- autograd engine launches backward kernels from its own threads). Times are
-- session ns. xr_phase_lag() sums
-- these per step and takes the medians over the ranks.
-- @include metrics
-- @reads nvtx, launches, api_calls, collectives
-- @column pid BIGINT              Process id of the thread.
-- @column tid BIGINT              Thread holding the step and the phase.
-- @column step BIGINT             Step number (step_ranges).
-- @column phase VARCHAR           Text of the range.
-- @column start_ns BIGINT         Range start, ns on the report's session clock.
-- @column end_ns BIGINT           Range end, ns on the report's session clock.
-- @column host_ns BIGINT          end_ns - start_ns less the waits started in it
--                                 (at least 0) (ns).
-- @column gpu_ns BIGINT           GPU time of the compute kernels launched in it (ns).
WITH step_edges AS (
    -- of steps starting together on a thread, the longest
    SELECT pid, tid, start_ns, max(end_ns) AS end_ns
    FROM step_ranges($step_pattern)
    GROUP BY pid, tid, start_ns
),
cut AS (
    -- step ranges step_ranges cut where the next step begins: they nest as cut
    SELECT pid, tid, start_ns, end_ns, text FROM step_ranges($step_pattern) WHERE cut
),
all_ranges AS (
    -- NVTX ranges on threads that hold step ranges (zero-length ones left out)
    SELECT pid, tid, start_ns, end_ns, text
    FROM (
        SELECT n.pid, n.tid, n.start_ns, n.end_ns, n.text
        FROM nvtx AS n
        SEMI JOIN (SELECT DISTINCT pid, tid FROM step_edges) AS s
            ON s.pid = n.pid
            AND s.tid = n.tid
        ANTI JOIN cut AS c
            ON c.pid = n.pid
            AND c.tid = n.tid
            AND c.start_ns = n.start_ns
            AND c.text = n.text
        WHERE n.event_type <> 'mark'
        UNION ALL
        SELECT * FROM cut
    )
    WHERE end_ns > start_ns
),
crossing AS (
    -- ranges across a step's edge: starting in a step and ending after it (a range
    -- around the optimizer step that ends an automatic step), or ending inside a step
    -- that started after them. No phase, and left out of the nesting depths.
    SELECT r.pid, r.tid, r.start_ns, r.end_ns, r.text
    FROM all_ranges AS r
    ASOF JOIN step_edges AS s
        ON s.pid = r.pid
        AND s.tid = r.tid
        AND r.start_ns >= s.start_ns
    WHERE r.start_ns < s.end_ns
        AND r.end_ns > s.end_ns
    UNION
    SELECT r.pid, r.tid, r.start_ns, r.end_ns, r.text
    FROM all_ranges AS r
    ASOF JOIN step_edges AS s
        ON s.pid = r.pid
        AND s.tid = r.tid
        AND r.end_ns > s.start_ns
    WHERE s.start_ns > r.start_ns
        AND r.end_ns < s.end_ns
),
thread_ranges AS (
    -- `thread` packs (pid, tid) into one key.
    SELECT (pid << 24) | tid AS thread, pid, tid, start_ns, end_ns, text
    FROM (
        SELECT * FROM all_ranges
        EXCEPT ALL
        SELECT * FROM crossing
    )
),
edges AS (
    SELECT thread, pid, tid, start_ns AS t, 1 AS delta, start_ns, end_ns, text
    FROM thread_ranges
    UNION ALL
    SELECT thread, pid, tid, end_ns, -1, NULL, NULL, NULL
    FROM thread_ranges
),
depths AS (
    -- Nesting depth of a range = ranges open on its thread once it starts;
    -- ends sort before starts at the same time, longer ranges start first, and
    -- of two equal ranges a module or collective range (fwd:, bwd:, coll:)
    -- is the inner one.
    SELECT thread, pid, tid, start_ns, end_ns, text, depth
    FROM (
        SELECT
            *,
            sum(delta) OVER (
                PARTITION BY thread
                ORDER BY
                    t,
                    delta,
                    end_ns DESC,
                    regexp_matches(text, '^(fwd|bwd|coll):'),
                    text
                ROWS UNBOUNDED PRECEDING
            ) AS depth
        FROM edges
    )
    WHERE delta = 1
),
steps AS (
    -- The step ranges (step_ranges: numbered there) with their depth. Ranges starting
    -- together on a thread nest (one depth each), so (thread, depth, start) names one
    -- step; of identical ranges the lowest number.
    SELECT d.thread, d.depth, s.step, d.start_ns, d.end_ns
    FROM depths AS d
    JOIN step_ranges($step_pattern) AS s
        ON s.pid = d.pid
        AND s.tid = d.tid
        AND s.start_ns = d.start_ns
        AND s.end_ns = d.end_ns
        AND s.text = d.text
    QUALIFY row_number() OVER (PARTITION BY d.thread, d.depth, d.start_ns ORDER BY s.step) = 1
),
candidates AS (
    -- Only ranges one level below some step of their thread can be phases.
    SELECT c.*
    FROM depths AS c
    SEMI JOIN (SELECT DISTINCT thread, depth FROM steps) AS s
        ON s.thread = c.thread
        AND s.depth + 1 = c.depth
    WHERE c.text NOT LIKE 'coll:%'
),
phases AS (
    SELECT c.thread, c.pid, c.tid, s.step, c.text AS phase, c.start_ns, c.end_ns
    FROM candidates AS c
    -- the latest step one level up started by then: the range around the candidate, if
    -- that is a step
    ASOF JOIN steps AS s
        ON s.thread = c.thread
        AND s.depth + 1 = c.depth
        AND s.start_ns <= c.start_ns
    WHERE c.end_ns <= s.end_ns
),
owned AS (
    -- The span whose launches a phase owns: a launch by any thread of the process
    -- belongs to the latest phase started in the process, if that has not ended.
    -- Spans are cut into buckets of one width per process (its span / its phases:
    -- two buckets per phase on average), so that each launch meets only the few
    -- spans of its bucket in a hash join on (pid, bucket) instead of every launch
    -- being sorted.
    SELECT
        thread,
        pid,
        start_ns,
        least(end_ns, lead(start_ns) OVER (PARTITION BY pid ORDER BY start_ns, thread))
            AS until_ns,
        greatest(1, (max(end_ns) OVER p - min(start_ns) OVER p) // count(*) OVER p)
            AS width
    FROM phases
    WINDOW p AS (PARTITION BY pid)
),
buckets AS (
    SELECT
        thread,
        pid,
        start_ns,
        until_ns,
        unnest(range(start_ns // width, (until_ns - 1) // width + 1)) AS bucket
    FROM owned
    WHERE until_ns > start_ns
),
compute_launches AS (
    SELECT l.pid, l.start_ns, l.gpu_ns, l.start_ns // w.width AS bucket
    FROM (
        SELECT pid, start_ns, kernel_end_ns - kernel_start_ns AS gpu_ns
        FROM launches
        WHERE kind = 'compute'
    ) AS l
    JOIN (SELECT DISTINCT pid, width FROM owned) AS w
        ON w.pid = l.pid
),
phase_gpu AS (
    -- GPU time of the compute kernels launched in each phase, by any thread.
    SELECT b.thread, b.start_ns, sum(l.gpu_ns) AS gpu_ns
    FROM compute_launches AS l
    JOIN buckets AS b
        ON b.pid = l.pid
        AND b.bucket = l.bucket
    WHERE l.start_ns >= b.start_ns
        AND l.start_ns < b.until_ns
    GROUP BY b.thread, b.start_ns
),
phase_waits AS (
    SELECT p.thread, p.start_ns, sum(w.dur_ns) AS wait_ns
    FROM (
        SELECT pid, tid, start_ns, dur_ns
        FROM api_calls
        WHERE api ILIKE '%synchronize%'
        UNION ALL
        SELECT pid, tid, start_ns, dur_ns
        FROM collectives
    ) AS w
    ASOF JOIN phases AS p
        ON p.thread = (w.pid << 24) | w.tid
        AND p.start_ns <= w.start_ns
    WHERE w.start_ns < p.end_ns
    GROUP BY p.thread, p.start_ns
)
SELECT
    p.pid,
    p.tid,
    p.step,
    p.phase,
    p.start_ns,
    p.end_ns,
    greatest(0, p.end_ns - p.start_ns - coalesce(w.wait_ns, 0))::BIGINT AS host_ns,
    coalesce(g.gpu_ns, 0)::BIGINT AS gpu_ns
FROM phases AS p
LEFT JOIN phase_gpu AS g
    ON g.thread = p.thread
    AND g.start_ns = p.start_ns
LEFT JOIN phase_waits AS w
    ON w.thread = p.thread
    AND w.start_ns = p.start_ns
