-- Per (rank, device) with a window: the union lengths over it, compute (c), comm (m), copy
-- (p), compute or comm (cm), any activity (a), each covered_X(window end) -
-- covered_X(window start) looked up in device_timeline at the two edges; and the summed
-- time and count of each set's activities overlapping the window (clipped to it;
-- zero-length ones in it count). Computed in Python (nsyswrap.device_timeline); this
-- body only types it.
-- @reads device_timeline, device_windows
-- @param window_nvtx VARCHAR = NULL    Limit the window to NVTX ranges LIKE this text.
-- @param step_pattern VARCHAR = step:%  LIKE pattern of the step ranges.
-- @param step_from BIGINT = NULL       Limit the window to steps >= this number.
-- @param step_to BIGINT = NULL         Limit the window to steps < this number.
-- @column device             BIGINT   CUDA device id.
-- @column c_ns               BIGINT   Union of compute in the window (ns).
-- @column m_ns               BIGINT   Union of communication (ns).
-- @column p_ns               BIGINT   Union of copies (ns).
-- @column cm_ns              BIGINT   Union of compute and communication (ns).
-- @column a_ns               BIGINT   Union of every activity (ns).
-- @column compute_sum_ns     BIGINT   Summed compute time in the window, each activity clipped to it (ns).
-- @column comm_sum_ns        BIGINT   Summed communication time in the window (ns).
-- @column copy_sum_ns        BIGINT   Summed copy and memset time in the window (ns).
-- @column compute_kernels    BIGINT   Compute kernels overlapping the window.
-- @column comm_kernels       BIGINT   Communication kernels and P2P copies overlapping it.
-- @column copies             BIGINT   Other copies and memsets overlapping it.
SELECT
    CAST(NULL AS BIGINT) AS device,
    CAST(NULL AS BIGINT) AS c_ns,
    CAST(NULL AS BIGINT) AS m_ns,
    CAST(NULL AS BIGINT) AS p_ns,
    CAST(NULL AS BIGINT) AS cm_ns,
    CAST(NULL AS BIGINT) AS a_ns,
    CAST(NULL AS BIGINT) AS compute_sum_ns,
    CAST(NULL AS BIGINT) AS comm_sum_ns,
    CAST(NULL AS BIGINT) AS copy_sum_ns,
    CAST(NULL AS BIGINT) AS compute_kernels,
    CAST(NULL AS BIGINT) AS comm_kernels,
    CAST(NULL AS BIGINT) AS copies
WHERE FALSE
