-- One row per (rank, device, cause) of the idle gaps in the window (gaps.idle with
-- min_gap_ns = 0): how many, their summed and their longest duration.
-- @scope report
-- @reads idle_gap_rows
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column cause VARCHAR                host_bound, sync, other or unknown (see gaps.idle).
-- @column gaps BIGINT                  Idle gaps of this cause.
-- @column dur_ns BIGINT                Their summed duration (ns).
-- @column longest_ns BIGINT            The longest of them (ns).
-- @order rank, device, cause
SELECT
    rank,
    device,
    cause,
    count(*) AS gaps,
    sum(dur_ns)::BIGINT AS dur_ns,
    max(dur_ns) AS longest_ns
FROM idle_gap_rows
GROUP BY rank, device, cause
ORDER BY rank, device, cause
