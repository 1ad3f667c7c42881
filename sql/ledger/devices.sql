-- One row per (rank, device): where the analysed window's time went, exact to the ns.
-- compute_only + comm_only + both + copy_only + idle = span. Communication is NCCL
-- kernels and peer-to-peer copies, copy is any other memcpy/memset, compute is every
-- other kernel; all streams of the device count, busy times are unions, not sums.
-- @reads window_unions, device_windows
-- @column rank INTEGER                 Rank of the report.
-- @column device BIGINT                CUDA device id.
-- @column window_source VARCHAR        activity (first to last GPU work), nvtx, steps
--                                      or nvtx+steps.
-- @column window_start_ns BIGINT       Window start, ns on the report's session clock.
-- @column window_end_ns BIGINT         Window end, ns.
-- @column span_ns BIGINT               window_end_ns - window_start_ns.
-- @column compute_only_ns BIGINT       Compute runs, communication does not (ns).
-- @column comm_only_ns BIGINT          Communication runs, compute does not (ns).
-- @column both_ns BIGINT               Compute and communication both run (ns).
-- @column copy_only_ns BIGINT          Only copies/memsets run (ns).
-- @column idle_ns BIGINT               Nothing runs on any stream of the device (ns).
-- @column compute_busy_ns BIGINT       Union of compute kernels (ns).
-- @column comm_busy_ns BIGINT          Union of communication (ns).
-- @column copy_busy_ns BIGINT          Union of copies and memsets (ns).
-- @column exposed_comm_ns BIGINT       Communication not hidden behind compute
--                                      (= comm_only_ns).
-- @column overlap_ratio DOUBLE         both_ns / comm_busy_ns (NULL without comm).
-- @column compute_sum_ns BIGINT        Summed compute kernel time in the window (ns).
-- @column comm_sum_ns BIGINT           Summed communication time in the window (ns).
-- @column copy_sum_ns BIGINT           Summed copy and memset time in the window (ns).
-- @column naive_overlap_ratio DOUBLE   (compute_sum + comm_sum - span) / comm_sum: the
--                                      common lower-bound estimate, for comparison.
-- @column compute_kernels BIGINT       Compute kernels overlapping the window.
-- @column comm_kernels BIGINT          Communication kernels and P2P copies overlapping it.
-- @column copies BIGINT                Other copies and memsets overlapping it.
-- @column busy_before_ns BIGINT        Union of every activity before the window's start:
--                                      how long the GPU was busy before it (ns; the
--                                      wall time before it is window_start_ns less the
--                                      device's first activity).
-- @column busy_after_ns BIGINT         The same after the window's end (ns).
-- @scope report
-- @order rank, device
WITH win AS (
    SELECT * FROM device_windows
),
unions AS (
    SELECT * FROM window_unions
),
ledger AS (
    -- from the union lengths: both = |C| + |M| - |C u M|, copy only = |all| - |C u M|
    SELECT
        rank,
        device,
        cm_ns - m_ns AS compute_only_ns,
        cm_ns - c_ns AS comm_only_ns,
        c_ns + m_ns - cm_ns AS both_ns,
        a_ns - cm_ns AS copy_only_ns,
        a_ns AS busy_ns,
        c_ns AS compute_busy_ns,
        m_ns AS comm_busy_ns,
        p_ns AS copy_busy_ns,
        compute_sum_ns,
        comm_sum_ns,
        copy_sum_ns,
        compute_kernels,
        comm_kernels,
        copies,
        a_before_ns,
        a_after_ns
    FROM unions
),
joined AS (
    SELECT
        w.rank,
        w.device,
        w.window_source,
        w.window_start_ns,
        w.window_end_ns,
        w.window_end_ns - w.window_start_ns AS span_ns,
        coalesce(l.compute_only_ns, 0)::BIGINT AS compute_only_ns,
        coalesce(l.comm_only_ns, 0)::BIGINT AS comm_only_ns,
        coalesce(l.both_ns, 0)::BIGINT AS both_ns,
        coalesce(l.copy_only_ns, 0)::BIGINT AS copy_only_ns,
        (w.window_end_ns - w.window_start_ns - coalesce(l.busy_ns, 0))::BIGINT AS idle_ns,
        coalesce(l.compute_busy_ns, 0)::BIGINT AS compute_busy_ns,
        coalesce(l.comm_busy_ns, 0)::BIGINT AS comm_busy_ns,
        coalesce(l.copy_busy_ns, 0)::BIGINT AS copy_busy_ns,
        coalesce(l.compute_sum_ns, 0)::BIGINT AS compute_sum_ns,
        coalesce(l.comm_sum_ns, 0)::BIGINT AS comm_sum_ns,
        coalesce(l.copy_sum_ns, 0)::BIGINT AS copy_sum_ns,
        coalesce(l.compute_kernels, 0) AS compute_kernels,
        coalesce(l.comm_kernels, 0) AS comm_kernels,
        coalesce(l.copies, 0) AS copies,
        coalesce(l.a_before_ns, 0)::BIGINT AS busy_before_ns,
        coalesce(l.a_after_ns, 0)::BIGINT AS busy_after_ns
    FROM win AS w
    LEFT JOIN ledger AS l
        ON l.rank = w.rank
        AND l.device = w.device
)
SELECT
    rank,
    device,
    window_source,
    window_start_ns,
    window_end_ns,
    span_ns,
    compute_only_ns,
    comm_only_ns,
    both_ns,
    copy_only_ns,
    idle_ns,
    compute_busy_ns,
    comm_busy_ns,
    copy_busy_ns,
    comm_only_ns AS exposed_comm_ns,
    both_ns / nullif(comm_busy_ns, 0) AS overlap_ratio,
    compute_sum_ns,
    comm_sum_ns,
    copy_sum_ns,
    (compute_sum_ns + comm_sum_ns - span_ns) / nullif(comm_sum_ns, 0) AS naive_overlap_ratio,
    compute_kernels,
    comm_kernels,
    copies,
    busy_before_ns,
    busy_after_ns
FROM joined
ORDER BY rank, device
