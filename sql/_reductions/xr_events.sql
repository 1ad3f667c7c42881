-- One row per event of one rank's trace: an NVTX range (not a mark), a GPU activity
-- (kernel, copy, set) or a CUDA API call, with what the timeline shows of it (its
-- thread's name, a kernel's grid and block, a copy's bytes, a collective range's op,
-- group and sequence number, a launch's correlation id). Rows are stored longest first
-- for the rank's 100000 longest events (crossrank.trace_events' default max_events),
-- then by start: reading the longest N (dur_rank <= N) or a time window (start_ns,
-- end_ns) skips the other row groups. Times are session ns.
-- @reads nvtx, kernels, api_calls, collectives, threads
-- @column source VARCHAR          nvtx (an NVTX range), gpu (a GPU activity) or api (a CUDA
--                                 runtime or driver call).
-- @column pid BIGINT              Process of the range, activity or call.
-- @column tid BIGINT              Thread of an NVTX range (its opening thread) or call (NULL
--                                 for gpu).
-- @column thread_name VARCHAR     That thread's name (threads view; NULL: none recorded).
-- @column device BIGINT           Device of a GPU activity (NULL otherwise).
-- @column stream BIGINT           Stream of a GPU activity (NULL otherwise).
-- @column name VARCHAR            Range text, kernel name or API name.
-- @column category VARCHAR        nvtx, cuda_api, or the activity's kernels.kind.
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           start_ns + dur_ns (ns).
-- @column dur_ns BIGINT           Duration (ns).
-- @column correlation_id BIGINT   CUPTI correlation id of an activity or call (NULL for nvtx).
-- @column domain VARCHAR          NVTX domain of a range (NULL otherwise).
-- @column grid VARCHAR            A kernel's grid, `x,y,z` blocks (NULL otherwise).
-- @column block VARCHAR           A kernel's block, `x,y,z` threads (NULL otherwise).
-- @column bytes BIGINT            Bytes of a copy or set, or of a collective range.
-- @column op VARCHAR              A collective range's op (collectives view; else NULL).
-- @column dtype VARCHAR           A collective range's dtype.
-- @column pg VARCHAR              A collective range's process group.
-- @column seq BIGINT              A collective range's sequence number in its group.
-- @column dur_rank BIGINT         1 + the rank's events that are longer (ties share
--                                 it; NULL durations come last).
WITH collective_ranges AS (
    -- One per range: a repeated range (same thread and times) keeps its lowest seq.
    SELECT
        pid,
        tid,
        start_ns,
        end_ns,
        arg_min(op, seq) AS op,
        arg_min(bytes, seq) AS bytes,
        arg_min(dtype, seq) AS dtype,
        arg_min(pg, seq) AS pg,
        min(seq) AS seq
    FROM collectives
    GROUP BY pid, tid, start_ns, end_ns
),
events AS (
    SELECT
        'nvtx' AS source,
        n.pid,
        n.tid,
        CAST(NULL AS BIGINT) AS device,
        CAST(NULL AS BIGINT) AS stream,
        n.text AS name,
        'nvtx' AS category,
        n.start_ns,
        n.dur_ns,
        CAST(NULL AS BIGINT) AS correlation_id,
        n.domain,
        CAST(NULL AS VARCHAR) AS grid,
        CAST(NULL AS VARCHAR) AS block,
        c.bytes,
        c.op,
        c.dtype,
        c.pg,
        c.seq
    FROM nvtx AS n
    LEFT JOIN collective_ranges AS c
        ON c.pid = n.pid
        AND c.tid = n.tid
        AND c.start_ns = n.start_ns
        AND c.end_ns = n.end_ns
    WHERE n.event_type <> 'mark'
    UNION ALL
    SELECT
        'gpu', pid, NULL, device, stream, name, kind, start_ns, dur_ns, correlation_id, NULL,
        CASE WHEN grid_x IS NOT NULL THEN grid_x || ',' || grid_y || ',' || grid_z END,
        CASE WHEN block_x IS NOT NULL THEN block_x || ',' || block_y || ',' || block_z END,
        bytes, NULL, NULL, NULL, NULL
    FROM kernels
    UNION ALL
    SELECT
        'api', pid, tid, NULL, NULL, api, 'cuda_api', start_ns, dur_ns, correlation_id, NULL,
        NULL, NULL, NULL, NULL, NULL, NULL, NULL
    FROM api_calls
),
ranked AS (
    SELECT
        e.source,
        e.pid,
        e.tid,
        t.name AS thread_name,
        e.device,
        e.stream,
        e.name,
        e.category,
        e.start_ns,
        e.start_ns + e.dur_ns AS end_ns,
        e.dur_ns,
        e.correlation_id,
        e.domain,
        e.grid,
        e.block,
        e.bytes,
        e.op,
        e.dtype,
        e.pg,
        e.seq,
        rank() OVER (ORDER BY e.dur_ns DESC NULLS LAST) AS dur_rank
    FROM events AS e
    LEFT JOIN threads AS t
        ON t.pid = e.pid
        AND t.tid = e.tid
)
SELECT *
FROM ranked
ORDER BY
    CASE WHEN dur_rank <= 100000 THEN dur_rank END NULLS LAST,
    start_ns
