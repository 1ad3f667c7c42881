-- One row per GPU activity on a stream of one report: a kernel, memcpy or memset.
-- @include _macros
-- @reads raw_kernel, raw_strings, raw_analysis, memcpy, memset, api_calls, nvtx
-- Built from the raw KERNEL table and the already normalized memcpy, memset, api_calls
-- and nvtx. A kernel without a name string (its ids missing from StringIds: a damaged
-- or crafted export) keeps name NULL and takes its kind from what else identifies it:
-- NCCL when the latest NCCL range (domain NCCL, or text nccl...) begun on the thread that
-- launched it has not ended at the launch; else the kind of every named kernel of its
-- stream (all NCCL, or all compute); else of every named kernel of its process with its
-- grid and block shape. Without such evidence it is left out (counted by data_quality).
-- @column pid BIGINT              Process id, decoded from globalPid.
-- @column device BIGINT           CUDA device id of the activity.
-- @column context BIGINT          CUDA context id.
-- @column stream BIGINT           CUDA stream id (unique within pid and device).
-- @column start_ns BIGINT         Start, ns on the report's session clock.
-- @column end_ns BIGINT           End, ns on the report's session clock.
-- @column dur_ns BIGINT           end_ns - start_ns.
-- @column correlation_id BIGINT   CUPTI correlation id, unique within pid.
-- @column name VARCHAR            Kernel short name, or "memcpy <kind>" / "memset".
-- @column demangled VARCHAR       Demangled kernel name (NULL for copies and sets).
-- @column kind VARCHAR            compute, nccl, memcpy or memset.
-- @column is_comm BOOLEAN         NCCL kernel or peer-to-peer copy: communication.
-- @column coll_op VARCHAR         Collective parsed from an NCCL kernel name, else NULL.
-- @column bytes BIGINT            Bytes moved or set (NULL for kernels).
-- @column grid_x BIGINT           Kernel grid size in x, in blocks (NULL for copies and
--                                 sets, and where the export has no gridX).
-- @column grid_y BIGINT           Kernel grid size in y (as grid_x).
-- @column grid_z BIGINT           Kernel grid size in z (as grid_x).
-- @column block_x BIGINT          Kernel block size in x, in threads (as grid_x).
-- @column block_y BIGINT          Kernel block size in y (as grid_x).
-- @column block_z BIGINT          Kernel block size in z (as grid_x).
WITH strings AS (
    -- one value per id (a repeated id, counted by data_quality, must not multiply rows)
    SELECT id, min(value) AS value FROM raw_strings WHERE _proto = 0 GROUP BY id
),
kernel_names AS (
    -- name-derived columns, computed once per distinct string rather than per row
    SELECT
        id,
        value AS name,
        lower(value) LIKE 'nccl%' AS is_nccl,
        nullif(coalesce(
            nullif(regexp_extract(value, '^nccl(?:Dev)?Kernel_([A-Za-z]+)', 1), ''),
            regexp_extract(
                value,
                '^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce'
                || '|SendRecv|AllToAll|Send|Recv)',
                1
            )
        ), '') AS coll_op
    FROM strings
),
capture AS (
    SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
    FROM raw_analysis WHERE _proto = 0
),
kernel_rows AS NOT MATERIALIZED (
    -- read again by each reader, never held: held, a 1 M-kernel report's rows took
    -- ~250 MB of a worker's memory (DuckDB inlines it only while the capture's bounds
    -- are a CTE of their own, not a subquery inside it)
    SELECT
        pid_of(k.globalPid) AS pid,
        k.deviceId AS device,
        k.contextId AS context,
        k.streamId AS stream,
        k.start AS start_ns,
        k."end" AS end_ns,
        k."end" - k.start AS dur_ns,
        k.correlationId AS correlation_id,
        coalesce(s.name, d.name) AS name,
        d.name AS demangled,
        CASE
            WHEN coalesce(s.name, d.name) IS NULL THEN NULL
            WHEN coalesce(s.is_nccl, d.is_nccl) THEN 'nccl'
            ELSE 'compute'
        END AS kind,
        coalesce(s.is_nccl, d.is_nccl, FALSE) AS is_comm,
        coalesce(s.coll_op, d.coll_op) AS coll_op,
        CAST(NULL AS BIGINT) AS bytes,
        k.gridX AS grid_x,
        k.gridY AS grid_y,
        k.gridZ AS grid_z,
        k.blockX AS block_x,
        k.blockY AS block_y,
        k.blockZ AS block_z
    FROM raw_kernel AS k
    LEFT JOIN kernel_names AS s
        ON s.id = k.shortName
    LEFT JOIN kernel_names AS d
        ON d.id = k.demangledName
    CROSS JOIN capture AS c
    WHERE k._proto = 0
        -- kernels whose times cannot be right or without a device are counted by
        -- data_quality instead
        AND event_defect(k.start, k."end", k._not_integer, c.ns, c.end_ns) IS NULL
        AND k.deviceId IS NOT NULL
),
unnamed AS (
    SELECT * FROM kernel_rows WHERE kind IS NULL
),
in_nccl_range AS (
    -- unnamed kernels launched inside an NCCL range of the launching thread
    SELECT DISTINCT a.pid, a.correlation_id
    FROM (
        SELECT a.pid, a.tid, a.start_ns, a.correlation_id
        FROM api_calls AS a
        SEMI JOIN unnamed AS u
            ON u.pid = a.pid
            AND u.correlation_id = a.correlation_id
    ) AS a
    ASOF JOIN (
        SELECT pid, tid, start_ns, end_ns
        FROM nvtx
        WHERE event_type <> 'mark'
            AND (domain = 'NCCL' OR lower(text) LIKE 'nccl%')
    ) AS r
        ON r.pid = a.pid
        AND r.tid = a.tid
        AND a.start_ns >= r.start_ns
    WHERE a.start_ns < r.end_ns
),
by_stream AS (
    -- the kind of every named kernel of a stream, where they all have one
    SELECT pid, device, stream, min(kind) AS kind
    FROM kernel_rows
    WHERE kind IS NOT NULL
    GROUP BY pid, device, stream
    HAVING min(kind) = max(kind)
),
by_shape AS (
    -- the kind of every named kernel of a process with one grid and block shape
    SELECT pid, grid_x, grid_y, grid_z, block_x, block_y, block_z, min(kind) AS kind
    FROM kernel_rows
    WHERE kind IS NOT NULL
    GROUP BY pid, grid_x, grid_y, grid_z, block_x, block_y, block_z
    HAVING min(kind) = max(kind)
),
classified AS (
    SELECT
        u.* REPLACE (
            CASE WHEN n.pid IS NOT NULL THEN 'nccl' ELSE coalesce(st.kind, sh.kind) END AS kind,
            n.pid IS NOT NULL OR coalesce(st.kind, sh.kind) = 'nccl' AS is_comm
        )
    FROM unnamed AS u
    LEFT JOIN in_nccl_range AS n
        ON n.pid = u.pid
        AND n.correlation_id = u.correlation_id
    LEFT JOIN by_stream AS st
        ON st.pid = u.pid
        AND st.device = u.device
        AND st.stream = u.stream
    LEFT JOIN by_shape AS sh
        ON sh.pid = u.pid
        AND sh.grid_x IS NOT DISTINCT FROM u.grid_x
        AND sh.grid_y IS NOT DISTINCT FROM u.grid_y
        AND sh.grid_z IS NOT DISTINCT FROM u.grid_z
        AND sh.block_x IS NOT DISTINCT FROM u.block_x
        AND sh.block_y IS NOT DISTINCT FROM u.block_y
        AND sh.block_z IS NOT DISTINCT FROM u.block_z
    WHERE n.pid IS NOT NULL OR st.kind IS NOT NULL OR sh.kind IS NOT NULL
)
SELECT * FROM kernel_rows WHERE kind IS NOT NULL
UNION ALL
SELECT * FROM classified
UNION ALL
SELECT
    pid, device, context, stream, start_ns, end_ns, dur_ns, correlation_id,
    'memcpy ' || copy_kind AS name,
    CAST(NULL AS VARCHAR) AS demangled,
    'memcpy' AS kind,
    copy_kind = 'PtoP' AS is_comm,
    CAST(NULL AS VARCHAR) AS coll_op,
    bytes,
    NULL, NULL, NULL, NULL, NULL, NULL
FROM memcpy
UNION ALL
SELECT
    pid, device, context, stream, start_ns, end_ns, dur_ns, correlation_id,
    'memset' AS name,
    CAST(NULL AS VARCHAR) AS demangled,
    'memset' AS kind,
    FALSE AS is_comm,
    CAST(NULL AS VARCHAR) AS coll_op,
    bytes,
    NULL, NULL, NULL, NULL, NULL, NULL
FROM memset
