-- One row per (rank, process, pattern) of NVTX ranges that could be the training steps
-- of a capture whose step pattern matches nothing: outermost ranges (no range of their
-- thread around them) of the program's own domains (not MPI, NCCL, CCCL, CUB, cuBLAS,
-- cuDNN; not nsyswrap's module, collective and capture ranges) whose text is no C++ or
-- PyTorch operator name (`::`, `op_id =`). A text ending in a number gives the pattern
-- of that number as `%` (`iteration 3` -> `iteration %`, `step_3` -> `step_%`), any
-- other text itself (`train_step`). nsyswrap.report.window picks the steps from these.
-- @scope report
-- @reads nvtx
-- @column rank INTEGER                 Rank of the process.
-- @column pid BIGINT                   Process holding the ranges.
-- @column pattern VARCHAR              LIKE pattern of the ranges (--step-pattern).
-- @column numbered BOOLEAN             The texts end in a number (the step number).
-- @column ranges BIGINT                Outermost ranges matching it in the process.
-- @column consecutive BOOLEAN          They never overlap and, when numbered, each one's
--                                      number is one more than the one before it.
-- @column first_text VARCHAR           Text of the first of them.
-- @column covered_ns BIGINT            Their summed duration (ns).
-- @order rank, pid, pattern
WITH ranges AS (
    SELECT rank, pid, tid, start_ns, end_ns, text
    FROM nvtx
    WHERE event_type <> 'mark'
        AND end_ns > start_ns
        AND text IS NOT NULL
),
edges AS (
    SELECT rank, pid, tid, start_ns AS t, 1 AS delta, start_ns, end_ns
    FROM ranges
    UNION ALL
    SELECT rank, pid, tid, end_ns, -1, NULL, NULL
    FROM ranges
),
outermost AS (
    -- ranges open on their thread when each starts: 1 = none around it (ends sort
    -- before starts at the same time, longer ranges start first)
    SELECT rank, pid, tid, start_ns, end_ns
    FROM (
        SELECT
            *,
            sum(delta) OVER (
                PARTITION BY rank, pid, tid
                ORDER BY t, delta, end_ns DESC
                ROWS UNBOUNDED PRECEDING
            ) AS depth
        FROM edges
    )
    WHERE delta = 1
        AND depth = 1
),
shaped AS (
    SELECT
        n.rank,
        n.pid,
        n.start_ns,
        n.end_ns,
        n.text,
        TRY_CAST(nullif(regexp_extract(n.text, '(\d+)\D*$', 1), '') AS BIGINT) AS number,
        regexp_replace(n.text, '\d+(\D*)$', '%\1') AS numbered_pattern
    FROM nvtx AS n
    SEMI JOIN outermost AS o
        ON o.rank = n.rank
        AND o.pid = n.pid
        AND o.tid = n.tid
        AND o.start_ns = n.start_ns
        AND o.end_ns = n.end_ns
    WHERE n.event_type <> 'mark'
        AND n.text IS NOT NULL
        AND coalesce(n.domain, '') NOT IN ('MPI', 'NCCL', 'CCCL', 'CUB', 'cuBLAS', 'cuBLASLt',
                                           'cuDNN', 'NVTX')
        AND NOT regexp_matches(n.text, '^(fwd|bwd|coll):|::|op_id =')
        AND n.text <> 'capture'
),
patterned AS (
    SELECT
        rank,
        pid,
        start_ns,
        end_ns,
        text,
        number,
        number IS NOT NULL AS numbered,
        CASE WHEN number IS NOT NULL THEN numbered_pattern ELSE text END AS pattern
    FROM shaped
),
ordered AS (
    SELECT
        *,
        lag(number) OVER w AS previous_number,
        lag(end_ns) OVER w AS previous_end_ns
    FROM patterned
    WHERE regexp_matches(pattern, '[A-Za-z]')
    WINDOW w AS (PARTITION BY rank, pid, pattern ORDER BY start_ns, end_ns, text)
)
SELECT
    rank,
    pid,
    pattern,
    bool_and(numbered) AS numbered,
    count(*) AS ranges,
    bool_and(previous_end_ns IS NULL OR (start_ns >= previous_end_ns
        AND (NOT numbered OR number = previous_number + 1))) AS consecutive,
    arg_min(text, (start_ns, end_ns, text)) AS first_text,
    sum(end_ns - start_ns)::BIGINT AS covered_ns
FROM ordered
GROUP BY rank, pid, pattern
ORDER BY rank, pid, pattern
