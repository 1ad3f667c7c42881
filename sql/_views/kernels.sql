-- One row per GPU activity on a stream of one report: a kernel, memcpy or memset.
-- @include _macros
-- @reads raw_kernel, raw_strings, raw_analysis, memcpy, memset
-- Built from the raw KERNEL table and the already normalized memcpy and memset.
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
-- @column kind VARCHAR            compute, nccl, memcpy, memset, or other (unnamed kernel).
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
kernel_rows AS (
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
            WHEN coalesce(s.name, d.name) IS NULL THEN 'other'
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
    CROSS JOIN (
        SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
        FROM raw_analysis WHERE _proto = 0
    ) AS c
    WHERE k._proto = 0
        -- kernels whose times cannot be right or without a device are counted by
        -- data_quality instead
        AND event_defect(k.start, k."end", k._not_integer, c.ns, c.end_ns) IS NULL
        AND k.deviceId IS NOT NULL
)
SELECT * FROM kernel_rows
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
