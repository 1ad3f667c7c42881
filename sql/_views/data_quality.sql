-- One row per report: what nsyswrap left out of every figure or repaired while reading it.
-- @include _macros
-- @reads raw_analysis, raw_kernel, raw_nvtx, raw_strings
-- Kernels whose times cannot be right (kernel_defect in _macros.sql) are left out of the
-- kernels view and counted here; NVTX ranges without text are kept (text NULL) and counted.
-- @column capture_ns BIGINT                       Capture duration recorded by nsys (ANALYSIS_DETAILS), ns; NULL if absent.
-- @column kernels_captured BIGINT                 CUDA kernel rows in the report (0: no CUDA kernels captured).
-- @column kernels_null_time BIGINT                Kernels left out: start or end is NULL.
-- @column kernels_end_before_start BIGINT         Kernels left out: end before start.
-- @column kernels_longer_than_capture BIGINT      Kernels left out: longer than the whole capture.
-- @column nvtx_ranges BIGINT                      NVTX push/pop and start/end ranges.
-- @column nvtx_ranges_without_text BIGINT         Of those, ranges with neither text nor a registered string.
-- @column strings_repaired BIGINT                 Names and NVTX texts that were not valid UTF-8, read with U+FFFD replacement characters.
-- Each streamed raw table is scanned once (one aggregate per table).
WITH capture AS (
    SELECT max(duration) AS ns FROM raw_analysis WHERE _proto = 0
),
kernel_counts AS (
    SELECT
        count(*) AS captured,
        count(*) FILTER (WHERE kernel_defect(k.start, k."end", c.ns) = 'null_time') AS null_time,
        count(*) FILTER (WHERE kernel_defect(k.start, k."end", c.ns) = 'end_before_start') AS end_before_start,
        count(*) FILTER (WHERE kernel_defect(k.start, k."end", c.ns) = 'longer_than_capture') AS longer_than_capture
    FROM raw_kernel AS k
    CROSS JOIN capture AS c
    WHERE k._proto = 0
),
nvtx_counts AS (
    SELECT
        count(*) FILTER (WHERE eventType IN (59, 60, 70, 71)) AS ranges,
        count(*) FILTER (WHERE eventType IN (59, 60, 70, 71) AND text IS NULL AND textId IS NULL) AS without_text,
        count(*) FILTER (WHERE contains(text, chr(65533))) AS repaired
    FROM raw_nvtx
    WHERE _proto = 0
),
string_counts AS (
    SELECT count(*) FILTER (WHERE contains(value, chr(65533))) AS repaired
    FROM raw_strings
    WHERE _proto = 0
)
SELECT
    c.ns AS capture_ns,
    k.captured AS kernels_captured,
    k.null_time AS kernels_null_time,
    k.end_before_start AS kernels_end_before_start,
    k.longer_than_capture AS kernels_longer_than_capture,
    n.ranges AS nvtx_ranges,
    n.without_text AS nvtx_ranges_without_text,
    n.repaired + s.repaired AS strings_repaired
FROM capture AS c, kernel_counts AS k, nvtx_counts AS n, string_counts AS s
