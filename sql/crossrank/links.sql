-- One row per link between two hosts: the bus bandwidth of the matched collectives across
-- it, against the same run's inside a host and a documented expectation, and what the
-- replay saves with its transfers at its healthy bandwidth (nsyswrap.crossrank.links).
-- A pair's bus bandwidth is that of its collectives of at least 1 MiB (else all), weighted
-- by their transfer times; inside a host: the median over the hosts. Healthy: the larger
-- of the expectation (25 GB/s, InfiniBand HDR's 200 Gb/s per GPU) and the median of the
-- other links between hosts, at most the bandwidth inside a host; slow: below half of it
-- (a link with no collective of 1 MiB or more is latency-bound: never slow).
-- The saving is per step of the window, replayed as crossrank.whatif replays (its step
-- time, its window), largest first.
-- @scope run
-- @reads xr_links, xr_whatif
-- @column host_a VARCHAR            One host (the lower name).
-- @column host_b VARCHAR            The other.
-- @column collectives BIGINT        Matched collectives across the two hosts.
-- @column busbw_gb_per_s DOUBLE     Their bus bandwidth (GB/s; NULL: no bytes recorded).
-- @column inside_gb_per_s DOUBLE    The run's bus bandwidth inside a host (GB/s; NULL:
--                                   no collective inside one host).
-- @column expected_gb_per_s DOUBLE  A healthy link between hosts gives at least this
--                                   (GB/s).
-- @column healthy_gb_per_s DOUBLE   The link's healthy bandwidth (GB/s).
-- @column slow BOOLEAN              Below half its healthy bandwidth.
-- @column steps_in_window BIGINT    Steps replayed.
-- @column gain_ns_per_step DOUBLE   Step time saved with the link at its healthy
--                                   bandwidth, mean over the window's steps (ns).
-- @column gain_pct DOUBLE           That, in % of the mean replayed step time.
WITH win AS (
    SELECT *
    FROM xr_links
    WHERE ($step_from IS NULL OR step >= $step_from)
        AND ($step_to IS NULL OR step < $step_to)
),
steps AS (
    SELECT DISTINCT step, replayed_ns
    FROM xr_whatif
    WHERE ($step_from IS NULL OR step >= $step_from)
        AND ($step_to IS NULL OR step < $step_to)
)
SELECT
    host_a,
    host_b,
    any_value(collectives) AS collectives,
    any_value(busbw_gb_per_s) AS busbw_gb_per_s,
    any_value(inside_gb_per_s) AS inside_gb_per_s,
    any_value(expected_gb_per_s) AS expected_gb_per_s,
    any_value(healthy_gb_per_s) AS healthy_gb_per_s,
    bool_or(slow) AS slow,
    count(*) AS steps_in_window,
    avg(gain_ns) AS gain_ns_per_step,
    100 * sum(gain_ns) / nullif((SELECT sum(replayed_ns) FROM steps), 0) AS gain_pct
FROM win
GROUP BY host_a, host_b
ORDER BY gain_ns_per_step DESC, host_a, host_b
