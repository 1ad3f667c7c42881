-- Union lengths per (rank, device) over the window: compute (c), comm (m), copy (p),
-- compute or comm (cm), any activity (a), read off device_sweep's window edges.
-- @reads device_sweep
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
SELECT
    rank,
    device,
    (arg_max(covered_c, t) - arg_min(covered_c, t))::BIGINT AS c_ns,
    (arg_max(covered_m, t) - arg_min(covered_m, t))::BIGINT AS m_ns,
    (arg_max(covered_p, t) - arg_min(covered_p, t))::BIGINT AS p_ns,
    (arg_max(covered_cm, t) - arg_min(covered_cm, t))::BIGINT AS cm_ns,
    (arg_max(covered_a, t) - arg_min(covered_a, t))::BIGINT AS a_ns
FROM device_sweep
WHERE code = 4
GROUP BY rank, device
