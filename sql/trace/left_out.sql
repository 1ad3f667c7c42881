-- One row per report: what else nsyswrap left out of every figure while reading it (the
-- data_quality view), beyond the kernels trace.data_quality counts: kernels outside the
-- capture, with a time or place that is not a whole number, or without a device; other
-- events left out; repeated string ids; kernels without a name string, with the kind found
-- for them (see the kernels view) or left out.
-- @scope report
-- @reads data_quality
-- @column rank INTEGER                     Rank of the report.
-- @column kernels_outside_capture BIGINT   Kernels left out: starting before the session start or ending after the capture's end.
-- @column kernels_not_integer BIGINT       Kernels left out: a time, device, context, stream or process that is not a whole number.
-- @column kernels_no_device BIGINT         Kernels left out: no device.
-- @column events_left_out BIGINT           Copies, memsets, synchronizations, CUDA API calls and NVTX events left out for those reasons or a time that cannot be right.
-- @column string_ids_repeated BIGINT       StringIds rows repeating an earlier id (each id keeps its smallest value).
-- @column kernels_unnamed BIGINT           Kernels without a name string (ids missing from StringIds).
-- @column kernels_unnamed_nccl BIGINT      Of those, taken as NCCL (the NCCL range of their launch, their stream or shape).
-- @column kernels_unnamed_compute BIGINT   Of those, taken as compute (their stream or shape); the others are left out.
-- @order rank
SELECT
    rank,
    kernels_outside_capture,
    kernels_not_integer,
    kernels_no_device,
    events_left_out,
    string_ids_repeated,
    kernels_unnamed,
    kernels_unnamed_nccl,
    kernels_unnamed_compute
FROM data_quality
ORDER BY rank
