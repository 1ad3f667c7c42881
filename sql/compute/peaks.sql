-- One row per GPU model of the peak table: its peak dense TFLOP/s per data type and the
-- datasheet it comes from (the denominator of MFU, compute.mfu). A GPU is found by the
-- name nsys exports (devices.name): the first row, by priority, whose pattern (a
-- case-insensitive regular expression) matches it. The same for every run.
-- @scope run
-- @include gpu_peaks
-- @column priority INTEGER       Rows are tried in this order.
-- @column gpu VARCHAR            GPU model.
-- @column pattern VARCHAR        Regular expression over the lower-case exported name.
-- @column fp32 DOUBLE            FP32 on CUDA cores (TFLOP/s).
-- @column tf32 DOUBLE            TF32 tensor cores, dense (TFLOP/s).
-- @column bf16 DOUBLE            BF16 tensor cores, dense (TFLOP/s).
-- @column fp16 DOUBLE            FP16 tensor cores, dense (TFLOP/s).
-- @column fp8 DOUBLE             FP8 tensor cores, dense (TFLOP/s); NULL: none.
-- @column source VARCHAR         Where the figures come from.
SELECT
    priority,
    gpu,
    pattern,
    fp32::DOUBLE AS fp32,
    tf32::DOUBLE AS tf32,
    bf16::DOUBLE AS bf16,
    fp16::DOUBLE AS fp16,
    fp8::DOUBLE AS fp8,
    source
FROM gpu_peaks()
ORDER BY priority
