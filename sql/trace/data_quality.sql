-- One row per report: what nsyswrap left out of every figure or repaired while reading
-- it (the data_quality view): kernels whose times cannot be right, NVTX ranges without
-- text, strings that were not valid UTF-8.
-- @scope report
-- @reads data_quality
-- @column rank INTEGER                          Rank of the report.
-- @column capture_ns BIGINT                     Capture duration recorded by nsys, ns; NULL if absent.
-- @column kernels_captured BIGINT               CUDA kernel rows in the report (0: no CUDA kernels captured).
-- @column kernels_null_time BIGINT              Kernels left out: start or end is NULL.
-- @column kernels_end_before_start BIGINT       Kernels left out: end before start.
-- @column kernels_longer_than_capture BIGINT    Kernels left out: longer than the whole capture.
-- @column nvtx_ranges BIGINT                    NVTX push/pop and start/end ranges.
-- @column nvtx_ranges_without_text BIGINT       Of those, ranges with neither text nor a registered string.
-- @column strings_repaired BIGINT               Names and NVTX texts that were not valid UTF-8 (read with U+FFFD).
-- @order rank
SELECT
    rank,
    capture_ns,
    kernels_captured,
    kernels_null_time,
    kernels_end_before_start,
    kernels_longer_than_capture,
    nvtx_ranges,
    nvtx_ranges_without_text,
    strings_repaired
FROM data_quality
ORDER BY rank
