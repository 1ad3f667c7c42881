-- One row per report: what nsyswrap left out of every figure or repaired while reading it.
-- @include _macros
-- @reads raw_analysis, raw_kernel, raw_memcpy, raw_memset, raw_sync, raw_runtime, raw_osrt,
-- @reads raw_gpu_memory, raw_nvtx, raw_strings, kernels
-- Events whose times cannot be right (event_defect in _macros.sql: no time, end before
-- start, longer than the capture, before the session start or after the capture's end,
-- a time or place that is not a whole number) and GPU activities without a device are left
-- out of their views and counted here; NVTX ranges without text are kept (text NULL) and
-- counted; kernels without a name string are counted with the kind the kernels view found
-- for them (those it found none for are left out of it).
-- @column capture_ns BIGINT                       Capture duration recorded by nsys (ANALYSIS_DETAILS), ns; NULL if absent.
-- @column kernels_captured BIGINT                 CUDA kernel rows in the report (0: no CUDA kernels captured).
-- @column kernels_null_time BIGINT                Kernels left out: start or end is NULL.
-- @column kernels_end_before_start BIGINT         Kernels left out: end before start.
-- @column kernels_longer_than_capture BIGINT      Kernels left out: longer than the whole capture.
-- @column kernels_outside_capture BIGINT          Kernels left out: starting before the session start (time 0) or ending after the capture's end.
-- @column kernels_not_integer BIGINT              Kernels left out: a time, device, context, stream or process column holds no whole number (text, a fraction).
-- @column kernels_no_device BIGINT                Kernels left out: no device (deviceId NULL).
-- @column events_left_out BIGINT                  Other events left out for the same reasons: copies, memsets, synchronizations, CUDA API calls, OS runtime calls, GPU memory events, NVTX ranges and marks.
-- @column nvtx_ranges BIGINT                      NVTX push/pop and start/end ranges.
-- @column nvtx_ranges_without_text BIGINT         Of those, ranges with neither text nor a registered string.
-- @column strings_repaired BIGINT                 Names and NVTX texts that were not valid UTF-8, read with U+FFFD replacement characters.
-- @column string_ids_repeated BIGINT              StringIds rows whose id an earlier row has (a crafted or damaged export); each id keeps its smallest value.
-- @column kernels_unnamed BIGINT                  Kernels (times and device sound) without a name string: their ids are missing from StringIds.
-- @column kernels_unnamed_nccl BIGINT             Of those, taken as NCCL kernels (the NCCL range around their launch, their stream or their shape).
-- @column kernels_unnamed_compute BIGINT          Of those, taken as compute kernels (their stream or their shape); the rest are left out.
-- Each streamed raw table is scanned once (one aggregate per table).
WITH capture AS (
    SELECT max(duration) AS ns, capture_end(max(duration), max(stopTime)) AS end_ns
    FROM raw_analysis
    WHERE _proto = 0
),
named AS (
    -- the ids with a name (as the kernels view reads StringIds)
    SELECT id FROM raw_strings WHERE _proto = 0 GROUP BY id HAVING max(value) IS NOT NULL
),
kernel_defects AS (
    SELECT
        CASE WHEN event_defect(k.start, k."end", k._not_integer, c.ns, c.end_ns) IS NULL
             AND k.deviceId IS NULL THEN 'no_device'
             ELSE event_defect(k.start, k."end", k._not_integer, c.ns, c.end_ns) END AS defect,
        s.id IS NULL AND d.id IS NULL AS unnamed
    FROM raw_kernel AS k
    CROSS JOIN capture AS c
    LEFT JOIN named AS s
        ON s.id = k.shortName
    LEFT JOIN named AS d
        ON d.id = k.demangledName
    WHERE k._proto = 0
),
kernel_counts AS (
    SELECT
        count(*) AS captured,
        count(*) FILTER (WHERE defect = 'null_time') AS null_time,
        count(*) FILTER (WHERE defect = 'end_before_start') AS end_before_start,
        count(*) FILTER (WHERE defect = 'longer_than_capture') AS longer_than_capture,
        count(*) FILTER (WHERE defect = 'outside_capture') AS outside_capture,
        count(*) FILTER (WHERE defect = 'not_integer') AS not_integer,
        count(*) FILTER (WHERE defect = 'no_device') AS no_device,
        count(*) FILTER (WHERE defect IS NULL AND unnamed) AS unnamed
    FROM kernel_defects
),
unnamed_kinds AS (
    SELECT
        count(*) FILTER (WHERE kind = 'nccl') AS nccl,
        count(*) FILTER (WHERE kind = 'compute') AS compute
    FROM kernels
    WHERE name IS NULL
        AND kind IN ('nccl', 'compute')
),
device_events AS (  -- copies and memsets (the kernels view's other rows) need a device too
    SELECT start, "end", _not_integer, deviceId IS NULL AS no_device FROM raw_memcpy WHERE _proto = 0
    UNION ALL
    SELECT start, "end", _not_integer, deviceId IS NULL FROM raw_memset WHERE _proto = 0
    UNION ALL
    SELECT start, "end", _not_integer, FALSE FROM raw_sync WHERE _proto = 0
    UNION ALL
    SELECT start, "end", _not_integer, FALSE FROM raw_runtime WHERE _proto = 0
    UNION ALL
    SELECT start, "end", _not_integer, FALSE FROM raw_osrt WHERE _proto = 0 AND eventClass = 27
    UNION ALL
    SELECT start, start, _not_integer, FALSE FROM raw_gpu_memory WHERE _proto = 0
),
other_counts AS (
    SELECT count(*) FILTER (
        WHERE e.no_device OR event_defect(e.start, e."end", e._not_integer, c.ns, c.end_ns) IS NOT NULL
    ) AS left_out
    FROM device_events AS e
    CROSS JOIN capture AS c
),
nvtx_counts AS (
    SELECT
        count(*) FILTER (WHERE eventType IN (59, 60, 70, 71)) AS ranges,
        count(*) FILTER (WHERE eventType IN (59, 60, 70, 71) AND text IS NULL AND textId IS NULL) AS without_text,
        count(*) FILTER (WHERE contains(text, chr(65533))) AS repaired,
        count(*) FILTER (
            WHERE eventType IN (34, 59, 60, 70, 71)
                AND event_defect(start, coalesce("end", start), _not_integer, c.ns, c.end_ns) IS NOT NULL
        ) AS left_out
    FROM raw_nvtx
    CROSS JOIN capture AS c
    WHERE _proto = 0
),
string_counts AS (
    SELECT
        count(*) FILTER (WHERE contains(value, chr(65533))) AS repaired,
        count(id) - count(DISTINCT id) AS repeated
    FROM raw_strings
    WHERE _proto = 0
)
SELECT
    c.ns AS capture_ns,
    k.captured AS kernels_captured,
    k.null_time AS kernels_null_time,
    k.end_before_start AS kernels_end_before_start,
    k.longer_than_capture AS kernels_longer_than_capture,
    k.outside_capture AS kernels_outside_capture,
    k.not_integer AS kernels_not_integer,
    k.no_device AS kernels_no_device,
    o.left_out + n.left_out AS events_left_out,
    n.ranges AS nvtx_ranges,
    n.without_text AS nvtx_ranges_without_text,
    n.repaired + s.repaired AS strings_repaired,
    s.repeated AS string_ids_repeated,
    k.unnamed AS kernels_unnamed,
    u.nccl AS kernels_unnamed_nccl,
    u.compute AS kernels_unnamed_compute
FROM capture AS c, kernel_counts AS k, other_counts AS o, nvtx_counts AS n, string_counts AS s,
    unnamed_kinds AS u
