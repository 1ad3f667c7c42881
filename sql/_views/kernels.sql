-- One row per GPU activity on a stream of one report: a kernel, memcpy or memset.
-- Builds the `kernels` view from the raw KERNEL, MEMCPY and MEMSET tables.
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
WITH strings AS (
    SELECT id, value FROM raw_strings WHERE _proto = 0
),
named AS (
    SELECT
        k.*,
        coalesce(s.value, d.value) AS kname,
        d.value AS demangled
    FROM raw_kernel AS k
    LEFT JOIN strings AS s
        ON s.id = k.shortName
    LEFT JOIN strings AS d
        ON d.id = k.demangledName
    WHERE k._proto = 0
),
kernel_rows AS (
    SELECT
        pid_of(globalPid) AS pid,
        deviceId AS device,
        contextId AS context,
        streamId AS stream,
        start AS start_ns,
        "end" AS end_ns,
        "end" - start AS dur_ns,
        correlationId AS correlation_id,
        kname AS name,
        demangled,
        CASE
            WHEN kname IS NULL THEN 'other'
            WHEN lower(kname) LIKE 'nccl%' THEN 'nccl'
            ELSE 'compute'
        END AS kind,
        coalesce(lower(kname) LIKE 'nccl%', FALSE) AS is_comm,
        nullif(coalesce(
            nullif(regexp_extract(kname, '^nccl(?:Dev)?Kernel_([A-Za-z]+)', 1), ''),
            regexp_extract(
                kname,
                '^nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce'
                || '|SendRecv|AllToAll|Send|Recv)',
                1
            )
        ), '') AS coll_op,
        CAST(NULL AS BIGINT) AS bytes
    FROM named
),
copy_rows AS (
    SELECT
        pid_of(globalPid) AS pid,
        deviceId AS device,
        contextId AS context,
        streamId AS stream,
        start AS start_ns,
        "end" AS end_ns,
        "end" - start AS dur_ns,
        correlationId AS correlation_id,
        'memcpy ' || coalesce(copy_kind_name(copyKind), 'Unknown') AS name,
        CAST(NULL AS VARCHAR) AS demangled,
        'memcpy' AS kind,
        coalesce(copyKind = 10, FALSE) AS is_comm,
        CAST(NULL AS VARCHAR) AS coll_op,
        bytes
    FROM raw_memcpy
    WHERE _proto = 0
),
set_rows AS (
    SELECT
        pid_of(globalPid) AS pid,
        deviceId AS device,
        contextId AS context,
        streamId AS stream,
        start AS start_ns,
        "end" AS end_ns,
        "end" - start AS dur_ns,
        correlationId AS correlation_id,
        'memset' AS name,
        CAST(NULL AS VARCHAR) AS demangled,
        'memset' AS kind,
        FALSE AS is_comm,
        CAST(NULL AS VARCHAR) AS coll_op,
        bytes
    FROM raw_memset
    WHERE _proto = 0
)
SELECT * FROM kernel_rows
UNION ALL
SELECT * FROM copy_rows
UNION ALL
SELECT * FROM set_rows
