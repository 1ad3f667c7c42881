-- One row per idle gap: a maximal stretch of the window where no kernel, copy or memset
-- runs on any stream of the device (a zero-length kernel ends one gap and starts the
-- next), with its cause: other (the work ending the gap was launched before the GPU
-- went idle: it waited on something else), else sync (host synchronization calls cover
-- at least half the gap), host_bound (that work was launched only after the GPU went
-- idle) or unknown (no launch record).
-- @reads idle_gap_rows
-- @param min_gap_ns BIGINT = 0         Only gaps at least this long (ns).
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column step BIGINT                  Step containing the gap start (NULL outside steps).
-- @column start_ns BIGINT              Gap start: the GPU went idle (session clock ns).
-- @column end_ns BIGINT                Gap end: the next work started, or the window ended.
-- @column dur_ns BIGINT                Gap length (ns).
-- @column sync_ns BIGINT               Time inside the gap covered by host syncs (ns).
-- @column next_name VARCHAR            Name of the work that ends the gap.
-- @column next_launch_ns BIGINT        Start of its launch call (ns).
-- @column cause VARCHAR                host_bound, sync, other or unknown.
-- @scope report
-- @order rank, device, start_ns
SELECT
    rank,
    device,
    step,
    start_ns,
    end_ns,
    dur_ns,
    sync_ns,
    next_name,
    next_launch_ns,
    cause
FROM idle_gap_rows
WHERE dur_ns >= $min_gap_ns
ORDER BY rank, device, start_ns
